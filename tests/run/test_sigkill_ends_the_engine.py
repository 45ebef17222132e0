"""SIGKILL of the harness ends the engine it launched (issue 50): `harness run` of the tiny
suite on the CPU reference engine (a real server process, its multiprocessing resource
tracker and its workers), killed with SIGKILL at each stage (launching, warm-up, measuring,
writing the record, plotting). No teardown of the harness runs; its watchdog
(harness.run.lifeline) ends the tree. For each stage: the processes of the harness's tree
left after 15 s (goal 0), the port free, what the watchdog said, and what a reader says of
the run folder afterwards (`harness export`). The launching case also plants the leftover
of a harness whose watchdog died with it (its ledger in results/.launched/ and a process
carrying its mark, listening on a port): the run ends it before it launches and says so.

The launching case runs in `nox -s tests`; the others wait for the server (a minute or
more on a busy 2-core host) and run in `nox -s e2e`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from harness.builds import has_reference_dependencies
from harness.cli import main
from harness.results.layout import LAUNCHED_DIR
from harness.run.lifeline import MARK_ENV, Ledger, Tree
from harness.suite.model import SUITES_DIR

ROOT = Path(__file__).resolve().parents[2]
LEFT_WITHIN_S = 15.0
STAGES = ("launching", "warm-up", "measuring", "writing the record", "plotting")


def _suite(folder: Path) -> Path:
    """The tiny suite with 12 questions (its floors are beside the point: the run is killed)."""
    text = (SUITES_DIR / "tiny_dflash_cpu.toml").read_text()
    text = text.replace('name = "tiny_dflash_cpu"', 'name = "kill_tiny"')
    text = text.replace("questions = 100", "questions = 12").split("\n[gate]")[0]
    path = folder / "kill_tiny.toml"
    path.write_text(text + "\n")
    return path


def _plant_leftover(results: Path) -> tuple[subprocess.Popen[str], int]:
    """What a harness killed together with its watchdog leaves: a server (here a listener
    on a port) carrying the dead harness's mark, and that harness's ledger."""
    mark = "4242-1.000"  # a harness whose pid and start time no live process has
    server = subprocess.Popen(
        [sys.executable, "-c", "import socket, time; s = socket.socket(); "
         "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True); "
         "time.sleep(600)"], stdout=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, MARK_ENV: mark})
    assert server.stdout is not None
    port = int(server.stdout.readline())
    folder = results / LAUNCHED_DIR
    folder.mkdir(parents=True)
    ledger = Ledger(4242, 1.0, mark, [Tree(server.pid, port, "planted", "planted.log")],
                    file=str(folder / f"{mark}.json"))
    Path(ledger.file).write_text(ledger.text())
    return server, port


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _living(processes: list[psutil.Process]) -> list[str]:
    left = []
    for process in processes:
        with contextlib.suppress(psutil.Error):
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{process.name()} (pid {process.pid}: "
                            f"{' '.join(process.cmdline())[:80]})")
    return left


def _wait(condition, what: str, job: subprocess.Popen[str], lines: list[str],
          timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert job.poll() is None, f"the harness ended before {what}:\n{''.join(lines)}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _sigkill_at(stage: str, tmp_path: Path) -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    results = tmp_path / "results"
    planted = _plant_leftover(results) if stage == "launching" else None
    job = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(_suite(tmp_path)), "--results",
         str(results), "--no-progress", *([] if stage == "plotting" else ["--no-plot"])],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                     "PYTHONPATH": str(ROOT)})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(job.stderr.readline, "")),
                              daemon=True)
    reader.start()
    said = lambda text: any(text in line for line in lines)  # noqa: E731
    record = lambda: next(results.glob("runs/*/*/run.json"), None)  # noqa: E731
    rows = lambda: sum(len(f.read_text().splitlines())  # noqa: E731
                       for f in results.glob("runs/*/*/requests.jsonl"))
    ledgers = lambda: [Ledger.of(json.loads(p.read_text()))  # noqa: E731
                       for p in (results / LAUNCHED_DIR).glob("*.json")]
    try:
        if stage == "launching":  # the ledger names the server as soon as it is started
            _wait(lambda: said("launching kill_tiny") and any(ledger.trees for ledger
                                                              in ledgers()),
                  "the launch", job, lines)
        elif stage == "warm-up":
            _wait(lambda: said("server ready after"), "readiness", job, lines)
        elif stage == "measuring":
            _wait(lambda: rows() >= 2, "2 measured rows", job, lines)
        elif stage == "writing the record":  # written; the server stops after it
            _wait(lambda: record() is not None, "the record", job, lines)
        else:  # the server stopped by the harness: the plots are being drawn
            stopped = lambda: any("[harness] server stopped by the harness"  # noqa: E731
                                  in log.read_text(errors="replace")
                                  for log in results.glob("runs/*/*/server.log"))
            _wait(lambda: record() is not None and stopped(), "the plotting", job, lines)
        tree = psutil.Process(job.pid).children(recursive=True)  # the watchdog's too
        ports = [listed.port for ledger in ledgers() for listed in ledger.trees]
        if stage in ("launching", "warm-up", "measuring"):
            assert ports and len(tree) >= 2, (stage, _living(tree))  # watchdog, server
        killed = time.monotonic()
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=10)
        while _living(tree) and time.monotonic() - killed < LEFT_WITHIN_S:
            time.sleep(0.1)
        gone_after = time.monotonic() - killed
    finally:
        if job.poll() is None:
            job.kill()
    left = _living(tree)
    reader.join(timeout=LEFT_WITHIN_S)
    stderr = "".join(lines)
    where = f"{stage}:\n{stderr[-3000:]}"
    assert job.returncode == -signal.SIGKILL, where
    assert left == [], where  # goal: 0 processes of the tree at every stage
    assert all(_port_free(port) for port in ports), (ports, where)
    assert ledgers() == [], where  # ended: nothing left for the next run
    if ports:  # a server ran when the harness died: the watchdog says what it ended
        assert f"harness watchdog: harness (pid {job.pid}) died: ended" in stderr, where
    if planted is not None:
        server, port = planted
        assert server.wait(timeout=10) == -signal.SIGTERM, where
        assert f"a run that died (harness pid 4242, {results / LAUNCHED_DIR}" in stderr, where
        assert f"ended 1 process(es) of server pid {server.pid} on port {port}" in stderr, where
        assert stderr.index("a run that died") < stderr.index("launching kill_tiny"), where
    run_dir = next(path for path in (results / "runs").glob("*/*") if path.is_dir())
    code = main(["export", str(run_dir), "--format", "aiperf",
                 "--out", str(tmp_path / "export.jsonl")])
    # the reader afterwards: a folder without its record is named (exit 2); a whole
    # record exports
    assert code == (0 if record() is not None else 2), where
    print(f"SIGKILL at {stage}: {len(left)} process(es) of {len(tree)} left after "
          f"{gone_after:.1f} s, export exit {code}")


def test_sigkill_while_launching_ends_the_server_and_a_dead_run_leftover(
        tmp_path: Path) -> None:
    _sigkill_at("launching", tmp_path)


@pytest.mark.e2e
@pytest.mark.parametrize("stage", STAGES[1:])
def test_sigkill_at_stage_ends_the_engine(stage: str, tmp_path: Path) -> None:
    _sigkill_at(stage, tmp_path)
