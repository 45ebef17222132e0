"""One SGLang version's audit inputs, read without importing SGLang.

From the installed package (located with `importlib.util.find_spec`), a wheel or sdist (read
straight out of the archive), a source checkout, or one commit of a git repository, it reads:
the resolver files, SGLang's transformers patches (`hf_transformers_patches.py`), the
`transformers` requirement the version pins, and, on demand, the config class it registers
for a `model_type`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.audit.clauses import CONTRACT_FILES
from harness.audit.extract import (
    DFLASH_MODEL,
    LOADER_COMMON,
    LOADER_FILE,
    RESOLVER_FILES,
    class_bases,
)
from harness.audit.trees import (
    ArchiveTree,
    FolderTree,
    GitTree,
    LazyArchiveTree,
    OverlayTree,
    Tree,
    resolve_ref,
)
from harness.audit.wheels import (  # fetch_wheels, cached_archive: re-exported (noxfile)
    ARCHIVE_SUFFIXES,
    SGLangSourceError,
    archive_for,
    archive_version,
    cached_archive,
    download_archive,
    fetch_wheels,
    wheel_cache_dir,
)
from harness.files import cache_root

__all__ = [
    "SGLangSource",
    "SGLangSourceError",
    "archive_source",
    "cached_archive",
    "checkout_source",
    "commit_source",
    "fetch_wheels",
    "installed_source",
    "patched_source",
    "source_for_build",
    "spec_source",
    "tree_source",
]

PATCHES_FILE = "sglang/srt/utils/hf_transformers_patches.py"
VERSION_FILE = "sglang/version.py"
SCM_VERSION_FILE = "sglang/_version.py"  # written by the build (setuptools-scm)
CONFIGS_DIR = "sglang/srt/configs/"
MODELS_DIR = "sglang/srt/models/"
# What the cached extract of an archive holds: a new file read makes a new extract.
EXTRACT_LAYOUT = hashlib.sha256("\0".join(
    (*RESOLVER_FILES, *CONTRACT_FILES, LOADER_FILE, LOADER_COMMON)).encode()).hexdigest()[:8]
# Where SGLang's _CONFIG_REGISTRY (model_type -> its own config class) is built.
REGISTRY_FILES = ("sglang/srt/utils/hf_transformers/common.py",
                  "sglang/srt/utils/hf_transformers_utils.py")  # fmt: skip
_FOUND: dict[tuple[str, str], dict[str, str]] = {}  # (identity, what) -> what was found
_EXACT_SPEC = re.compile(r"^sglang\s*==\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)$")
_BARE_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!-]*$")
_VERSION_ASSIGN = re.compile(
    r"""^__version__\s*=\s*(?:version\s*=\s*)?["'](?P<version>[^"']+)["']""", re.MULTILINE
)
_REQUIRES_TRANSFORMERS = re.compile(
    r"^Requires-Dist:\s*(?P<req>transformers\b[^;\n]*)(?P<marker>;.*)?$", re.MULTILINE
)


@dataclass(frozen=True)
class SGLangSource:
    """What the audit reads of one SGLang version, and where it came from."""

    version: str | None
    origin: str  # the wheel, sdist, checkout, installed folder, or repo@commit
    kind: str  # "installed", "wheel", "sdist", "checkout", "commit"
    files: Mapping[str, str]  # RESOLVER_FILES path -> source text
    patches: Mapping[str, str] = field(default_factory=dict)  # "patches" -> its text
    loader: Mapping[str, str] = field(default_factory=dict)  # SGLang's HF config parser files
    transformers: str | None = None  # the pinned requirement, e.g. "transformers==5.19.0"
    identity: str = ""  # same identity, same answer (cache key)
    # The model runner's tap resolution and the DFLASH worker (CONTRACT_FILES), when present
    contract_files: Mapping[str, str] = field(default_factory=dict)
    tree: Tree | None = field(default=None, compare=False, repr=False)
    commit: str | None = None
    subject: str | None = None

    @property
    def label(self) -> str:
        if self.kind == "commit" and self.commit:
            return f"{self.commit[:10]}"
        if self.kind == "patched" and self.subject:
            return f"sglang {self.subject}"
        return f"sglang {self.version or '(unknown version)'}"

    @property
    def short(self) -> str:
        """Column heading: the version, or the commit."""
        return self.label.removeprefix("sglang ")

    def describe(self) -> str:
        return f"{self.label} ({self.kind} {self.origin})"

    def config_class(self, model_type: str) -> dict[str, str] | None:
        """The config class this version registers for `model_type`, as {path, name, text}."""
        if self.tree is None or not model_type:
            return None
        found = self._remembered(f"config-class\0{model_type}",
                                 lambda: self._find_config_class(model_type) or {})
        return found or None

    def _find_config_class(self, model_type: str) -> dict[str, str] | None:
        assert self.tree is not None
        registry = "".join(self.tree.read(p) or "" for p in REGISTRY_FILES)
        for path in self.tree.grep(CONFIGS_DIR, model_type):
            text = self.tree.read(path) or ""
            name = _class_with_model_type(text, model_type)
            if name and re.search(rf"\b{re.escape(name)}\b", registry):
                return {"path": path, "name": name, "text": text, "model_type": model_type}
        return None

    def model_files(self, architecture: str) -> dict[str, str]:
        """The model file defining `architecture` (a target's class, such as
        Qwen3ForCausalLM) and the files of its base classes: {path: text}, empty when this
        version has no such class."""
        if self.tree is None or not architecture:
            return {}
        return self._remembered(f"model-files\0{architecture}",
                                lambda: self._find_model_files(architecture))

    def _remembered(self, what: str, find: Callable[[], dict[str, str]]) -> dict[str, str]:
        """What `find` found in this tree, remembered in the process and, for a release or a
        commit (which never change), on disk: the search reads a whole folder of the tree."""
        key = (self.identity, what)
        if key in _FOUND:
            return _FOUND[key]
        path = None
        if self.kind in ("wheel", "sdist", "commit"):
            name = hashlib.sha256(f"{self.identity}\0{what}".encode()).hexdigest()[:24]
            path = cache_root() / "audit" / "archives" / f"found-{name}.json"
            if path.is_file():
                _FOUND[key] = dict(json.loads(path.read_text(encoding="utf-8")))
                return _FOUND[key]
        _FOUND[key] = find()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(_FOUND[key]))
            temporary.replace(path)
        return _FOUND[key]

    def _find_model_files(self, architecture: str) -> dict[str, str]:
        assert self.tree is not None
        found: dict[str, str] = {}
        pending, seen = [architecture], set[str]()
        while pending and len(seen) < 8:
            name = pending.pop(0)
            if name in seen:
                continue
            seen.add(name)
            for path in self.tree.grep(MODELS_DIR, f"class {name}("):
                text = self.tree.read(path) or ""
                if re.search(rf"^class {re.escape(name)}\(", text, re.MULTILINE):
                    found.setdefault(path, text)
                    pending.extend(class_bases(text, path, name))
                    break
        return found


def _class_with_model_type(text: str, model_type: str) -> str | None:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if (isinstance(item, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "model_type" for t in item.targets)
                    and isinstance(item.value, ast.Constant) and item.value.value == model_type):
                return node.name
    return None


def _digest(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def transformers_from_metadata(text: str | None) -> str | None:
    """`transformers==X` from a METADATA/PKG-INFO text (requirements under an extra skipped)."""
    for match in _REQUIRES_TRANSFORMERS.finditer(text or ""):
        if "extra" not in (match.group("marker") or ""):
            return re.sub(r"\s+", "", match.group("req"))
    return None


def transformers_from_pyproject(text: str | None) -> str | None:
    if not text:
        return None
    try:
        dependencies = tomllib.loads(text).get("project", {}).get("dependencies", [])
    except tomllib.TOMLDecodeError:
        return None
    for requirement in dependencies:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        if name.lower() == "transformers" and "extra" not in requirement.partition(";")[2]:
            return re.sub(r"\s+", "", requirement.partition(";")[0])
    return None


def _build(tree: Tree, version: str | None, origin: str, kind: str,
           transformers: str | None, identity: str, **extra: str | None) -> SGLangSource:
    missing = [path for path in RESOLVER_FILES if tree.read(path) is None]
    if missing:
        raise SGLangSourceError(
            f"sglang {version or '(unknown version)'} at {origin} has no {', '.join(missing)}: "
            "this version's DFlash resolver cannot be found"
        )
    files = {path: tree.read(path) or "" for path in RESOLVER_FILES}
    patches = {"patches": text} if (text := tree.read(PATCHES_FILE)) is not None else {}
    loader = {path: text for path in (LOADER_FILE, LOADER_COMMON)
              if (text := tree.read(path)) is not None}  # fmt: skip
    contract = {path: text for path in CONTRACT_FILES if (text := tree.read(path)) is not None}
    version = (version or _read_version(tree.read(SCM_VERSION_FILE))
               or _read_version(tree.read(VERSION_FILE)))
    identity = identity or _digest(*files.values(), *patches.values(), *loader.values(),
                                   *contract.values(), transformers or "")  # fmt: skip
    return SGLangSource(version, origin, kind, files, patches, loader, transformers, identity,
                        contract, tree, **extra)


def _read_version(text: str | None) -> str | None:
    match = _VERSION_ASSIGN.search(text or "")
    return match.group("version") if match else None


def installed_source() -> SGLangSource:
    """The installed sglang, found without importing it (importing pulls in torch and CUDA)."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise SGLangSourceError("sglang is not installed in this Python environment")
    parent = Path(next(iter(spec.submodule_search_locations))).parent
    try:
        version: str | None = importlib.metadata.version("sglang")
        requires = importlib.metadata.requires("sglang") or []
    except importlib.metadata.PackageNotFoundError:
        version, requires = None, []
    pin = transformers_from_metadata("\n".join(f"Requires-Dist: {r}" for r in requires))
    tree = FolderTree(parent)
    return _build(tree, version, str(parent), "installed",
                  pin or transformers_from_pyproject(tree.read("pyproject.toml")), "")


def checkout_source(path: str | os.PathLike[str]) -> SGLangSource:
    """A source checkout: the repository root, its `python/` folder, or the package folder."""
    root = Path(path).expanduser()
    if not root.exists():
        raise SGLangSourceError(f"SGLang source path {root} does not exist")
    # A clone is often itself named `sglang`: try every layout rather than guess from names.
    for candidate in (root / "python", root, root.parent):
        if (candidate / DFLASH_MODEL).is_file():
            tree = FolderTree(candidate)
            pin = transformers_from_pyproject(tree.read("pyproject.toml"))
            version = (_read_version(tree.read(SCM_VERSION_FILE))
                       or _read_version(tree.read(VERSION_FILE)))  # fmt: skip
            if pin is None:  # an installed package's folder (site-packages): its dist-info
                pin = _dist_info_pin(candidate, version)
            return _build(tree, version, str(candidate), "checkout", pin, "")
    raise SGLangSourceError(
        f"sglang (unknown version) at {root} has no {', '.join(RESOLVER_FILES)}: "
        "this version's DFlash resolver cannot be found"
    )


def _dist_info_pin(folder: Path, version: str | None) -> str | None:
    """The pin in `sglang-<version>.dist-info` beside the package, else in any sglang one."""
    found = sorted(folder.glob("sglang-*.dist-info/METADATA"))
    exact = [m for m in found if version and m.parent.name == f"sglang-{version}.dist-info"]
    for metadata in exact + found:
        if pin := transformers_from_metadata(metadata.read_text(encoding="utf-8")):
            return pin
    return None


def archive_source(path: str | os.PathLike[str]) -> SGLangSource:
    """A wheel or sdist, read without unpacking it; what the audit reads of it is kept in
    `<cache>/audit/archives/` (a wheel's index alone takes a noticeable time to read)."""
    archive = Path(path).expanduser()
    if not archive.is_file():
        raise SGLangSourceError(f"SGLang archive {archive} does not exist")
    stat = archive.stat()
    identity = _digest(archive.name, str(stat.st_size), str(stat.st_mtime_ns))
    kind = "wheel" if archive.name.endswith(".whl") else "sdist"
    extract = cache_root() / "audit" / "archives" / f"{identity}-{EXTRACT_LAYOUT}.json"
    if extract.is_file():
        data = json.loads(extract.read_text(encoding="utf-8"))
        return SGLangSource(data["version"], str(archive), kind, data["files"], data["patches"],
                            data["loader"], data["transformers"], identity,
                            data["contract_files"], LazyArchiveTree(archive))
    tree = ArchiveTree(archive)
    pin = (transformers_from_metadata(tree.read("METADATA") or tree.read("PKG-INFO"))
           or transformers_from_pyproject(tree.read("pyproject.toml")))  # fmt: skip
    source = _build(tree, archive_version(archive.name), str(archive), kind, pin, identity)
    extract.parent.mkdir(parents=True, exist_ok=True)
    temporary = extract.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps({"version": source.version, "files": dict(source.files),
                                     "patches": dict(source.patches),
                                     "loader": dict(source.loader),
                                     "contract_files": dict(source.contract_files),
                                     "transformers": source.transformers}))  # fmt: skip
    temporary.replace(extract)
    return source


def commit_source(repo: Path, commit: str, subject: str | None = None) -> SGLangSource:
    """One commit of a local SGLang checkout (package under `python/`, or at the root)."""
    prefix = "python/" if GitTree(repo, commit, "python/").read(DFLASH_MODEL) else ""
    tree = GitTree(repo, commit, prefix)
    pin = transformers_from_pyproject(tree.read("pyproject.toml"))
    return _build(tree, None, f"{repo}@{commit[:10]}", "commit", pin, _digest(str(repo), commit),
                  commit=commit, subject=subject)


def spec_source(spec: str, cache: Path | None = None) -> SGLangSource:
    """`--sglang SPEC`: `installed`, an archive path, `sglang==X`, `X`, or any pip requirement."""
    spec = spec.strip()
    if spec == "installed":
        return installed_source()
    path = Path(spec).expanduser()
    if spec.endswith(ARCHIVE_SUFFIXES) or os.sep in spec:
        return checkout_source(path) if path.is_dir() else archive_source(path)
    exact = _EXACT_SPEC.match(spec)
    version = exact.group("version") if exact else spec if _BARE_VERSION.match(spec) else None
    if version is not None:
        return archive_source(archive_for(version, cache))
    if not spec.startswith("sglang"):
        raise SGLangSourceError(
            f"--sglang {spec!r} is not a version, a sglang requirement, an archive or 'installed'"
        )
    return archive_source(download_archive(spec, cache or wheel_cache_dir()))


def source_for_build(build: SGLangSource | str | os.PathLike[str] | None) -> SGLangSource:
    """An engine build as audit source: an SGLangSource, a checkout folder, a wheel or
    sdist file, `installed` or None (the installed package), or a spec like `sglang==0.5.23`."""
    if isinstance(build, SGLangSource):
        return build
    if build is None or str(build) == "installed":
        return installed_source()
    path = Path(build).expanduser()
    if path.is_dir():
        return checkout_source(path)
    if path.is_file():
        return archive_source(path)
    return spec_source(str(build))


PATCH_PREFIX = "python/"  # SGLang's repository layout: the package under python/
PATCH_SUFFIXES = (".diff", ".patch")


def _git_apply(folder: Path, patch: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(folder.parent),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    try:
        done = subprocess.run(["git", "apply", f"--include={PATCH_PREFIX}sglang/*", *args,
                               str(patch)], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=60, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SGLangSourceError(f"git apply {patch}: {error}") from None
    if done.returncode != 0:
        raise SGLangSourceError(f"{patch} does not apply to that sglang: "
                                f"{done.stderr.strip()[:400]}")
    return done.stdout


def patched_source(base: SGLangSource, patch: str | os.PathLike[str]) -> SGLangSource:
    """`base` with a diff in SGLang's repository layout (`python/sglang/...`) applied to the
    files it changes: a release plus a PR, judged before anything is built."""
    path = Path(patch).expanduser()
    if not path.is_file():
        raise SGLangSourceError(f"patch {patch}: no such file")
    if base.tree is None:
        raise SGLangSourceError(f"{base.describe()} cannot be patched (its files are not "
                                "readable as a tree)")
    with tempfile.TemporaryDirectory(prefix="harness-audit-patch-") as scratch:
        folder = Path(scratch)
        listed = _git_apply(folder, path.resolve(), "--numstat")
        touched = [line.split("\t", 2)[2] for line in listed.splitlines()
                   if line.count("\t") >= 2]
        if not touched:
            raise SGLangSourceError(f"patch {patch} changes no file under "
                                    f"{PATCH_PREFIX}sglang/")
        for name in touched:
            text = base.tree.read(name.removeprefix(PATCH_PREFIX))
            if text is not None:
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(text, encoding="utf-8")
        _git_apply(folder, path.resolve())
        changed: dict[str, str | None] = {}
        for name in touched:
            file = folder / name
            changed[name.removeprefix(PATCH_PREFIX)] = (
                file.read_text(encoding="utf-8") if file.is_file() else None)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    tree = OverlayTree(base.tree, changed)
    return _build(tree, base.version, f"{base.origin} + {path}", "patched", base.transformers,
                  _digest(base.identity, digest), commit=None,
                  subject=f"{base.short} + {path.name}")


def tree_source(spec: str) -> SGLangSource:
    """One side of `--change`: a release (`0.5.23`), a wheel, a checkout, `REPO@REF` (one
    commit of a local checkout), or any of those `+PATCH.diff` (a PR on top of it)."""
    base, plus, patch = spec.rpartition("+")
    if plus and patch.endswith(PATCH_SUFFIXES) and base:
        return patched_source(tree_source(base), patch)
    repo, at, ref = spec.rpartition("@")
    if at and repo and Path(repo).expanduser().is_dir():
        sha, subject = resolve_ref(Path(repo).expanduser(), ref)
        return commit_source(Path(repo).expanduser(), sha, subject)
    return source_for_build(spec)
