"""The server's whole process tree dies on every exit path (SGLang test double)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from harness.errors import EngineError
from harness.run.launch import Server, ServerSpec, free_port, kill_tree
from tests.fixtures.sglang_double import alive, assert_no_orphans, server_pids


def spec(tmp_path: Path, timeout: float = 20.0) -> ServerSpec:
    port = free_port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", "m",
               "--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens", "16",
               "--tp-size", "2", "--host", "127.0.0.1", "--port", str(port)]
    return ServerSpec(command=command, log_path=tmp_path / "server.log", port=port,
                      launch_timeout_s=timeout)


def test_ready_then_stopped_leaves_no_process(fake_env: dict[str, str], tmp_path: Path) -> None:
    server = Server(spec(tmp_path))
    with server:
        waited = server.wait_ready()
        pids = server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"]))
        assert len(pids) == 4  # parent, 2 TP schedulers, detokenizer
        assert alive(pids) == pids
    assert waited >= 0.3  # the double loads "weights" for 0.3 s before it is ready
    assert_no_orphans(pids)
    assert "ready to roll" in (tmp_path / "server.log").read_text()


def test_crash_at_start_reports_log_tail(fake_env: dict[str, str], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SGLANG_MODE", "crash_start")
    server = Server(spec(tmp_path))
    with pytest.raises(EngineError) as error, server:
        server.wait_ready()
    assert "exited with code 1 before it was ready" in error.value.message
    assert "CUDA error: out of memory" in error.value.message  # the log's tail
    assert_no_orphans(server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"])))


def test_hang_times_out_and_kills_tree(fake_env: dict[str, str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SGLANG_MODE", "hang")
    server = Server(spec(tmp_path, timeout=1.5))
    with pytest.raises(EngineError, match=r"not ready after 1.5 s"), server:
        server.wait_ready()
    assert_no_orphans(server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"])))


def test_kill_tree_reaches_orphans_of_a_dead_parent(fake_env: dict[str, str],
                                                    tmp_path: Path) -> None:
    """A crashed parent leaves its children re-parented; the process group still finds them."""
    server = Server(spec(tmp_path))
    server.start()
    try:
        server.wait_ready()
        pids = server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"]))
        assert server.process is not None
        server.process.kill()
        server.process.wait()
        assert alive(pids[1:]) == pids[1:]  # children outlive their parent
        kill_tree(server.process.pid, grace_s=2)
        assert_no_orphans(pids)
    finally:
        server.stop()


def test_missing_executable_is_an_engine_error(tmp_path: Path) -> None:
    bad = ServerSpec(command=[str(tmp_path / "no-such-python")], log_path=tmp_path / "log",
                     port=free_port())
    with pytest.raises(EngineError, match="cannot start server"):
        Server(bad).start()


class _Stopped(Exception):
    pass


def test_a_signal_during_teardown_waits_until_the_tree_is_dead(tmp_path: Path) -> None:
    """CI's SIGTERM (or a second Ctrl-C) while the tree is being killed: no survivor."""
    # a parent that ignores SIGTERM (so kill_tree waits out its grace) and one child
    stubborn = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, "
                "signal.SIG_IGN); subprocess.Popen([sys.executable, '-c', "
                "'import time; time.sleep(60)']); print('up', flush=True); time.sleep(60)")
    process = subprocess.Popen([sys.executable, "-c", stubborn], stdout=subprocess.PIPE,
                               start_new_session=True, text=True)
    assert process.stdout is not None and process.stdout.readline() == "up\n"
    pids = [process.pid, *(c.pid for c in psutil.Process(process.pid).children())]
    assert len(pids) == 2

    def stop(_signum: int, _frame: object) -> None:
        raise _Stopped

    previous = signal.signal(signal.SIGTERM, stop)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM))
    try:
        timer.start()
        with pytest.raises(_Stopped):  # the signal is acted on, after the teardown
            kill_tree(process.pid, grace_s=1.5)
            pytest.fail("the held signal was dropped")
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, previous)
    process.wait(timeout=5)
    assert_no_orphans(pids)
