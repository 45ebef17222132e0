"""`--fail-on-drop` (`compare`, `ab`) is judged by the judge (`judge.decide_drop`): a
significant drop fails, none passes, and a drop test that cannot be made is an error,
never a pass."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.cli import main
from harness.errors import ExitCode
from harness.results.readers import read_run
from harness.run.judge import DropEvidence, decide_drop
from tests.results.records import make_run

SHIPPED = Path(__file__).resolve().parents[2] / "results"


def test_a_drop_fails_none_passes_no_test_is_an_error() -> None:
    dropped = decide_drop([DropEvidence("s", 0.01, 0.05, "paired by question")])
    assert (dropped.verdict.status, dropped.exit_code) == ("fail", ExitCode.BELOW_FLOOR)
    assert dropped.verdict.reasons == ["s: B is significantly below A: one-sided p 0.01 < "
                                       "alpha 0.05 (paired by question)"]
    kept = decide_drop([DropEvidence("s", 0.05, 0.05)])  # at alpha: not below it
    assert (kept.verdict.status, kept.exit_code) == ("pass", ExitCode.PASS)
    untested = decide_drop([DropEvidence("s", math.nan, 0.05, "figures only")])
    assert (untested.verdict.status, untested.exit_code) == ("error", ExitCode.ENGINE_ERROR)
    assert "no drop test could be made (figures only)" in untested.verdict.reasons[0]
    assert decide_drop([]).exit_code is ExitCode.ENGINE_ERROR  # nothing compared


@given(st.lists(st.tuples(st.floats(allow_nan=True), st.floats(0.001, 0.5)), max_size=6))
def test_any_drop_tests(tests: list[tuple[float, float]]) -> None:
    judged = decide_drop([DropEvidence(f"s{i}", p, a) for i, (p, a) in enumerate(tests)])
    if any(math.isfinite(p) and p < a for p, a in tests):
        expected = ExitCode.BELOW_FLOOR  # a drop first, as the reports put a failure first
    elif not tests or any(not math.isfinite(p) for p, _ in tests):
        expected = ExitCode.ENGINE_ERROR
    else:
        expected = ExitCode.PASS
    assert judged.exit_code is expected
    assert len(judged.verdict.reasons) == max(1, len(tests))


def test_compare_of_two_figures_cannot_pass_fail_on_drop(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Two baseline figures carry no per-request data: no drop test can be made. It
    exited 0 with --fail-on-drop (a missing test read as a pass)."""
    argv = ["compare", "baseline:gemma4_dflash_31b@post-fix",
            "baseline:gemma4_dflash_31b@pre-fix", "--results", str(SHIPPED)]
    assert main(argv) == 0  # without the gate: a report
    assert main([*argv, "--fail-on-drop"]) == ExitCode.ENGINE_ERROR
    assert "--fail-on-drop: ERROR: B - A: no drop test could be made" in \
        capsys.readouterr().err


def test_compare_states_the_judges_finding(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(tmp_path / "results", 2.6, n=80, seed=1)
    b = make_run(tmp_path / "results", 2.0, n=80, seed=2)
    assert main(["compare", str(a), str(b), "--fail-on-drop"]) == ExitCode.BELOW_FLOOR
    assert "--fail-on-drop: FAIL: B - A: B is significantly below A" in capsys.readouterr().err
    assert main(["compare", str(a), str(b), "--fail-on-drop", "--alpha", "5"]) == \
        ExitCode.BAD_INPUT  # a level outside (0, 1) passed or failed everything


def _fake_runs(monkeypatch: pytest.MonkeyPatch, values: dict[str, float], n: int = 60,
               seed: dict[str, int] | None = None) -> None:
    import harness.run.runner

    def fake_run_suite(loaded, options):  # the runner's API: (LoadedSuite, RunOptions)
        run_dir = make_run(options.results_dir, values[options.label], n=n,
                           seed=(seed or {}).get(options.label, 1), suite=loaded.suite.name,
                           floor=1.0, label=options.label)
        record = read_run(run_dir)
        return SimpleNamespace(status=record.verdict.status, run_dir=run_dir, exit_code=0,
                               record=record, entries=[])  # one entry: a RunOutcome's own

    monkeypatch.setattr(harness.run.runner, "run_suite", fake_run_suite)


AB = ["ab", "gemma4_dflash_31b", "--a", "sglang==0.5.17", "--b", "sglang==0.5.23"]


@pytest.mark.parametrize(("values", "seeds", "gate", "code", "said"), [
    ({"a": 5.6, "b": 5.0}, {"a": 1, "b": 2}, True, ExitCode.BELOW_FLOOR, "FAIL"),
    ({"a": 5.6, "b": 5.0}, {"a": 1, "b": 2}, False, ExitCode.PASS, None),  # a report
    ({"a": 5.6, "b": 5.6}, {"a": 1, "b": 1}, True, ExitCode.PASS, "PASS"),  # the same build
])
def test_ab_fail_on_drop_is_the_judges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        values: dict[str, float], seeds: dict[str, int], gate: bool, code: ExitCode,
        said: str | None) -> None:
    _fake_runs(monkeypatch, values, seed=seeds)
    argv = [*AB, "--results", str(tmp_path / "results")] + (["--fail-on-drop"] if gate else [])
    assert main(argv) == code
    err = capsys.readouterr().err
    if said is None:
        assert "--fail-on-drop" not in err
    else:
        assert f"--fail-on-drop: {said}: gemma4_dflash_31b: " in err


def test_ab_with_no_drop_test_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """One question a side: the paired difference has no standard error, so no drop test;
    it exited 0 with --fail-on-drop."""
    _fake_runs(monkeypatch, {"a": 5.6, "b": 4.0}, n=1)
    assert main([*AB, "--results", str(tmp_path / "results"), "--fail-on-drop"]) == \
        ExitCode.ENGINE_ERROR
    assert "no drop test could be made" in capsys.readouterr().err
