"""One small cached Python environment per `transformers` pin, for building draft configs.

SGLang builds a draft's config with the `transformers` its release pins (the wheel's
`Requires-Dist: transformers==X`). The audit does the same in
`<cache>/audit-envs/transformers-X/`: a venv made without pip, with `transformers` and its
own dependencies installed by this interpreter's pip (`pip --python`); no torch (configs
need none). Made once under a file lock, so parallel tests and runs share it; a marker file
says it is complete, and a half-made one is rebuilt. `run_worker` runs an audit worker
script in such an environment (or an engine's) and reads its JSON answer.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.audit.errors import AuditLimitError
from harness.errors import EngineError
from harness.files import cache_root

INSTALL_TIMEOUT_S = 900
LOCK_TIMEOUT_S = 1800
MARKER = ".harness-complete"
_EXACT = re.compile(r"^transformers\s*==\s*(?P<version>[0-9][0-9A-Za-z.+!-]*)$")


class AuditEnvError(EngineError):
    """A transformers environment could not be made (exit 3): the message says which step."""


def env_name(requirement: str) -> str:
    """`transformers-5.19.0` for an exact pin, else a digest of the requirement."""
    exact = _EXACT.match(requirement.strip())
    if exact:
        return f"transformers-{exact.group('version')}"
    return "transformers-" + hashlib.sha256(requirement.encode()).hexdigest()[:12]


@contextmanager
def file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """An exclusive flock on `path`, waited for at most `timeout_s` seconds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AuditEnvError(
                        f"waited {timeout_s:.0f} s for {path} (another process is making "
                        "this environment); try again, or delete the lock if none is"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def env_python(requirement: str, root: Path | None = None) -> Path | None:
    """The environment's interpreter if it is already complete, else None (no lock taken)."""
    path = (root or cache_root() / "audit-envs") / env_name(requirement)
    return path / "bin" / "python" if (path / MARKER).is_file() else None


def _run(command: list[str], what: str) -> None:
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=INSTALL_TIMEOUT_S, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AuditEnvError(f"{what}: no result after {INSTALL_TIMEOUT_S} s") from None
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-4:]
        raise AuditEnvError(f"{what} failed (exit {result.returncode}): " + " | ".join(tail))


def ensure_env(requirement: str, root: Path | None = None) -> Path:
    """The interpreter of the environment for this transformers requirement, made if needed."""
    if (ready := env_python(requirement, root)) is not None:
        return ready
    path = (root or cache_root() / "audit-envs") / env_name(requirement)
    with file_lock(path.with_name(path.name + ".lock")):
        python = path / "bin" / "python"
        if (path / MARKER).is_file():
            return python
        if path.exists():
            shutil.rmtree(path)  # a half-made environment from an interrupted install
        own_pip = importlib.util.find_spec("pip") is not None
        venv = [sys.executable, "-m", "venv", *([] if not own_pip else ["--without-pip"])]
        _run([*venv, str(path)], f"creating {path}")
        pip = ([sys.executable, "-m", "pip", "--python", str(python)] if own_pip
               else [str(python), "-m", "pip"])  # fmt: skip
        _run([*pip, "install", "--quiet", "--disable-pip-version-check", requirement],
             f"pip install {requirement} into {path} (needs the package index once)")
        (path / MARKER).write_text(json.dumps({"requirement": requirement}))
    return python


def run_worker(python: str | Path, worker: Path, request: Mapping[str, object],
               env: Mapping[str, str], timeout_s: float, name: str) -> dict[str, Any]:
    """The JSON answer of `worker` run by `python` (isolated, `-I`) with `request` on its
    stdin; AuditLimitError saying what `name`d worker took too long or failed (its exit
    code and last lines of stderr) when it answers no JSON."""
    try:
        done = subprocess.run([str(python), "-I", str(worker)], input=json.dumps(request),
                              capture_output=True, text=True, timeout=timeout_s,
                              env=dict(env), check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise AuditLimitError(f"{name} took over {timeout_s} s") from None
    try:
        answer: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise AuditLimitError(f"{name} failed (exit {done.returncode}): {tail}") from None
    return answer
