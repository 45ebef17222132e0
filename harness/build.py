"""The engine build under test, and the Python environment it runs from.

`--sglang` takes a pip requirement (`sglang==0.5.23`), a git URL with a ref
(`git+https://github.com/sgl-project/sglang@<ref>#subdirectory=python`), or a
local checkout; `--patch` applies a diff to a copy of a local checkout. Each
build gets its own virtual environment under the cache, keyed by a hash of the
spec and patch, so the harness process never imports the engine or torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement

from harness.errors import BadInput, EngineError
from harness.record import BuildInfo

CACHE_ENV = "HARNESS_CACHE"
REPO_ROOT = Path(__file__).resolve().parent.parent
REFERENCE_MODULES = ("torch", "transformers", "dflash", "tokenizers", "safetensors")
INSTALL_TIMEOUT_S = 3600

BuildKind = Literal["installed", "pip", "git", "local"]


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "spec-harness")


@dataclass(frozen=True)
class BuildSpec:
    kind: BuildKind
    spec: str | None = None
    patch: Path | None = None

    @property
    def key(self) -> str:
        digest = hashlib.sha256(f"{self.kind}:{self.spec}".encode())
        if self.patch is not None:
            digest.update(self.patch.read_bytes())
        return digest.hexdigest()[:16]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse_build_spec(spec: str | None, patch: str | Path | None = None) -> BuildSpec:
    """Classify `--sglang SPEC`; a bad spec or a patch without a checkout is bad input."""
    patch_path = Path(patch) if patch is not None else None
    if patch_path is not None and not patch_path.is_file():
        raise BadInput(f"--patch: no such file {patch_path}")
    if spec is None:
        if patch_path is not None:
            raise BadInput("--patch needs --sglang pointing to a local checkout")
        return BuildSpec("installed")
    if spec.startswith("git+") or (spec.endswith(".git") and "://" in spec):
        kind: BuildKind = "git"
    elif Path(spec).expanduser().exists():
        path = Path(spec).expanduser().resolve()
        if not path.is_dir():
            raise BadInput(f"--sglang {spec}: a local build must be a checkout folder")
        return BuildSpec("local", str(path), patch_path)
    else:
        try:
            Requirement(spec)
        except InvalidRequirement as error:
            raise BadInput(
                f"--sglang {spec!r}: not a pip requirement (e.g. sglang==0.5.23), a git URL "
                f"(git+https://...@ref#subdirectory=python) or a local checkout: {error}"
            ) from None
        kind = "pip"
    if patch_path is not None:
        raise BadInput("--patch applies only to a local checkout (--sglang PATH)")
    return BuildSpec(kind, spec)


def _run(command: list[str], what: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                              timeout=INSTALL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise EngineError(f"{what} failed: {error}") from None
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise EngineError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def _git_sha(path: Path) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _package_root(checkout: Path) -> Path:
    # SGLang's repository keeps its Python package under python/.
    if (checkout / "python" / "pyproject.toml").is_file():
        return checkout / "python"
    if (checkout / "pyproject.toml").is_file() or (checkout / "setup.py").is_file():
        return checkout
    raise BadInput(f"--sglang {checkout}: no pyproject.toml in it or in its python/ folder")


def _patched_copy(build: BuildSpec, dest: Path) -> Path:
    assert build.spec is not None and build.patch is not None
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(build.spec, dest, ignore=shutil.ignore_patterns(".git", "__pycache__"))
    _run(["git", "apply", "--check", str(build.patch.resolve())], f"--patch {build.patch}", dest)
    _run(["git", "apply", str(build.patch.resolve())], f"--patch {build.patch}", dest)
    return dest


def installed_version(python: str, distribution: str) -> tuple[str | None, str | None]:
    """Version and VCS commit of a distribution in another environment (no import of it)."""
    probe = (
        "import importlib.metadata as m, json, sys\n"
        "try:\n d = m.distribution(sys.argv[1])\nexcept m.PackageNotFoundError:\n print('{}')\n"
        "else:\n u = d.read_text('direct_url.json')\n"
        " c = (json.loads(u).get('vcs_info') or {}).get('commit_id') if u else None\n"
        " print(json.dumps({'version': d.version, 'commit': c}))\n"
    )
    try:
        out = subprocess.run([python, "-c", probe, distribution], capture_output=True,
                             text=True, timeout=60, check=True).stdout
        data = json.loads(out.strip() or "{}")
    except (OSError, subprocess.SubprocessError, ValueError):
        return None, None
    return data.get("version"), data.get("commit")


def _ensure_venv(path: Path, requirements: list[str]) -> str:
    python = path / "bin" / "python"
    marker = path / ".harness-complete"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not marker.exists():
            if path.exists():
                shutil.rmtree(path)  # a half-made environment from an interrupted install
            _run([sys.executable, "-m", "venv", str(path)], f"creating {path}")
            _run([str(python), "-m", "pip", "install", "--quiet", *requirements],
                 f"pip install {' '.join(requirements)} into {path}")
            marker.write_text(json.dumps(requirements))
    return str(python)


def prepare_sglang(build: BuildSpec) -> tuple[str, BuildInfo]:
    """An interpreter that can run `python -m sglang.launch_server` for this build."""
    patch_sha = file_sha256(build.patch) if build.patch else None
    git_sha = None
    if build.kind == "installed":
        python = sys.executable
    else:
        env_dir = cache_root() / "envs" / f"sglang-{build.key}"
        if build.kind == "local":
            assert build.spec is not None
            checkout = Path(build.spec)
            git_sha = _git_sha(checkout)
            if build.patch is not None:
                checkout = _patched_copy(build, env_dir.with_name(env_dir.name + "-src"))
            requirement = str(_package_root(checkout))
        else:
            requirement = str(build.spec)
        python = _ensure_venv(env_dir, [requirement])
    version, commit = installed_version(python, "sglang")
    if version is None:
        raise EngineError(
            f"sglang is not installed in {python}; pass --sglang SPEC "
            "(e.g. sglang==0.5.23, a git URL with a ref, or a local checkout)"
        )
    from harness.provenance import redact_url

    spec = redact_url(build.spec) if build.spec else None
    info = BuildInfo(engine="sglang", spec=spec, version=version,
                     git_sha=git_sha or commit, patch_sha256=patch_sha, python=python)
    return python, info


def has_reference_dependencies(python: str) -> bool:
    probe = ("import importlib.util, sys\n"
             "sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)")
    try:
        return subprocess.run([python, "-c", probe, *REFERENCE_MODULES, "harness"],
                              capture_output=True, timeout=60, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def prepare_reference(engine_python: str | None = None) -> tuple[str, BuildInfo]:
    """The reference engine's environment: this one if it has torch & co, else a made one."""
    python = engine_python or sys.executable
    if not has_reference_dependencies(python):
        if engine_python is not None:
            raise EngineError(f"{python} lacks the reference engine's packages "
                              f"({', '.join(REFERENCE_MODULES)}); install spec-harness[reference]")
        if not (REPO_ROOT / "pyproject.toml").is_file():
            raise EngineError("the reference engine needs spec-harness[reference] installed "
                              "(pip install 'spec-harness[reference]')")
        python = _ensure_venv(cache_root() / "envs" / "reference", [f"{REPO_ROOT}[reference]"])
    version, _ = installed_version(python, "spec-harness")
    return python, BuildInfo(engine="reference", spec=None, version=version,
                             git_sha=_git_sha(REPO_ROOT), python=python)
