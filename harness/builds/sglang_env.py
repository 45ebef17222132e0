"""SGLang builds: resolve a spec to what it names now, install it once per identity.

The cache key is the resolved identity, not the spec's text: a git spec's commit
(`git ls-remote`), a local checkout's HEAD and the tree id of its working state, a
patch's hash. Each identity gets its own environment under the cache; a changed
source gets a new one, an unchanged one is reused. A local checkout is installed from
a snapshot of exactly the tree that was hashed, taken under the environment's lock; on a
CPU host it is served instead as an overlay on the CPU environment of its release
(`overlay`). What the record says about the build is read back from the environment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.builds import gitrepo, overlay
from harness.builds.common import file_sha256, run_command, short_sha256
from harness.builds.envs import ensure_env
from harness.builds.patched import Patch, patched_tree, tree_sha256
from harness.builds.probe import BUILD_NOTE, EnvironmentFacts, probe_environment, save_freeze
from harness.builds.sglang_cpu import (
    CPU_TORCH,
    CPU_TRITON,
    RECIPE,
    host_device,
    install_cpu_sglang,
    torch_source,
)
from harness.builds.spec import BuildSpec, parse_build_spec, split_git_url
from harness.errors import BadInput, EngineError
from harness.files import cache_root
from harness.results.record import BuildInfo
from harness.secrets import redact_text

PIP_ARGS_ENV = "HARNESS_PIP_ARGS"  # extra `pip install` arguments, part of the identity
_SKIP = {".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


@dataclass(frozen=True)
class ResolvedBuild:
    """A build spec pinned to what it names now; `key` names its environment."""

    build: BuildSpec
    requirement: str | None = None  # what pip installs (local: the snapshot's package folder)
    commit: str | None = None
    dirty: bool | None = None
    source_hash: str | None = None  # "git-tree:<id>" or "sha256:<files>" of a local source
    patch_sha256: str | None = None
    pip_args: tuple[str, ...] = ()
    subdirectory: str = ""  # the package's folder inside a local checkout
    identity: dict[str, Any] = field(default_factory=dict)
    # An overlay (a local checkout on a CPU host): the release whose environment it runs
    # in, and the checkout's [project] dependencies (None: it has no pyproject.toml).
    base: ResolvedBuild | None = None
    dependencies: tuple[str, ...] | None = None

    @property
    def method(self) -> str:
        return overlay.METHOD if self.base is not None else "install"

    @property
    def key(self) -> str:
        return short_sha256(json.dumps(self.identity, sort_keys=True))

    @property
    def device(self) -> str:
        """"cpu" for a release installed by the CPU recipe, else "cuda"."""
        return str(self.identity.get("device", "cuda"))

    @property
    def env_dir(self) -> Path:
        if self.base is not None:  # an overlay runs in its release's environment
            return self.base.env_dir
        return cache_root() / "envs" / f"sglang-{self.key}"


def pip_args() -> tuple[str, ...]:
    return tuple(shlex.split(os.environ.get(PIP_ARGS_ENV, "")))


def _package_subdirectory(exists: Callable[[str], bool], where: str) -> str:
    # SGLang's repository keeps its Python package under python/.
    if exists("python/pyproject.toml"):
        return "python"
    if exists("pyproject.toml") or exists("setup.py"):
        return ""
    raise BadInput(f"--sglang {where}: no pyproject.toml in it or in its python/ folder")


def folder_sha256(folder: Path) -> str:
    """sha256 over a folder's files (names and contents; caches and .git left out)."""
    return _folder_sha256(folder)


def _folder_sha256(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if _SKIP.intersection(path.relative_to(folder).parts) or path.suffix == ".pyc":
            continue
        if path.is_file() and not path.is_symlink():
            digest.update(f"{path.relative_to(folder).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def resolve_build(build: BuildSpec, *, offline: bool = False) -> ResolvedBuild:
    """Pin a build to its identity. `offline`: a git URL's moving ref is not looked up
    (the key is then the spec's text; for dry runs only)."""
    extra = pip_args()
    base: dict[str, Any] = {"kind": build.kind, "pip_args": list(extra)}
    if build.kind == "pip":
        identity = {**base, "requirement": build.spec}
        if host_device() == "cpu":  # a release's CUDA pins cannot start here: the CPU recipe
            identity |= {"device": "cpu", "recipe": RECIPE, "torch": CPU_TORCH,
                         "triton": CPU_TRITON}
            if torch_source():  # another torch build: another environment
                identity["torch_source"] = torch_source()
        return ResolvedBuild(build, build.spec, pip_args=extra, identity=identity)
    if build.kind == "git":
        return _resolve_git(build, extra, base, offline)
    if build.kind == "local":
        return _resolve_local(build, extra, base)
    raise BadInput(f"{build.kind} builds are not SGLang builds to install")


def _resolve_git(build: BuildSpec, extra: tuple[str, ...], base: dict[str, Any],
                 offline: bool) -> ResolvedBuild:
    url, ref, fragment = split_git_url(build.spec or "")
    if ref and gitrepo.FULL_SHA.match(ref):
        commit: str | None = ref
    elif offline:
        commit = None
    else:
        commit = gitrepo.ls_remote(url, ref)
        if commit is None and not (ref and gitrepo.SHORT_SHA.match(ref)):
            raise BadInput(f"--sglang {build.spec}: {url} has no branch or tag {ref or 'HEAD'}")
    pinned = commit or ref  # a short sha names one commit; pip resolves it when it clones
    requirement = f"git+{url}" + (f"@{pinned}" if pinned else "") + fragment
    identity = {**base, "url": url, "commit": pinned, "fragment": fragment}
    if offline and commit is None:
        identity["spec"] = build.spec
    return ResolvedBuild(build, requirement, commit=commit, pip_args=extra, identity=identity)


def _resolve_local(build: BuildSpec, extra: tuple[str, ...], base: dict[str, Any],
                   snapshot_to: Path | None = None) -> ResolvedBuild:
    folder = Path(build.spec or ".")
    root = gitrepo.toplevel(folder)
    patch_sha = file_sha256(build.patch) if build.patch else None
    if root is None:
        if build.ref:
            raise BadInput(f"--sglang {build.text}: {folder} is not a git checkout, so it has "
                           "no refs")
        if snapshot_to is not None:  # hash the copy: what is installed is what was hashed
            if snapshot_to.exists():
                shutil.rmtree(snapshot_to)
            shutil.copytree(folder, snapshot_to, symlinks=True,
                            ignore=shutil.ignore_patterns(*_SKIP, "*.pyc"))
        top = snapshot_to or folder
        commit, dirty, source_hash = None, None, f"sha256:{_folder_sha256(top)}"
        inside, read = "", _reader_in(top, None, "", None)
    else:
        state = (gitrepo.commit_state(root, build.ref, snapshot_to) if build.ref
                 else gitrepo.working_state(root, snapshot_to))
        commit, dirty, source_hash = state.commit, state.dirty, f"git-tree:{state.tree}"
        inside = folder.resolve().relative_to(root.resolve()).as_posix()
        inside = "" if inside == "." else inside
        read = _reader_in(root, state.commit if build.ref else None, inside, snapshot_to)
    where = build.text or str(folder)
    # an SGLang checkout on a CPU host is an overlay (vLLM's local builds resolve here too)
    on_cpu = host_device() == "cpu" and build.engine == "sglang"
    package = (overlay.package_folder(read, where) if on_cpu
               else _package_subdirectory(lambda name: read(name) is not None, where))
    subdirectory = "/".join(filter(None, [inside, package]))
    identity = {**base, "commit": commit, "source": source_hash, "subdirectory": subdirectory,
                "patch": patch_sha}
    resolved = ResolvedBuild(build, None, commit=commit, dirty=dirty, source_hash=source_hash,
                             patch_sha256=patch_sha, pip_args=extra, subdirectory=subdirectory,
                             identity=identity)
    if not on_cpu:
        return resolved
    return _as_overlay(resolved, read, package, where, lambda: gitrepo.nearest_tag(
        root, commit or "HEAD") if root is not None else None)


def _reader_in(root: Path, commit: str | None, inside: str,
               snapshot_to: Path | None) -> overlay.Reader:
    """A file's text in the tree being built (for PATH@REF: the commit's tree), or None."""
    def read(name: str) -> str | None:
        relative = "/".join(filter(None, [inside, name]))
        if commit is not None and snapshot_to is None:
            return gitrepo.show_file(root, commit, relative)
        path = (snapshot_to or root) / relative
        try:
            return path.read_text(errors="replace") if path.is_file() else None
        except OSError:
            return None
    return read


def _as_overlay(local: ResolvedBuild, read: overlay.Reader, package: str, where: str,
                nearest_tag: Callable[[], str | None]) -> ResolvedBuild:
    """A local checkout on a CPU host: its package over its release's CPU environment.
    The identity is the checkout's (commit, tree, patch) and the release's."""
    version, version_from = overlay.tree_version(read, package, where, nearest_tag)
    release = resolve_build(parse_build_spec(f"sglang=={version}"))
    pyproject = read("/".join(filter(None, [package, overlay.PYPROJECT])))
    dependencies = (overlay.project_dependencies(pyproject, where) if pyproject is not None
                    else None)
    identity = {**local.identity, "device": "cpu", "method": overlay.METHOD,
                "version": version, "version_from": version_from,
                "base": release.identity}
    return dataclasses.replace(local, identity=identity, base=release,
                               dependencies=dependencies)


def snapshot_source(resolved: ResolvedBuild, dest: Path) -> Path:
    """Write the resolved local source (and its patch, unless an overlay: the patched
    tree applies it) to `dest`; the package folder. The source is hashed again as it is
    written: an edit since resolving is an error."""
    build = resolved.build
    base = {"kind": build.kind, "pip_args": list(resolved.pip_args)}
    again = _resolve_local(build, resolved.pip_args, base, snapshot_to=dest)
    if again.identity != resolved.identity:
        raise EngineError(f"--sglang {build.text} changed while it was being built "
                          f"({resolved.source_hash} -> {again.source_hash}); run again")
    if build.patch is not None and resolved.base is None:
        patch = str(build.patch.resolve())
        what = f"--patch {build.patch}"
        # Outside any repository (even if the cache lies in one), paths are the patch's own.
        env = gitrepo.git_env({"GIT_CEILING_DIRECTORIES": str(dest.parent)})
        for check in (["--check"], []):
            run_command(["git", "apply", *check, patch], what, timeout_s=60, cwd=dest, env=env)
    return dest / resolved.subdirectory if resolved.subdirectory else dest


def _install(resolved: ResolvedBuild) -> str:
    """The environment of a resolved build, made once (under its lock) and then reused.
    An overlay's is its release's, whose kept dependencies the checkout must match."""
    if resolved.base is not None:
        where = resolved.build.text or ""
        version = str(resolved.identity["version"])
        try:
            python = _install(resolved.base)
        except EngineError as error:
            raise overlay.release_error(error, version, where) from None
        note = json.loads((resolved.base.env_dir / BUILD_NOTE).read_text())
        overlay.check_dependencies(resolved.dependencies,
                                   (note.get("installed") or {}).get("dependencies", []),
                                   where, f"sglang=={version}")
        return python
    def install_args(scratch: Path) -> list[str]:
        # A local source is snapshotted under the lock, into the build's scratch folder.
        return [resolved.requirement or str(snapshot_source(resolved, scratch))]

    note = {"spec": resolved.build.text, "kind": resolved.build.kind,
            "requirement": resolved.requirement, "commit": resolved.commit,
            "ref": resolved.build.ref, "dirty": resolved.dirty,
            "source_hash": resolved.source_hash, "patch_sha256": resolved.patch_sha256,
            "key": resolved.key, "identity": resolved.identity, "device": resolved.device}
    what = f"building {resolved.build.text}"
    installer = None
    if resolved.device == "cpu":
        def installer(pip: list[str], python: Path, args: list[str],
                      scratch: Path) -> dict[str, Any]:
            return install_cpu_sglang(pip, python, args[0], scratch, resolved.pip_args, what)
    return ensure_env(resolved.env_dir, what, install_args, note, resolved.pip_args,
                      installer=installer)


def planned_python(build: BuildSpec) -> str:
    """The interpreter a run of `build` would use, for `--dry-run` (builds nothing, and
    looks up no remote ref: a moving git ref shows a placeholder)."""
    if build.kind == "installed":
        return sys.executable
    resolved = resolve_build(build, offline=True)
    if build.kind == "git" and resolved.commit is None:
        return str(cache_root() / "envs" / "sglang-<resolved at build time>" / "bin" / "python")
    return str(resolved.env_dir / "bin" / "python")


@dataclass(frozen=True)
class PreparedBuild:
    python: str
    info: Any  # harness.results.record.BuildInfo
    facts: EnvironmentFacts
    resolved: ResolvedBuild | None = None


def prepare(build: BuildSpec, python: str | None = None,
            test_patches: Sequence[Path] | Callable[[str], Sequence[Path]] = ()
            ) -> PreparedBuild:
    """An interpreter that can run `python -m sglang.launch_server` for this build, and
    the build's provenance as read back from that interpreter's environment. `python`
    (`--engine-python`): the interpreter of an installed SGLang (an "installed" build).
    `test_patches` (a suite's engine.test_patches, or a function of the installed
    release giving them) and, for a pip or git build, the build's `--patch` are applied
    to a copy of the installed package (`patched`)."""
    resolved = None if build.kind == "installed" else resolve_build(build)
    if resolved is None:
        python = python or sys.executable
        if not Path(python).exists():
            raise BadInput(f"--engine-python {python}: no such interpreter")
    else:
        python = _install(resolved)
    facts = probe_environment(python)
    if facts.sglang_version is None:
        raise EngineError(f"sglang is not installed in {python}; pass --sglang SPEC "
                          "(e.g. sglang==0.5.23, a git URL with a ref, or a local checkout)")
    if callable(test_patches):  # per release: the installed one's
        test_patches = test_patches(facts.sglang_version)
    facts = _with_patches(build, facts, resolved, test_patches)
    return PreparedBuild(python, build_info(build, facts), facts, resolved)


def _with_patches(build: BuildSpec, facts: EnvironmentFacts, resolved: ResolvedBuild | None,
                  test_patches: Sequence[Path]) -> EnvironmentFacts:
    """The facts of the patched tree when there is anything to patch or overlay (a
    local build's `--patch` was applied to its snapshot before installing: not again;
    an overlay's is applied here, first, as a pip build's)."""
    over = resolved if resolved is not None and resolved.base is not None else None
    patches = [Patch(build.patch, "--patch")] if build.patch and (
        build.kind != "local" or over is not None) else []
    patches += [Patch(Path(p), "engine.test_patches") for p in test_patches]
    if not patches and over is None:
        return facts
    if facts.sglang_parent is None:
        raise EngineError(f"cannot locate sglang's package folder in {facts.python}")
    base = resolved.key if resolved is not None else f"{facts.python}:{facts.freeze_sha256}"
    source = None
    if over is not None:
        def source(scratch: Path) -> Path:  # the checkout's package, snapshotted at its commit
            return snapshot_source(over, scratch)
    tree = patched_tree(Path(facts.sglang_parent), base, patches, folder_sha256, source)
    applied = tuple({"role": p.role, "path": str(p.path), "sha256": p.sha256}
                    for p in patches)
    facts = dataclasses.replace(facts, sglang_parent=str(tree), patched_tree=str(tree),
                                patches=applied, patched_source=tree_sha256(tree))
    return facts if over is None else dataclasses.replace(
        facts, build_note=_overlay_note(over, facts.build_note or {}))


def _overlay_note(resolved: ResolvedBuild, release_note: dict[str, Any]) -> dict[str, Any]:
    """What the record says about an overlay: the checkout's commit and tree, "overlay",
    and the release and environment key it runs over (its recipe's facts kept)."""
    assert resolved.base is not None
    return {**release_note, "spec": resolved.build.text, "kind": resolved.build.kind,
            "requirement": None, "commit": resolved.commit, "ref": resolved.build.ref,
            "dirty": resolved.dirty, "source_hash": resolved.source_hash,
            "patch_sha256": resolved.patch_sha256, "key": resolved.base.key,
            "method": overlay.METHOD, "overlay_key": resolved.key,
            "base": {"spec": resolved.base.build.text, "key": resolved.base.key}}


def build_info(build: BuildSpec, facts: EnvironmentFacts) -> Any:
    """BuildInfo from what the environment holds: its metadata and the harness's note."""
    note = facts.build_note or {}
    commit, dirty, source_hash = note.get("commit"), note.get("dirty"), note.get("source_hash")
    source_hash = facts.patched_source or source_hash  # a patched tree is what runs
    if not note and facts.editable_folder is not None:
        # An editable install runs its source folder's code: that folder is what is installed.
        commit, dirty = gitrepo.head_state(facts.editable_folder)
    direct_url = facts.direct_url
    if direct_url and "url" in direct_url:
        direct_url = {**direct_url, "url": redact_text(str(direct_url["url"]))}
    spec = build.text
    return BuildInfo(
        engine="sglang", spec=redact_text(spec) if spec else None,
        version=facts.sglang_version, git_sha=commit or facts.sglang_commit,
        patch_sha256=note.get("patch_sha256") or next(
            (p["sha256"] for p in facts.patches if p["role"] == "--patch"), None),
        python=facts.python,
        git_dirty=dirty, source_hash=source_hash, ref=build.ref,
        build_key=note.get("key"), method=note.get("method"), base=note.get("base"),
        direct_url=direct_url,
        freeze_sha256=facts.freeze_sha256, freeze_path=str(save_freeze(facts)))

