"""The next run's clean-up (harness.run.lifeline.end_leftovers) touches only what a dead
harness left: a ledger of a harness still running is left alone with its processes, an
unreadable ledger is named and removed, and a ledger names no program to run nor any
argument but a job id. (A dead run's leftover ended before a launch, and
said: tests/run/test_sigkill_ends_the_engine.py.)"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from harness.results.layout import LAUNCHED_DIR
from harness.run.lifeline import MARK_ENV, Job, Ledger, Tree, end_ledger, end_leftovers


def _marked_sleeper(mark: str) -> subprocess.Popen[bytes]:
    """A process carrying `mark`, returned once its environment reads so: Popen returns as
    exec closes its pipe, before the kernel shows the new environment, and on a loaded host
    a clean-up looking then finds no mark (a dead run's leftover has long been running)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                               env={**os.environ, MARK_ENV: mark}, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(process.pid).environ().get(MARK_ENV) == mark:
                return process
        time.sleep(0.01)
    process.kill()
    process.wait()
    raise AssertionError(f"the sleeper never showed its mark {mark}")


def _dead_mark() -> str:
    """A dead harness's mark (pid 7, started at 1.0), its own to each test: tests in other
    pytest workers end their own leftovers at the same time."""
    return f"7-1.000-{uuid.uuid4().hex[:8]}"


def test_a_live_harness_keeps_its_server(tmp_path: Path) -> None:
    me = psutil.Process()
    mark = f"{me.pid}-{me.create_time():.3f}"
    server = _marked_sleeper(mark)
    try:
        folder = tmp_path / LAUNCHED_DIR
        folder.mkdir()
        ledger = Ledger(me.pid, me.create_time(), mark, [Tree(server.pid, 1, "x", "log")],
                        file=str(folder / f"{mark}.json"))
        Path(ledger.file).write_text(ledger.text())
        assert end_leftovers(tmp_path) == []
        assert server.poll() is None and Path(ledger.file).exists()
    finally:
        server.kill()
        server.wait()


def test_a_dead_harness_leftover_is_ended_and_an_unreadable_ledger_named(
        tmp_path: Path) -> None:
    mark = _dead_mark()
    server = _marked_sleeper(mark)
    try:
        folder = tmp_path / LAUNCHED_DIR
        folder.mkdir()
        # a job "id" that would be an option of scancel's (every job of a user) is not run
        ledger = Ledger(7, 1.0, mark, [Tree(server.pid, 4321, "x", "server.log")],
                        [Job("--user=root")], file=str(folder / f"{mark}.json"))
        Path(ledger.file).write_text(ledger.text())
        (folder / "junk.json").write_text("{not json")
        said = end_leftovers(tmp_path)
        assert server.wait(timeout=10) is not None
        assert any(f"server pid {server.pid} on port 4321" in line for line in said), said
        assert any(line.startswith(f"{folder / 'junk.json'}: not a ledger") for line in said)
        assert any("'--user=root' is not a Slurm job id: left alone" in line for line in said)
        assert list(folder.iterdir()) == []
    finally:
        server.kill()
        server.wait()


def test_a_leftover_on_a_reused_pid_is_ended(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """psutil's process_iter keeps the Process it made for a pid across calls, without
    checking it again: on a pid reused since (a busy host wraps pid_max), that old Process
    reads the new process's environment but refuses to signal it. The leftover still ends."""
    mark = _dead_mark()
    server = _marked_sleeper(mark)
    try:
        # what process_iter's cache holds once the pid belonged to another process
        stale = psutil.Process(server.pid)
        stale._create_time, stale._ident = 1.0, (server.pid, 1.0)
        monkeypatch.setattr(psutil, "_pmap", {server.pid: stale})
        ledger = Ledger(7, 1.0, mark, [Tree(server.pid, 4321, "x", "server.log")])
        said = end_ledger(ledger, "left")
        assert server.wait(timeout=10) is not None
        assert any(f"server pid {server.pid} on port 4321" in line for line in said), said
    finally:
        server.kill()
        server.wait()
