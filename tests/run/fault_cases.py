"""Fault injection: a real `harness run` (a process), a fault at one stage, what is left.

Faults: kill -9 of the server, SIGSTOP of the server (a hang), SIGSTOP or kill -9 of one of
its children (a scheduler stand-in: stopped, or dead and never reaped), SIGINT, SIGTERM and
SIGKILL of the harness (SIGKILL: no teardown runs; the server tree ends through the
harness's watchdog, harness.run.lifeline, and the processes left are counted after it, up
to ORPHAN_WAIT_S). Stages: preparation (a build being installed), launch (the server
loading), warm-up, measurement, recording (the record written, the plot being drawn). The SGLang
test double (tests/fake_sglang) plays the server; the stage is recognised from outside
(the build backend's pid file, the server's pid file, the harness's "server ready" line,
finished requests), then the fault is sent and the exit is timed.

Shared by tests/run/test_faults_lose_nothing.py (assertions) and benchmarks/bench_faults.py (the
table `nox -s bench` prints).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.sglang_double import alive

ROOT = Path(__file__).resolve().parents[2]
FAKE_SGLANG = ROOT / "tests" / "fake_sglang"
WATCHDOG_S = 4.0  # the suite's progress_timeout_s

STAGES = ("preparation", "launch", "warm-up", "measurement", "recording")
FAULTS = ("kill -9 server", "SIGSTOP server", "SIGSTOP child", "kill -9 child",
          "SIGINT harness", "SIGTERM harness", "SIGKILL harness")
ORPHAN_WAIT_S = 15.0  # after a SIGKILL of the harness: the server tree gone within it
# A server fault needs a server: none runs while a build installs, or once the record
# is written. A dead child counts from readiness on (a helper that ran during startup may
# stay unreaped: harness.run.launch.TreeWatch).
SERVER_STAGES = ("launch", "warm-up", "measurement")
READY_STAGES = ("warm-up", "measurement")

SUITE = """
name = "faults"
[engine]
kind = "sglang"
launch_timeout_s = 60
extra_args = ["--decode-log-interval", "1", "--disable-overlap-schedule"]
[target]
model = "org/target"
[draft]
model = "org/draft"
[speculative]
num_draft_tokens = 8
[topology]
gpus = 1
[workload]
questions = {questions}
shots = 0
max_tokens = 48
concurrency = 4
warmup_requests = 2
progress_timeout_s = {watchdog}
[floors]
accept_length = 1.0
"""


def cases() -> list[tuple[str, str]]:
    # a SIGKILL during the build: no server yet, and pip's processes are not a launch's
    return [(stage, fault) for stage in STAGES for fault in FAULTS
            if (fault.endswith("harness") and (fault != "SIGKILL harness"
                                               or stage != "preparation"))
            or (stage in SERVER_STAGES
                and (fault != "kill -9 child" or stage in READY_STAGES))]


@dataclass
class Outcome:
    stage: str
    fault: str
    exit_code: int
    message: str  # the harness's last stderr line about the run
    finished_at_fault: int  # responses the server had sent in full when the fault came
    rows_kept: int  # rows in requests.jsonl
    recorded_requests: int | None  # requests the record's (partial) measurement covers
    run_json: bool
    recorded_stage: str | None
    verdict: str | None
    orphans: list[int]
    fault_to_exit_s: float
    stderr: str
    orphans_gone_s: float = 0.0  # from the fault until no process of the tree was left


def _wait(condition, what: str, job: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if job.poll() is not None:
            raise AssertionError(f"the harness ended before {what}: "
                                 f"{job.communicate()[1][-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _sent(events: Path) -> int:
    if not events.exists():
        return 0
    return sum(1 for line in events.read_text().splitlines() if line.startswith("sent q"))


def _got(events: Path, rid_prefix: str) -> bool:
    """Whether a request whose id starts with `rid_prefix` has reached the server."""
    return events.exists() and any(line.startswith(f"got {rid_prefix}")
                                   for line in events.read_text().splitlines())


def _pids(pidfile: Path) -> list[int]:
    return json.loads(pidfile.read_text()) if pidfile.exists() and pidfile.read_text() else []


def fake_env(pidfile: Path, events: Path, **fake: str) -> dict[str, str]:
    """The environment of a `harness run` whose SGLang is the test double."""
    return {**os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(FAKE_SGLANG), str(ROOT),
                                                        os.environ.get("PYTHONPATH")])),
            "HARNESS_GPU_INVENTORY": "1xH100:80", "HF_HUB_OFFLINE": "1",
            "FAKE_SGLANG_PIDFILE": str(pidfile), "FAKE_SGLANG_EVENTS": str(events),
            "PYTHONUNBUFFERED": "1", **fake}


def run_case(stage: str, fault: str, tmp: Path, slow_repo: Path | None = None) -> Outcome:
    """Run `harness run` on the test double, inject `fault` at `stage`, report the exit."""
    results, pidfile, events = tmp / "results", tmp / "server.pids", tmp / "events"
    questions = 40 if stage == "measurement" else 6
    suite = tmp / "faults.toml"
    suite.write_text(SUITE.format(questions=questions, watchdog=WATCHDOG_S))
    delay = {"warm-up": 3.0, "measurement": 0.25}.get(stage, 0.0)
    env = fake_env(pidfile, events, FAKE_SGLANG_STARTUP_S="30" if stage == "launch" else "0.2",
                   FAKE_SGLANG_DELAY_S=str(delay))
    command = [sys.executable, "-m", "harness", "run", str(suite), "--results", str(results),
               "--no-progress"]
    backend_pid = tmp / "backend.pid"
    if stage == "preparation":
        assert slow_repo is not None, "the preparation stage needs a slow build"
        env |= {"HARNESS_CACHE": str(tmp / "cache"), "SLOW_BACKEND_PID": str(backend_pid),
                "HARNESS_PIP_ARGS": "--no-deps --no-build-isolation --no-index",
                "HARNESS_SGLANG_DEVICE": "cuda"}  # a GPU host's path: pip installs the checkout
        command += ["--sglang", str(slow_repo)]
    if stage != "recording":
        command.append("--no-plot")
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    stderr_lines: list[str] = []

    def said(text: str) -> bool:  # the harness's stderr so far (read without blocking)
        return any(text in line for line in stderr_lines)

    import threading

    reader = threading.Thread(target=lambda: stderr_lines.extend(iter(job.stderr.readline, "")),
                              daemon=True)
    reader.start()
    if stage == "preparation":
        _wait(lambda: backend_pid.is_file() and backend_pid.read_text(), "the build", job)
    elif stage == "launch":
        _wait(lambda: bool(_pids(pidfile)), "the server's start", job)
        time.sleep(0.5)
    elif stage == "warm-up":
        # a warm-up request in the server (each takes 3 s there): the run is in the warm-up,
        # past the settings check, however slowly a loaded host got it there
        _wait(lambda: _got(events, "warmup-"), "the warm-up", job)
        time.sleep(0.2)
    elif stage == "measurement":
        _wait(lambda: _sent(events) >= 8, "8 measured requests", job)
    else:
        _wait(lambda: any(results.glob("runs/*/*/run.json")), "the record", job)
    server = _pids(pidfile)
    finished = _sent(events)
    started = time.monotonic()
    if fault == "kill -9 server":
        os.kill(server[0], signal.SIGKILL)
    elif fault == "SIGSTOP server":
        os.kill(server[0], signal.SIGSTOP)
    elif fault == "SIGSTOP child":
        os.kill(server[1], signal.SIGSTOP)
    elif fault == "kill -9 child":
        os.kill(server[1], signal.SIGKILL)
    else:
        job.send_signal({"SIGINT harness": signal.SIGINT, "SIGTERM harness": signal.SIGTERM,
                         "SIGKILL harness": signal.SIGKILL}[fault])
    try:
        job.wait(timeout=WATCHDOG_S + 60)
    finally:
        elapsed = time.monotonic() - started
        if job.poll() is None:
            job.kill()
        for pid in _pids(pidfile):  # a stopped server is resumed so it can be reaped
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    # nothing waits for the tree of a harness that died: the processes left, until they end
    deadline = started + ORPHAN_WAIT_S
    while alive(_pids(pidfile)) and time.monotonic() < deadline:
        time.sleep(0.1)
    gone = time.monotonic() - started
    reader.join(timeout=5)
    stdout = job.stdout.read() if job.stdout else ""
    run_files = list(results.glob("runs/*/*/run.json"))
    record = json.loads(run_files[0].read_text()) if run_files else {}
    rows_files = list(results.glob("runs/*/*/requests.jsonl"))
    rows = len(rows_files[0].read_text().splitlines()) if rows_files else 0
    time.sleep(0.2)
    orphans = alive(_pids(pidfile))
    if backend_pid.is_file() and backend_pid.read_text().strip():
        orphans += alive([int(backend_pid.read_text())])
    verdict = record.get("verdict") or {}
    text = "\n".join(stderr_lines) + stdout
    message = next((line for line in reversed(text.splitlines())
                    if line.startswith(("harness run:", "  "))), "")
    measured = (record.get("measurement") or {}).get("n_requests")
    return Outcome(stage, fault, job.returncode, message, finished, rows, measured,
                   bool(run_files),
                   record.get("stage"), verdict.get("status"), orphans, elapsed, text, gone)
