"""Issue 31: every wait of more than a few seconds says what it waits for: the engine
build (the step it runs), the launch (elapsed time and what the server log says it is
loading), the drive (stage and requests done)."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.run.heartbeat import heartbeat, last_log_line


def test_a_heartbeat_speaks_only_while_the_wait_lasts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0.1")
    said: list[str] = []
    # waits until it has spoken three times (a loaded machine may wake its thread late:
    # the test holds the order and spacing of the beats, not the clock's punctuality)
    with heartbeat(lambda elapsed: f"waiting {elapsed:.4f}", say=said.append):
        deadline = time.monotonic() + 30
        while len(said) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    count = len(said)
    beats = [float(line.removeprefix("waiting ")) for line in said]
    assert count >= 3 and beats[0] >= 0.1  # never before one period
    assert all(later - earlier >= 0.09 for earlier, later in itertools.pairwise(beats))
    time.sleep(0.3)
    assert len(said) == count  # silent once the wait is over
    with heartbeat(lambda _: "never", say=said.append):
        pass  # a short wait says nothing
    assert "never" not in said
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0")
    with heartbeat(lambda _: "off", say=said.append):
        time.sleep(0.2)
    assert "off" not in said


def test_the_log_line_is_one_printable_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    assert last_log_line(log) is None
    log.write_bytes(b"first\n\x1b[32mLoading safetensors checkpoint shards: 50%\x1b[0m\r\n"
                    b"[harness] a line of the harness's own\n\n")
    assert last_log_line(log) == "Loading safetensors checkpoint shards: 50%"
    log.write_text("x" * 500 + "\n")
    assert len(last_log_line(log) or "") == 160


def test_the_build_heartbeat_names_the_running_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.builds.common import current_step, run_command
    from harness.run.runner import _preparing

    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0.2")
    said: list[str] = []
    with heartbeat(_preparing, say=said.append):
        run_command([sys.executable, "-c", "import time; time.sleep(0.7)"],
                    "pip install (https://user:hunter2@example.com/simple)", timeout_s=30)
    assert current_step() is None
    assert said and all(line.startswith("preparing the engine: pip install") for line in said)
    assert not any("hunter2" in line for line in said)  # a URL's credentials stay hidden


def test_launch_and_drive_say_what_they_wait_for(
        fake_env: dict[str, str], write_suite, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HARNESS_HEARTBEAT_S", "0.25")
    monkeypatch.setenv("FAKE_SGLANG_STARTUP_S", "2.0")
    monkeypatch.setenv("FAKE_SGLANG_DELAY_S", "0.4")
    results = tmp_path / "results"
    assert main(["run", str(write_suite(floor=2.0)), "--results", str(results),
                 "--no-progress", "--no-plot"]) == 0
    err = capsys.readouterr().err
    launching = [line for line in err.splitlines() if line.startswith("launching (")]
    assert launching, err
    # what the server log said while it loaded (the double's start-up line)
    assert any("log: fake-sglang: server_args model_path=google/gemma-4-31B-it" in line
               for line in launching)
    assert any(line.startswith("fake_gemma: measurement, ") and "/8 requests done" in line
               for line in err.splitlines()), err
