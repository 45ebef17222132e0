"""Trend detection on synthetic nightly histories (fixed seeds), the summary and the command."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.analysis.simulate import simulate_history
from harness.analysis.trend import (
    TrendParams,
    analyse,
    analyse_all,
    detect_steps,
    suite_history,
    winsorize,
)
from harness.analysis.trend_report import markdown_table, summarize
from harness.commands.parsers.trend import TrendCommand
from harness.errors import BadInput

NIGHTS = 60
START = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)


def nightly(
    seed: int,
    drop: float = 0.0,
    at: int = 40,
    outliers: dict[int, float] | None = None,
    suite: str = "tiny",
    sha: str = "a",
) -> pd.DataFrame:
    """60 nights like the reference engine's (harness.analysis.simulate.simulate_history)."""
    values, half_width = simulate_history(seed, NIGHTS, drop=drop, at=at)
    for night, shift in (outliers or {}).items():
        values[night] += shift
    return pd.DataFrame({
        "suite": suite, "kind": "run", "label": None, "suite_sha256": sha,
        "started_at": [START + timedelta(days=i) for i in range(NIGHTS)],
        "accept_length": values, "ci_low": values - half_width, "ci_high": values + half_width,
        "ci_level": 0.95, "verdict": "pass", "floor": 1.5, "path": None,
    })  # fmt: skip


def trend_of(frame: pd.DataFrame):
    return analyse(suite_history(frame, "tiny"), "tiny")


@pytest.mark.parametrize("seed", range(50))
def test_planted_drop_is_found_where_it_was_planted(seed: int) -> None:
    trend = trend_of(nightly(seed, drop=0.3, at=40))
    assert trend.alarm
    assert trend.open_drop.index == 40
    assert trend.open_drop.delta == pytest.approx(-0.3, abs=0.06)
    assert trend.open_drop.at == START + timedelta(days=40)


def test_no_alarm_on_200_histories_without_a_step() -> None:
    alarms = [seed for seed in range(200) if trend_of(nightly(seed)).alarm]
    assert alarms == []


def test_drop_three_nights_before_the_end_is_found() -> None:
    found = sum(trend_of(nightly(seed, drop=0.3, at=NIGHTS - 3)).alarm for seed in range(50))
    assert found == 50


def test_a_lone_wild_night_is_not_a_step() -> None:
    for seed in range(20):
        middle = trend_of(nightly(seed, outliers={30: -0.4}))
        last = trend_of(nightly(seed, outliers={NIGHTS - 1: -0.4}))
        assert not middle.alarm and not last.alarm, seed


def test_recovered_drop_and_rise_do_not_alarm() -> None:
    recovered = nightly(3, drop=0.3, at=20)
    recovered.loc[40:, ["accept_length", "ci_low", "ci_high"]] += 0.3
    trend = trend_of(recovered)
    assert [round(step.delta, 1) for step in trend.steps] == [-0.3, 0.3]
    assert not trend.alarm
    risen = trend_of(nightly(4, drop=-0.3, at=30))
    assert len(risen.steps) == 1 and not risen.steps[0].is_drop and not risen.alarm


def test_noise_beyond_the_cis_is_estimated_not_alarmed() -> None:
    frame = nightly(5)
    frame["accept_length"] += np.random.default_rng(5).normal(0, 0.05, NIGHTS)
    trend = trend_of(frame)
    assert not trend.alarm
    assert 0.02 < trend.excess_sd < 0.09


def test_a_changed_suite_document_starts_a_new_history() -> None:
    frame = nightly(6, drop=0.3, at=40)
    frame.loc[40:, "suite_sha256"] = "b"  # the suite was edited on purpose that night
    history = suite_history(frame, "tiny")
    assert len(history) == 20
    assert not analyse(history, "tiny").alarm


def test_heavy_tailed_and_noisier_nights_do_not_alarm() -> None:
    # benchmarks/bench_trend.py measures 0 of 1000 at 60 nights; 50 here, fixed seeds
    for seed in range(50):
        for kwargs in ({"noise": "t3"}, {"excess_sd": 0.03}):
            values, half_width = simulate_history(seed, NIGHTS, **kwargs)
            steps, _ = detect_steps(values, half_width / 1.96, TrendParams())
            assert not [s for s in steps if s.is_drop and abs(s.delta) >= 0.1], (seed, kwargs)


def test_winsorize_pulls_a_lone_night_to_its_running_median() -> None:
    values = np.array([2.0, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0])
    clipped = winsorize(values, np.full(7, 0.1), clip_sd=3.0)
    assert clipped[3] == pytest.approx(1.7) and np.all(clipped[[0, 1, 2, 4, 5, 6]] == 2.0)
    edge = winsorize(np.array([0.0, 2.0, 2.0, 2.0]), np.full(4, 0.1), clip_sd=3.0)
    assert edge[0] == pytest.approx(1.7)  # the window is cut at the start: median of 0, 2, 2


def test_steps_without_cis_use_only_the_spread() -> None:
    values = [2.0] * 30 + [1.7] * 30
    steps, _ = detect_steps(values, [float("nan")] * 60, TrendParams())
    assert [step.index for step in steps] == [30]


def test_summary_table_lists_figures_and_flags_the_drop() -> None:
    frame = pd.concat([
        nightly(7, drop=0.3, at=50),
        nightly(8, suite="other", sha="x"),
        pd.DataFrame({"suite": ["tiny"], "kind": ["baseline"], "label": ["post-fix"],
                      "accept_length": [1.9], "started_at": [START]}),
    ], ignore_index=True)  # fmt: skip
    trends = analyse_all(frame)
    assert sorted(trends) == ["other", "tiny"]
    summaries = {s.suite: s for s in summarize(frame, trends)}
    tiny = summaries["tiny"]
    assert tiny.failing and not summaries["other"].failing
    assert tiny.baselines == [("post-fix", 1.9)]
    assert tiny.change == pytest.approx(
        frame["accept_length"].iloc[59] - frame["accept_length"].iloc[58]
    )
    table = markdown_table(list(summaries.values()))
    row = next(line for line in table.splitlines() if "tiny" in line)
    assert row.startswith("| ❌ tiny |") and "post-fix 1.9" in row and "⚠️ drop -0.3" in row
    assert "since 2026-02-20" in row
    assert "| 1.5 |" in row


def _command(argv: list[str]) -> int:
    command = TrendCommand()
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return command.run(parser.parse_args(argv))


def _save_history(root: Path, frame: pd.DataFrame) -> None:
    from harness.results import record as rec
    from harness.results.writer import save_run

    for i, row in enumerate(frame.itertuples()):
        record = rec.RunRecord(
            run_id=f"{i:08x}", started_at=row.started_at,
            suite=rec.SuiteInfo(name=row.suite, sha256=row.suite_sha256, document={
                "floors": {"accept_length": 1.5},
                "baselines": [{"label": "pre-fix", "accept_length": 1.2, "source": "x"}]}),
            build=rec.BuildInfo(engine="reference"),
            provenance=rec.Provenance(harness_version="0", python="3.11", platform="linux"),
            measurement=rec.Measurement(accept_length=row.accept_length,
                                    accept_length_ci=(row.ci_low, row.ci_high), n_requests=20,
                                    completion_tokens=100, verify_steps=50),
            verdict=rec.Verdict(status=row.verdict),
        )  # fmt: skip
        save_run(root, record)


def test_trend_command_on_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _save_history(tmp_path, nightly(9, drop=0.3, at=45))
    assert _command(["--results", str(tmp_path), "--markdown", "--plot"]) == 1
    out = capsys.readouterr().out
    assert "| ❌ tiny |" in out and "pre-fix 1.2" in out
    png = tmp_path / "plots" / "tiny" / "trend.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    assert _command(["tiny", "--results", str(tmp_path), "--json"]) == 1
    assert '"alarm": true' in capsys.readouterr().out


def test_trend_command_passes_a_stable_history(tmp_path: Path) -> None:
    _save_history(tmp_path, nightly(10))
    assert _command(["--results", str(tmp_path)]) == 0


def test_a_named_suite_without_runs_is_an_error_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _save_history(tmp_path, nightly(11))
    assert _command(["tiny", "nope", "--results", str(tmp_path), "--markdown"]) == 3
    out = capsys.readouterr().out
    assert "| ❌ nope | no night | – | – | – | no run | – | too few runs |" in out
    assert "| tiny |" in out


def test_since_judges_tonight_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Last night's pass is not tonight's: a suite whose latest run predates --since has no
    verdict, which is an error (exit 3), never a pass."""
    frame = nightly(12)
    _save_history(tmp_path, frame)
    last = frame["started_at"].iloc[-1]
    tonight = (last + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert _command(["tiny", "--results", str(tmp_path), "--since", tonight,
                     "--markdown"]) == 3
    assert "no run tonight" in capsys.readouterr().out
    covered = last.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert _command(["tiny", "--results", str(tmp_path), "--since", covered]) == 0
    with pytest.raises(BadInput, match="not an ISO 8601 time"):
        _command(["tiny", "--results", str(tmp_path), "--since", "yesterday"])


def test_label_keeps_one_line_per_build(tmp_path: Path) -> None:
    frame = nightly(13)
    _save_history(tmp_path, frame)
    # no run is labelled "main": that line has no run, an error
    assert _command(["tiny", "--results", str(tmp_path), "--label", "main"]) == 3


def test_partial_and_errored_runs_stay_out_of_the_history_unless_asked() -> None:
    """A night whose server died keeps a partial figure far below the others: by default it
    enters neither the history nor "change since last night" (issue 19, case 8); asked
    for, it is in and marked; the latest run's verdict is still reported (an error)."""
    frame = nightly(7)
    frame["partial"] = False
    crashed = frame.iloc[[-1]].assign(started_at=START + timedelta(days=NIGHTS),
                                      accept_length=0.9, ci_low=0.5, ci_high=1.3,
                                      partial=True, verdict="error")
    errored = crashed.assign(started_at=START + timedelta(days=NIGHTS + 1), partial=False)
    frame = pd.concat([frame, crashed, errored], ignore_index=True)
    history = suite_history(frame, "tiny")
    assert len(history) == NIGHTS and history["accept_length"].min() > 0.9
    [summary] = summarize(frame, analyse_all(frame, ["tiny"]), NIGHTS)
    assert summary.verdict == "error"
    assert summary.change == pytest.approx(frame["accept_length"][NIGHTS - 1]
                                           - frame["accept_length"][NIGHTS - 2])
    assert summary.incomplete_runs == 0
    with_them = suite_history(frame, "tiny", window=None, include_incomplete=True)
    assert len(with_them) == NIGHTS + 2
    assert with_them["incomplete"].tolist() == [False] * NIGHTS + [True, True]
    params = TrendParams(window=NIGHTS + 2, include_incomplete=True)
    [summary] = summarize(frame, analyse_all(frame, ["tiny"], params), NIGHTS + 2,
                          include_incomplete=True)
    assert summary.incomplete_runs == 2 and summary.change == pytest.approx(0.0)
    assert "incl. 2 partial/error run(s)" in markdown_table([summary])
