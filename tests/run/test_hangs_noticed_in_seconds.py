"""Hangs noticed in seconds (issue 30): a stopped or dead process of the server's tree is an
error at once, named (harness.run.launch.TreeWatch); the no-progress limit follows the
run's own latencies (harness.run.drive.progress_limit)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.run import launch
from harness.run.dispatch import PROGRESS_FLOOR_S, PROGRESS_MULTIPLE, progress_limit
from tests.shared import reference_workers

# A parent that starts one child per argument ("sleep": sleeps; "exit": exits at once) and
# never reaps them, like a server whose scheduler died.
PARENT = """
import subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c",
            "import time; time.sleep(600)" if kind == "sleep" else "pass"])
            for kind in sys.argv[1:] if kind != "--reap"]
print(" ".join(str(c.pid) for c in children), flush=True)
if "--reap" in sys.argv:  # a parent that reaps its dead children at once
    for child in children:
        child.wait()
time.sleep(600)
"""


@pytest.fixture
def tree(request: pytest.FixtureRequest) -> Iterator[tuple[int, list[int]]]:
    kinds = request.param
    parent = subprocess.Popen([sys.executable, "-c", PARENT, *kinds], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert parent.stdout is not None
    children = [int(pid) for pid in parent.stdout.readline().split()]
    try:
        yield parent.pid, children
    finally:
        launch.kill_tree(parent.pid, grace_s=2.0)
        parent.wait(timeout=10)


def _wait_for(watch: launch.TreeWatch, seconds: float) -> str | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (problem := watch.problem()) is not None:
            return problem
        time.sleep(0.1)
    return None


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("tree", [("sleep", "sleep")], indirect=True)
def test_a_stopped_child_is_named_at_once(tree: tuple[int, list[int]]) -> None:
    root, children = tree
    watch = launch.TreeWatch(root)
    watch.mark_ready()
    assert watch.problem() is None
    os.kill(children[1], signal.SIGSTOP)
    try:
        problem = _wait_for(watch, 5.0)
    finally:
        os.kill(children[1], signal.SIGCONT)
    assert problem is not None and f"pid {children[1]}" in problem
    assert "is stopped" in problem and "time.sleep(600)" in problem


def _ready_then_child_killed(tree: tuple[int, list[int]]) -> tuple[launch.TreeWatch, int]:
    """A watch of the one-child tree, marked ready, then its child killed; the child's pid."""
    root, (child,) = tree
    watch = launch.TreeWatch(root)
    watch.mark_ready()
    os.kill(child, signal.SIGKILL)
    return watch, child


@pytest.mark.parametrize("tree", [("sleep",)], indirect=True)
def test_a_child_that_dies_unreaped_after_readiness_is_named(
        tree: tuple[int, list[int]]) -> None:
    watch, child = _ready_then_child_killed(tree)
    started = time.monotonic()
    problem = _wait_for(watch, 10.0)
    assert problem is not None and f"pid {child}" in problem and "died" in problem
    # not before the grace (a parent that reaps does so at once), and well within seconds
    assert launch.ZOMBIE_GRACE_S <= time.monotonic() - started < 5.0


@pytest.mark.parametrize("tree", [("sleep", "--reap")], indirect=True)
def test_a_child_its_parent_reaps_is_the_parents_to_report(
        tree: tuple[int, list[int]]) -> None:
    """A subprocess the server ran and waited for (reaped at once) is no error of the tree."""
    watch, _ = _ready_then_child_killed(tree)
    assert _wait_for(watch, launch.ZOMBIE_GRACE_S + 1.5) is None


@pytest.mark.parametrize("tree", [("exit", "sleep")], indirect=True)
def test_a_helper_left_unreaped_from_startup_is_not_an_error(
        tree: tuple[int, list[int]]) -> None:
    root, (helper, _) = tree
    deadline = time.monotonic() + 10
    while not _zombie(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _zombie(helper)
    watch = launch.TreeWatch(root)
    watch.mark_ready()  # the helper is already dead at readiness
    assert _wait_for(watch, launch.ZOMBIE_GRACE_S + 1.5) is None


def test_the_progress_limit_follows_the_slowest_request_within_its_bounds() -> None:
    assert progress_limit(300.0, None) == 300.0  # nothing finished yet: the suite's value
    assert progress_limit(300.0, 0.2) == PROGRESS_FLOOR_S  # tiny requests: the floor
    assert progress_limit(300.0, 5.0) == PROGRESS_MULTIPLE * 5.0
    assert progress_limit(300.0, 500.0) == 300.0  # the suite's value is the upper bound
    assert progress_limit(4.0, 0.1) == 4.0  # a suite value below the floor stands


def test_a_deadlocked_server_ends_the_run_at_the_adaptive_limit(tmp_path: Path) -> None:
    """Every process runs, none answers (a deadlock): with the suite's progress_timeout_s at
    300 s, the run ends once nothing has finished for the adaptive limit (the floor: the
    double's requests take well under a second), exit 3, every finished row kept."""
    from tests.audit.conftest import wheel_for
    from tests.run.fault_cases import SUITE, fake_env

    wheel_for("0.5.23")
    suite = tmp_path / "faults.toml"
    suite.write_text(SUITE.format(questions=40, watchdog=300))
    results = tmp_path / "results"
    env = fake_env(tmp_path / "pids", tmp_path / "events", FAKE_SGLANG_MODE="hang_mid",
                   FAKE_SGLANG_CRASH_AFTER="12", FAKE_SGLANG_STARTUP_S="0.2")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "run", str(suite), "--results",
                           str(results), "--no-progress", "--no-plot"], env=env,
                          capture_output=True, text=True, timeout=240)
    elapsed = time.monotonic() - started
    text = done.stdout + done.stderr
    where = text[-3000:]
    assert done.returncode == 3, where
    assert f"no progress for {PROGRESS_FLOOR_S:g} s" in text, where
    assert "at most workload.progress_timeout_s 300 s" in text, where
    assert elapsed < 120, where  # the floor and start-up, not the suite's 300 s
    (rows,) = results.glob("runs/*/*/requests.jsonl")
    record = json.loads(next(results.glob("runs/*/*/run.json")).read_text())
    assert record["measurement"]["n_requests"] == len(rows.read_text().splitlines()) == 10


@pytest.mark.slow
@pytest.mark.e2e  # nox -s e2e
def test_a_stopped_worker_of_the_reference_server_ends_the_run_in_seconds(
        tmp_path: Path) -> None:
    """The reference engine's decoding worker (a spawned child of its server) SIGSTOPped
    mid-measurement: the server lives and its requests wait for ever; the run ends at once
    (exit 3) naming the worker, not at the suite's 300 s no-progress limit."""
    from harness.builds import has_reference_dependencies
    from harness.suite.model import SUITES_DIR

    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    text = (SUITES_DIR / "tiny_dflash_cpu.toml").read_text()
    suite = tmp_path / "tiny_stop.toml"
    suite.write_text(text.replace("questions = 100", "questions = 40\nprogress_timeout_s = 300"))
    results = tmp_path / "results"
    job = subprocess.Popen([sys.executable, "-m", "harness", "run", str(suite), "--results",
                            str(results), "--no-progress", "--no-plot"],
                           env={**os.environ, "HARNESS_REFERENCE_WORKERS": "1"},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    worker = None
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and job.poll() is None:
            rows = list(results.glob("runs/*/*/requests.jsonl"))
            if rows and len(rows[0].read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        workers = reference_workers(job.pid)
        assert workers, [p.cmdline() for p in psutil.Process(job.pid).children(recursive=True)]
        worker = workers[0]
        worker.suspend()  # SIGSTOP
        stopped = time.monotonic()
        output, _ = job.communicate(timeout=120)
        elapsed = time.monotonic() - stopped
    finally:
        if job.poll() is None:
            launch.kill_tree(job.pid, grace_s=2.0)
        if worker is not None:
            with contextlib.suppress(psutil.Error):
                worker.resume()
    assert job.returncode == 3, output[-3000:]
    assert f"pid {worker.pid}" in output and "is stopped (SIGSTOP" in output, output[-3000:]
    assert elapsed < 15, output[-3000:]  # seconds (teardown of a torch server included)
    record = json.loads(next(results.glob("runs/*/*/run.json")).read_text())
    assert record["stage"] == "measurement" and record["verdict"]["status"] == "error"
    assert not psutil.pid_exists(worker.pid) or \
        psutil.Process(worker.pid).status() == psutil.STATUS_ZOMBIE
