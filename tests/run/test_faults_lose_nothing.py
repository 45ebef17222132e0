"""Faults lose nothing (issue 10): kill -9 and SIGSTOP of the server, SIGINT and SIGTERM of
the harness, at every stage of a run. For each case: the exit code and message, every
request the server finished before the fault kept in requests.jsonl, run.json written with
the stage the run reached, no process left behind, and the time from fault to exit within
the bound the issue sets (a dead server: 5 s; a hang: the progress watchdog + 5 s).
SIGKILL of the harness (issue 50: no teardown of its own runs): the server tree is ended by
the harness's watchdog (harness.run.lifeline) within seconds, the rows written so far stay,
and a reader says what the killed run left (export: no run.json, exit 2).
`nox -s bench` prints the same cases as a table (benchmarks/bench_faults.py)."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from harness.cli import main
from tests.audit.conftest import wheel_for
from tests.run.fault_cases import ORPHAN_WAIT_S, WATCHDOG_S, cases, run_case

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

EXIT = {"kill -9 server": 3, "SIGSTOP server": 3, "SIGSTOP child": 3, "kill -9 child": 3,
        "SIGINT harness": 130, "SIGTERM harness": 130, "SIGKILL harness": -9}
SENT = {"SIGINT harness": signal.SIGINT, "SIGTERM harness": signal.SIGTERM}
MESSAGE = {"kill -9 server": "server exited with signal 9 (SIGKILL)",
           "SIGSTOP server": "server process is stopped (SIGSTOP)",
           # the child named: its name and pid (harness.run.launch.TreeWatch)
           "SIGSTOP child": "is stopped (SIGSTOP or SIGTSTP)",
           "kill -9 child": "died (a zombie: exited, not reaped by its parent",
           "SIGINT harness": "interrupted (SIGINT)",
           "SIGTERM harness": "stopped by signal SIGTERM",
           # said by the watchdog on the harness's stderr, which it inherited
           "SIGKILL harness": "harness watchdog: harness (pid "}


@pytest.mark.parametrize(("stage", "fault"), cases(), ids=lambda v: v.replace(" ", "_"))
def test_fault(stage: str, fault: str, tmp_path: Path,
               capsys: pytest.CaptureFixture[str]) -> None:
    wheel_for("0.5.23")  # the test double runs SGLang's own bookkeeping from it
    slow_repo = None
    if stage == "preparation":
        from tests.builds.repos import make_slow_sglang_repo

        slow_repo = make_slow_sglang_repo(tmp_path / "sglang")
    outcome = run_case(stage, fault, tmp_path, slow_repo)
    where = f"{stage} / {fault}:\n{outcome.stderr[-3000:]}"
    if fault == "SIGKILL harness":
        _killed_harness(stage, outcome, tmp_path, capsys, where)
        return
    if stage == "recording":
        # the record was complete before the fault: it stays as written, nothing lost. A
        # signal that lands while the interpreter is finalising (Python has put the default
        # handlers back by then) ends the process by that signal, which a shell reports as
        # 128 + the signal, like the 130 the harness exits with itself
        finalising = {-SENT[fault]} if fault in SENT else set()
        assert outcome.exit_code in {0, 130} | finalising, where
        assert outcome.verdict == "pass" and outcome.recorded_stage == "recording", where
        assert outcome.rows_kept == outcome.finished_at_fault == 6, where
    else:
        assert outcome.exit_code == EXIT[fault], where
        assert MESSAGE[fault] in outcome.stderr, where
        if fault.endswith("child"):  # named: the stand-in's name, pid and command line
            assert "(pid " in outcome.stderr and "time.sleep(3600)" in outcome.stderr, where
        assert outcome.run_json and outcome.verdict == "error", where
        assert outcome.recorded_stage == stage, where
        if stage == "measurement":
            assert outcome.finished_at_fault >= 8, where
            # every request the harness finished is on disk and in the record's partial
            # measurement (never a pass)
            assert outcome.recorded_requests == outcome.rows_kept, where
            if fault.endswith(("server", "child")):
                # the harness reads every answer the server sent before it died or stopped
                assert outcome.rows_kept >= outcome.finished_at_fault, where
            else:
                # the harness itself was stopped: answers still in transit (at most one per
                # request in flight, concurrency 4) were not finished for it
                assert outcome.rows_kept >= outcome.finished_at_fault - 4, where
    assert outcome.orphans == [], where
    # a hang: the watchdog + 5 s; a dead server: 5 s; a child stopped or dead while the main
    # process serves: 7 s (seen within a second, a zombie after ZOMBIE_GRACE_S, then the
    # answers the main process still sends are read before the teardown)
    bound = {"SIGSTOP server": WATCHDOG_S + 5.0, "SIGSTOP child": 7.0,
             "kill -9 child": 7.0}.get(fault, 5.0)
    assert outcome.fault_to_exit_s <= bound, where


def _killed_harness(stage: str, outcome, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                    where: str) -> None:
    """SIGKILL: the harness exits at once (-9); its server tree is gone within
    ORPHAN_WAIT_S (ended by the watchdog, which says so), no ledger is left for the next
    run, the rows written before the kill stay, and export says what the folder lacks."""
    assert outcome.exit_code == EXIT["SIGKILL harness"], where
    assert outcome.orphans == [], where
    assert outcome.orphans_gone_s < ORPHAN_WAIT_S, where
    assert not list((tmp_path / "results" / ".launched").glob("*.json")), where
    run_dir = next(path for path in (tmp_path / "results" / "runs").glob("*/*")
                   if path.is_dir())
    if stage == "recording":  # the server stopped before the record: nothing to end
        assert outcome.verdict == "pass" and outcome.rows_kept == 6, where
        assert main(["export", str(run_dir), "--format", "aiperf", "--out", "-"]) == 0
        capsys.readouterr()
        return
    assert MESSAGE["SIGKILL harness"] in outcome.stderr, where
    assert "ended" in outcome.stderr.split(MESSAGE["SIGKILL harness"], 1)[1], where
    assert not outcome.run_json, where  # killed before its record: nothing half-written
    if stage == "measurement":  # each row is flushed as its request finishes
        assert outcome.rows_kept >= outcome.finished_at_fault - 4, where
    assert main(["export", str(run_dir), "--format", "aiperf"]) == 2
    said = capsys.readouterr().err
    assert f"{run_dir / 'run.json'}" in said and "Traceback" not in said, said
