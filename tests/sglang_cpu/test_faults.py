"""The fault table against the real SGLang process tree (the server's main process with
its tokenizer manager, and the scheduler and detokenizer processes it spawns).

kill -9 and SIGSTOP of the server's main process, SIGINT and SIGTERM of the harness, at
launch (the server loading), warm-up, measurement and recording, each fault at one stage or
more (`CASES` says which; the double holds every pair); plus kill -9 of the scheduler and
SIGSTOP of the detokenizer alone during the measurement. Every case must end in seconds with exit 3
(engine error) or 130 (interrupted), keep every finished row, write run.json with the
stage reached, and leave no process of the tree behind.

SIGKILL of the harness at the same stages (issue 50; tests/run/test_faults_lose_nothing.py
and tests/run/test_sigkill_ends_the_engine.py hold the same rows for the SGLang double and
the reference engine): no teardown of the harness runs, its watchdog
(harness.run.lifeline) ends the tree, which is gone within 15 s, every finished row kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.fixtures.sglang_double import alive
from tests.sglang_cpu.conftest import REPO, SPEC

WATCHDOG_S = 15.0  # the suite's progress_timeout_s: a stopped server is noticed after it
EXIT = {"kill -9 server": 3, "SIGSTOP server": 3, "kill -9 scheduler": 3,
        "SIGSTOP detokenizer": 3, "SIGINT harness": 130, "SIGTERM harness": 130,
        "SIGKILL harness": -9}
LEFT_WITHIN_S = 15.0  # a SIGKILLed harness's tree: gone within it (its watchdog's work)
# Each fault at one stage or more, each stage with a fault to the harness and, up to the
# measurement, one to the server: what the real tree adds to the
# double's table is how SGLang's processes answer each signal and what state each stage
# finds them in. At recording the record is written and the harness is stopping the tree
# or has stopped it (which, the test cannot tell), so a SIGTERM of the harness there shows
# nothing of SGLang's processes that the warm-up's SIGTERM does not; the recording keeps
# the SIGKILL (whatever is left of the tree, the watchdog ends it). The whole cross
# product, every fault at every stage, runs on the SGLang double in `nox -s tests`
# (tests/run/test_faults_lose_nothing.py), where the harness's code paths are the same and
# a case costs a second, not a real server's launch.
CASES = [
    ("launch", "kill -9 server"), ("launch", "SIGSTOP server"), ("launch", "SIGINT harness"),
    ("launch", "SIGKILL harness"),
    ("warm-up", "kill -9 server"), ("warm-up", "SIGTERM harness"),
    # a child of the tree stopped or killed while the main process lives: named at once by
    # the harness's tree watch (the detokenizer stopped took the 300 s watchdog before)
    ("measurement", "SIGSTOP server"), ("measurement", "kill -9 scheduler"),
    ("measurement", "SIGSTOP detokenizer"), ("measurement", "SIGKILL harness"),
    ("recording", "SIGKILL harness"),
]


def _suite(tmp: Path) -> Path:
    text = (REPO / "suites" / "tiny_ngram_sglang_cpu.toml").read_text()
    text = text.replace('name = "tiny_ngram_sglang_cpu"', 'name = "faults_sglang_cpu"')
    text = text.replace("questions = 20", f"questions = 40\nprogress_timeout_s = {WATCHDOG_S}")
    # two waves of warm-up requests (concurrency 4): a fault lands inside the warm-up
    text = text.replace("warmup_requests = 2", "warmup_requests = 8")
    text = text.replace('stand_ins = ["tests/cpu_stand_ins"]',
                        f'stand_ins = ["{REPO / "tests" / "cpu_stand_ins"}"]')
    path = tmp / "faults_sglang_cpu.toml"
    path.write_text(text)
    return path


def _tree(job: subprocess.Popen[str]) -> list[psutil.Process]:
    """Every process the harness started: the server's main process (tokenizer manager,
    HTTP server) and what it spawned (`sglang::scheduler_0`, `sglang::detokenizer`)."""
    with contextlib.suppress(psutil.Error):
        return psutil.Process(job.pid).children(recursive=True)
    return []


def _title(process: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return f"{process.name()} {' '.join(process.cmdline())}"
    return ""


def _server(job: subprocess.Popen[str]) -> psutil.Process | None:
    return next((p for p in _tree(job) if "sglang.launch_server" in _title(p)), None)


def _rows(results: Path) -> int:
    files = list(results.glob("runs/*/*/requests.jsonl"))
    return len(files[0].read_text().splitlines()) if files else 0


def _log_has(results: Path, text: str) -> bool:
    logs = list(results.glob("runs/*/*/server.log"))
    return bool(logs) and text in logs[0].read_text(errors="replace")


def _wait(condition, what: str, job: subprocess.Popen[str], timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert job.poll() is None, f"the harness ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.parametrize(("stage", "fault"), CASES, ids=lambda v: v.replace(" ", "_"))
def test_fault_on_the_real_tree(stage: str, fault: str, tmp_path: Path, sglang_cpu) -> None:
    results = tmp_path / "results"
    job = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(_suite(tmp_path)), "--sglang", SPEC,
         "--results", str(results), "--no-progress", *([] if stage == "recording"
                                                       else ["--no-plot"])],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(job.stderr.readline, "")),
                              daemon=True)
    reader.start()
    members: list[psutil.Process] = []
    try:
        if stage == "launch":
            _wait(lambda: _server(job) is not None, "the server's start", job)
            time.sleep(3.0)  # loading: SGLang is importing and spawning its scheduler
        elif stage == "warm-up":
            # after readiness and the settings check: the first warm-up request answered
            # (SGLang's access log), the second still running, no measured row yet
            _wait(lambda: _log_has(results, '"POST /generate HTTP/1.1" 200'), "warm-up", job)
        elif stage == "measurement":
            _wait(lambda: _rows(results) >= 4, "4 measured rows", job)
        else:
            _wait(lambda: any(results.glob("runs/*/*/run.json")), "the record", job)
        members = _tree(job)
        if stage != "recording":  # the real tree: main process, scheduler, detokenizer
            assert len(members) >= (1 if stage == "launch" else 3), [_title(m) for m in members]
        finished = _rows(results)
        server = _server(job)
        started = time.monotonic()
        if fault.endswith(("server", "scheduler", "detokenizer")):
            assert server is not None, "no server process"
            target = server
            if fault == "kill -9 scheduler":
                target = next(p for p in server.children(recursive=True)
                              if "sglang::scheduler" in _title(p))
            if fault == "SIGSTOP detokenizer":
                target = next(p for p in server.children(recursive=True)
                              if "sglang::detokenizer" in _title(p))
            target.send_signal(signal.SIGSTOP if fault.startswith("SIGSTOP")
                               else signal.SIGKILL)
        else:
            job.send_signal({"SIGINT harness": signal.SIGINT, "SIGTERM harness":
                             signal.SIGTERM, "SIGKILL harness": signal.SIGKILL}[fault])
        job.wait(timeout=WATCHDOG_S + 60)
        elapsed = time.monotonic() - started
        while fault == "SIGKILL harness" and alive([m.pid for m in members]) and \
                time.monotonic() - started < LEFT_WITHIN_S:
            time.sleep(0.1)
    finally:
        if job.poll() is None:
            job.kill()
        for member in members:  # a stopped process is resumed so it can be reaped
            with contextlib.suppress(psutil.Error):
                member.resume()
    reader.join(timeout=5)
    stderr = "".join(lines)
    where = f"{stage} / {fault}:\n{stderr[-3000:]}"
    records = list(results.glob("runs/*/*/run.json"))
    if fault == "SIGKILL harness":
        assert job.returncode == EXIT[fault], where
        assert alive([m.pid for m in members]) == [], where  # 0 left after 15 s
        if stage != "recording":  # a server ran: the watchdog says what it ended
            assert "harness watchdog: harness (pid" in stderr, where
            assert not records, where  # killed before its record
            assert _rows(results) >= finished, where  # every finished row kept
        return
    assert records, where
    record = json.loads(records[0].read_text())
    bound = WATCHDOG_S + 10 if fault == "SIGSTOP server" and stage != "launch" else 15
    assert elapsed < bound, where
    assert job.returncode == EXIT[fault], where
    assert record["verdict"]["status"] == "error", where
    assert record["stage"] == stage, where
    assert _rows(results) >= finished, where  # every finished row kept
    if stage == "measurement":
        assert record["measurement"]["n_requests"] == _rows(results), where
    if fault == "SIGSTOP detokenizer":  # named in the verdict: its title and pid
        reason = record["verdict"]["reasons"][0]
        assert "sglang::detokenizer" in reason and "is stopped (SIGSTOP" in reason, \
            f"{reason}\n{where}"
        print(f"SIGSTOP detokenizer: exit after {elapsed:.1f} s: {reason[:300]}")
    time.sleep(1.0)
    assert alive([m.pid for m in members]) == [], where  # 0 orphans of the real tree
