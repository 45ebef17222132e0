"""Bounded waits in the build: subprocesses, file locks, stale partial builds, messages."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.builds import bounded_lock, error_text, pid_alive, run_command, sweep_stale
from harness.builds.common import describe_holder
from harness.errors import EngineError


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_error_text_is_never_empty() -> None:
    assert error_text(OSError()) == "OSError"
    assert error_text(TimeoutError("  ")) == "TimeoutError"
    assert error_text(ValueError("bad value")) == "bad value"


def test_command_past_its_limit_is_stopped_with_its_children(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    # A shell that starts a long-lived grandchild, as pip starts build backends.
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    with pytest.raises(EngineError) as caught:
        run_command(["sh", "-c", script], "a slow step", timeout_s=1.0,
                    timeout_hint="SOME_ENV sets the limit")
    assert caught.value.message == ("a slow step did not finish within 1 s and was stopped; "
                                    "SOME_ENV sets the limit")
    grandchild = int(pid_file.read_text())
    for _ in range(50):
        if not pid_alive(grandchild):
            break
        time.sleep(0.1)
    assert not pid_alive(grandchild)


def test_command_that_cannot_start_says_why(tmp_path: Path) -> None:
    with pytest.raises(EngineError) as caught:
        run_command([str(tmp_path / "absent")], "the absent tool", timeout_s=5)
    assert caught.value.message.startswith("the absent tool could not start: ")
    assert caught.value.message.strip() != "the absent tool could not start:"


def test_failed_command_shows_its_output_tail() -> None:
    with pytest.raises(EngineError) as caught:
        run_command([sys.executable, "-c", "import sys; print('why it broke'); sys.exit(3)"],
                    "the step", timeout_s=30)
    assert caught.value.message == "the step failed (exit 3):\nwhy it broke"


HOLD = """
import sys, time
from pathlib import Path
from harness.builds import bounded_lock
with bounded_lock(Path(sys.argv[1]), "holding for a test"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_lock_wait_is_bounded_and_names_the_holder(tmp_path: Path) -> None:
    lock_file = tmp_path / "envs" / "sglang-abc.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(lock_file)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(EngineError) as caught, bounded_lock(lock_file, "building X",
                                                                 timeout_s=0.5):
            pass
    finally:
        holder.kill()
        holder.wait()
    message = caught.value.message
    assert message.startswith(f"waited 0.5 s for the lock {lock_file} (building X); ")
    assert f"held by pid {holder.pid} (running)" in message
    assert "HARNESS_LOCK_TIMEOUT_S" in message
    # The OS released the lock with its dead holder: the next wait is immediate.
    with bounded_lock(lock_file, "building X", timeout_s=5):
        assert "held by pid" in describe_holder(lock_file)
    assert "no holder note" in describe_holder(lock_file)


def test_lock_timeout_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.builds.common import LOCK_TIMEOUT_S, lock_timeout

    assert lock_timeout() == LOCK_TIMEOUT_S
    monkeypatch.setenv("HARNESS_LOCK_TIMEOUT_S", "7")
    assert lock_timeout() == 7.0
    monkeypatch.setenv("HARNESS_LOCK_TIMEOUT_S", "soon")
    assert lock_timeout() == LOCK_TIMEOUT_S


def test_stale_partial_builds_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    dead = envs / f"sglang-aaa.building-{_dead_pid()}"
    live = envs / f"sglang-bbb.building-{os.getpid()}"
    old_src = envs / "sglang-ccc-src"  # an older harness's patched copy; its lock is free
    busy_src = envs / "sglang-ddd-src"  # ... and one whose build is running now
    done = envs / "sglang-eee"
    for folder in (dead, live, old_src, busy_src, done):
        (folder / "python").mkdir(parents=True)
    with bounded_lock(envs / "sglang-ddd.lock", "a live build", timeout_s=5):
        removed = sweep_stale(envs)
    assert sorted(removed) == sorted([dead, old_src])
    assert live.exists() and busy_src.exists() and done.exists()
    assert sweep_stale(tmp_path / "absent") == []


def test_sweep_leaves_a_build_of_another_process_alone(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = tmp_path / f"x.building-{sleeper.pid}"
        theirs.mkdir()
        assert sweep_stale(tmp_path) == [] and theirs.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sweep_stale(tmp_path) == [theirs]
