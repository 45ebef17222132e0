"""Provenance: everything needed to say what ran where, and nothing secret.

Versions of the engine's packages are read from its environment's metadata
and files, never by importing torch into the harness process.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from harness import __version__
from harness.preflight import driver_version
from harness.record import GPUInfo, Provenance
from harness.secrets import is_secret_name, redact_argv, redact_url

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_PREFIXES = ("CUDA_", "SGLANG_", "HARNESS_", "NCCL_", "TORCH_", "OMP_", "HF_HUB_OFFLINE")

_PROBE = """
import importlib.metadata as m, importlib.util as u, json, pathlib, re
out = {}
try:
    out["torch"] = m.version("torch")
except m.PackageNotFoundError:
    out["torch"] = None
spec = u.find_spec("torch")
if spec and spec.submodule_search_locations:
    version_py = pathlib.Path(list(spec.submodule_search_locations)[0]) / "version.py"
    if version_py.is_file():
        found = re.search(r"^cuda[^=]*=\\s*['\\"]([^'\\"]+)", version_py.read_text(), re.M)
        out["cuda"] = found.group(1) if found else None
print(json.dumps(out))
"""


def safe_env(env: Mapping[str, str], extra_names: Iterable[str] = ()) -> dict[str, str]:
    """Allow-listed variables only; anything that looks like a credential is dropped."""
    wanted = set(extra_names)
    return {
        name: redact_url(value)
        for name, value in sorted(env.items())
        if (name in wanted or name.startswith(ENV_PREFIXES)) and not is_secret_name(name)
    }


def harness_git() -> tuple[str | None, bool | None]:
    git = shutil.which("git")
    if git is None or not (REPO_ROOT / ".git").exists():
        return None, None
    try:
        sha = subprocess.run([git, "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
        status = subprocess.run([git, "-C", str(REPO_ROOT), "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    if sha.returncode != 0:
        return None, None
    return sha.stdout.strip(), bool(status.stdout.strip())


def engine_versions(python: str | None) -> dict[str, str | None]:
    if not python:
        return {}
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        return json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}


def collect(
    engine_python: str | None,
    gpus: Sequence[GPUInfo],
    server_env: Mapping[str, str],
    data_source: str | None,
    data_sha256: str | None,
    seed: int | None,
) -> Provenance:
    sha, dirty = harness_git()
    versions = engine_versions(engine_python)
    return Provenance(
        harness_version=__version__,
        harness_git_sha=sha,
        harness_git_dirty=dirty,
        python=sys.version.split()[0],
        platform=platform.platform(),
        hostname=socket.gethostname(),
        torch=versions.get("torch"),
        cuda=versions.get("cuda"),
        driver=driver_version(),
        gpus=list(gpus),
        data_source=data_source,
        data_sha256=data_sha256,
        seed=seed,
        argv=redact_argv(sys.argv),
        env=safe_env({**os.environ, **server_env}, server_env.keys()),
    )
