"""Bounded waits for the build: subprocesses, file locks, and stale partial builds.

Every wait here has a limit and ends with a message that says what was waited for,
for how long, and what to do; the message of an exception is never empty.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from harness.errors import EngineError, error_text
from harness.secrets import redact_text

LOCK_TIMEOUT_ENV = "HARNESS_LOCK_TIMEOUT_S"
INSTALL_TIMEOUT_ENV = "HARNESS_INSTALL_TIMEOUT_S"
INSTALL_TIMEOUT_S = 3600.0  # one `pip install` of a build (SGLang from source is slow)
GIT_TIMEOUT_S = 120.0  # one git command (ls-remote over the network included)
VENV_TIMEOUT_S = 300.0
# A waiter outlasts one whole build by the lock's holder, which is itself bounded.
LOCK_TIMEOUT_S = INSTALL_TIMEOUT_S + 2 * VENV_TIMEOUT_S
_STAGING = re.compile(r"\.building-(\d+)$")


def short_sha256(text: str) -> str:
    """The first 16 hex digits of sha256(text): the key of a cached folder."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _seconds(env: str, default: float) -> float:
    try:
        value = float(os.environ.get(env, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def install_timeout() -> float:
    return _seconds(INSTALL_TIMEOUT_ENV, INSTALL_TIMEOUT_S)


def lock_timeout() -> float:
    return _seconds(LOCK_TIMEOUT_ENV, LOCK_TIMEOUT_S)


def run_command(
    command: Sequence[str], what: str, *, timeout_s: float, cwd: Path | None = None,
    env: Mapping[str, str] | None = None, timeout_hint: str = "",
) -> str:
    """Run a command to completion within `timeout_s`. On a timeout or an interrupt it is
    stopped with all its descendants, so no pip or git child outlives the wait; it stays
    in the harness's process group, so a signal to the group (Ctrl-C, a CI job being
    cancelled) reaches it too. `what` and the output quoted in an error are redacted: a
    URL's credentials, a token in a command line."""
    what = redact_text(what)
    _STEPS.append(what)  # what a heartbeat says the build is doing (`current_step`)
    try:
        return _run(command, what, timeout_s=timeout_s, cwd=cwd, env=env,
                    timeout_hint=timeout_hint)
    finally:
        _STEPS.remove(what)


_STEPS: list[str] = []  # the commands running now, oldest first


def current_step() -> str | None:
    """What the build is running now (a pip install, a git clone), for progress lines."""
    return _STEPS[-1] if _STEPS else None


def _run(command: Sequence[str], what: str, *, timeout_s: float, cwd: Path | None,
         env: Mapping[str, str] | None, timeout_hint: str) -> str:
    try:
        process = subprocess.Popen(list(command), cwd=cwd, env=None if env is None else dict(env),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
    except OSError as error:
        raise EngineError(f"{what} could not start: {error_text(error)}") from None
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(process)
        raise EngineError(f"{what} did not finish within {timeout_s:g} s and was stopped"
                          + (f"; {timeout_hint}" if timeout_hint else "")) from None
    except BaseException:
        _stop_group(process)
        raise
    if process.returncode != 0:
        tail = redact_text("\n".join((out + err).strip().splitlines()[-30:])) or "(no output)"
        raise EngineError(f"{what} failed (exit {process.returncode}):\n{tail}")
    return out


def _stop_group(process: subprocess.Popen[str]) -> None:
    """Kill a child and every descendant it started (pip's build backends, git's helpers)."""
    try:
        tree = [psutil.Process(process.pid)]
        tree += tree[0].children(recursive=True)
    except psutil.Error:
        tree = []
    for member in tree:
        with contextlib.suppress(psutil.Error):
            member.kill()
    with contextlib.suppress(Exception):
        process.kill()
        process.communicate(timeout=10)
    psutil.wait_procs(tree, timeout=10)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _holder_file(lock_file: Path) -> Path:
    return lock_file.with_name(lock_file.name + ".holder")


def describe_holder(lock_file: Path) -> str:
    """Who holds a lock, as far as its holder note says."""
    try:
        note = json.loads(_holder_file(lock_file).read_text())
        pid = int(note["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return "no holder note: another harness process (or an older harness) may hold it"
    where = note.get("host") or "?"
    state = ("running" if pid_alive(pid) else "not running here") \
        if where == socket.gethostname() else f"on host {where}"
    command = " ".join(str(a) for a in note.get("argv", []))[:200]
    return (f"held by pid {pid} ({state}), since {note.get('since', '?')}: {command}"
            if command else f"held by pid {pid} ({state})")


@contextlib.contextmanager
def bounded_lock(lock_file: Path, what: str, timeout_s: float | None = None) -> Iterator[None]:
    """A file lock (released by the OS when its holder dies) waited for at most `timeout_s`."""
    timeout = lock_timeout() if timeout_s is None else timeout_s
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_file), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise EngineError(
            f"waited {timeout:g} s for the lock {lock_file} ({what}); "
            f"{describe_holder(lock_file)}. Wait for that process, or stop it; "
            f"{LOCK_TIMEOUT_ENV} sets how long to wait") from None
    holder = _holder_file(lock_file)
    try:
        with contextlib.suppress(OSError):
            holder.write_text(json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "argv": sys.argv[:12],
                "since": time.strftime("%Y-%m-%dT%H:%M:%S%z")}))
        yield
    finally:
        with contextlib.suppress(OSError):
            holder.unlink()
        lock.release()


def lock_is_free(lock_file: Path) -> bool:
    if not lock_file.exists():
        return True
    try:
        with FileLock(str(lock_file), timeout=0):
            return True
    except Timeout:
        return False
    except OSError:
        return False


def staging_dir(final: Path) -> Path:
    """The folder a build of `final` is assembled in by this process."""
    return final.with_name(f"{final.name}.building-{os.getpid()}")


def sweep_stale(folder: Path) -> list[Path]:
    """Remove partial builds nobody is working on: `*.building-<pid>` folders whose pid is
    not running, and `<name>-src` copies (older harness versions) whose `<name>.lock` is free.
    Anything a live process may be using is left alone."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for entry in sorted(folder.iterdir()):
        found = _STAGING.search(entry.name)
        stale = False
        if found is not None:
            stale = not pid_alive(int(found.group(1)))
        elif entry.name.endswith("-src") and entry.is_dir():
            stale = lock_is_free(folder / (entry.name.removesuffix("-src") + ".lock"))
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                removed.append(entry)
    return removed
