"""`harness sweep` against the SGLang test double whose acceptance falls as the running
batch grows (FAKE_SGLANG_ACCEPT_DROP: sglang #21212's effect, made large): the gate at
concurrency 4 fails against concurrency 1 (exit 1, from the one judge), a generous
tolerance passes nothing it should not; a server that dies at the second point keeps the
first point's record and names the point that died (exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main
from harness.results.readers import read_run
from harness.results.record import RunRecord
from harness.results.sweeps import read_sweep
from tests.fixtures import sglang_double as double


def _suite(tmp_path: Path) -> Path:
    return double.suite_file(tmp_path, "fake_sweep", floor=1.0, questions=8)


def _record(results: Path, series: str) -> RunRecord:
    [run_dir] = [p.parent for p in (results / "runs" / series).glob("*/run.json")]
    return read_run(run_dir)


def test_a_drop_with_the_batch_fails_the_gate(fake_env: dict[str, str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_SGLANG_ACCEPT_DROP", "1.0")  # per request running beside it
    monkeypatch.setenv("FAKE_SGLANG_STEP_S", "0.01")  # requests overlap: a batch forms
    results = tmp_path / "results"
    code = main(["sweep", str(_suite(tmp_path)), "--concurrency", "1,4", "--results",
                 str(results), "--max-drop", "0.05", "--no-progress", "--no-plot"])
    out = capsys.readouterr().out
    assert code == 1, out
    one, four = _record(results, "fake_sweep.c1"), _record(results, "fake_sweep.c4")
    assert four.measurement.accept_length < 0.95 * one.measurement.accept_length
    assert one.verdict.status == four.verdict.status == "pass"  # the floors alone pass
    assert "concurrency 4: relative gate FAIL" in out and "sweep: FAIL" in out
    [sweep_dir] = [p.parent for p in (results / "sweeps" / "fake_sweep").glob("*/sweep.json")]
    sweep = read_sweep(sweep_dir)
    [finding] = sweep.gate.findings
    assert finding.status == "fail" and finding.result["decision"] == "worse"
    assert sweep.status == "fail"


def test_a_server_that_dies_at_a_point(fake_env: dict[str, str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    double.crash_after(monkeypatch, 12)  # c1: 1 + 8 requests; c4 dies
    results = tmp_path / "results"
    code = main(["sweep", str(_suite(tmp_path)), "--concurrency", "1,4", "--results",
                 str(results), "--max-drop", "0.05", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 3, captured.out + captured.err
    one, four = _record(results, "fake_sweep.c1"), _record(results, "fake_sweep.c4")
    assert one.verdict.status == "pass" and one.measurement.n_requests == 8
    assert four.verdict.status == "error" and "server exited" in four.verdict.reasons[0]
    assert "concurrency 4: ERROR" in captured.out
    assert "server exited" in captured.out
    sweep_dir = next((results / "sweeps" / "fake_sweep").glob("*"))
    sweep = read_sweep(sweep_dir)
    assert [point.status for point in sweep.points] == ["pass", "error"]
    [finding] = sweep.gate.findings
    assert finding.status == "error" and "never a pass" in finding.reasons[0]
    assert sweep.status == "error"
    # the plot draws the point that was measured; the one that died is left out
    assert (sweep_dir / "sweep.png").stat().st_size > 10_000


def test_ctrl_c_at_a_point_keeps_every_record(fake_env: dict[str, str], tmp_path: Path
                                              ) -> None:
    """SIGINT while concurrency 4 waits on a hung server: exit 130, the server tree gone,
    concurrency 1's record as it was and concurrency 4's an error record."""
    events = tmp_path / "events"
    results = tmp_path / "results"
    double.interrupt_harness(
        ["sweep", str(_suite(tmp_path)), "--concurrency", "1,4", "--results", str(results),
         "--no-progress", "--no-plot"], events,
        {"FAKE_SGLANG_MODE": "hang_mid", "FAKE_SGLANG_CRASH_AFTER": "11"},
        requests=12, never="the sweep never reached its second point")  # c1: 1 + 8; c4 hangs
    one, four = _record(results, "fake_sweep.c1"), _record(results, "fake_sweep.c4")
    assert one.verdict.status == "pass" and one.measurement.n_requests == 8
    assert four.verdict.status == "error" and "interrupted" in four.verdict.reasons[0]
    # the sweep's record names both runs and says it was interrupted
    sweep = read_sweep(next((results / "sweeps" / "fake_sweep").glob("*")))
    assert [point.run_id for point in sweep.points] == [one.run_id, four.run_id]
    assert [point.status for point in sweep.points] == ["pass", "error"]
    assert sweep.status == "error" and sweep.reasons[0].startswith("interrupted")
