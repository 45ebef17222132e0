"""Plots write real PNGs; `harness plot|compare|power|ab` through harness.cli.main."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.analysis import plots
from harness.cli import main
from harness.results.layout import RUN_PNG
from tests.results.records import make_history, make_run

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 5000 and path.read_bytes()[:8] == PNG


def test_plot_run_shows_run_baselines_and_floor(results: Path) -> None:
    run_dir = make_run(results, 2.3)
    out = plots.plot_run(run_dir)
    assert out == run_dir / RUN_PNG and _is_png(out)
    figure = plots.run_figure(plots.read_run(run_dir),
                              plots.baselines_for(plots.read_run(run_dir), results), 2.0)
    labels = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert labels[0].endswith("pre-fix") and labels[1].endswith("post-fix")
    assert labels[2].startswith("this run")
    assert any(line.get_label() == "floor 2" for line in figure.axes[0].get_lines())


def test_plot_history_and_histogram(results: Path) -> None:
    dirs = make_history(results)
    assert _is_png(plots.plot_history(results, "tiny_dflash_cpu"))
    assert (results / "plots" / "tiny_dflash_cpu" / "history.png").is_file()
    assert _is_png(plots.plot_histogram(dirs[0]))


def test_plot_history_many_runs_uses_bins(results: Path) -> None:
    import pandas as pd

    n = plots.PIXEL_BINS * 2
    start = datetime(2024, 1, 1, tzinfo=UTC)
    runs = pd.DataFrame({
        "suite": "s", "kind": "run", "verdict": ["pass"] * (n - 1) + ["fail"],
        "started_at": pd.to_datetime([start + timedelta(hours=i) for i in range(n)], utc=True),
        "accept_length": 5.5, "ci_low": 5.4, "ci_high": 5.6,
    })
    figure = plots.history_figure(runs, "s", floor=5.4)
    assert "runs (range per bin)" in [c.get_label() for c in figure.axes[0].collections]


def test_cli_plot(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_history(results)[-1]
    assert main(["plot", str(run_dir)]) == 0
    assert _is_png(run_dir / RUN_PNG)
    assert main(["plot", str(run_dir), "--kind", "histogram"]) == 0
    assert main(["plot", "tiny_dflash_cpu", "--results", str(results)]) == 0
    assert main(["plot", str(run_dir), "--kind", "history"]) == 0
    assert main(["plot", "no_such_suite", "--results", str(results)]) == 2
    assert main(["plot", "no_such_suite", "--kind", "run"]) == 2
    assert capsys.readouterr().out.count(".png") == 4


def test_cli_compare(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run(results, 2.6, n=80, seed=1, label="post")
    b = make_run(results, 2.0, n=80, seed=2, label="pre")
    assert main(["compare", str(a), str(b)]) == 0
    assert "accept length" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["difference"]["b_minus_a"] < 0
    assert result["difference"]["method"].startswith("paired")
    assert result["difference"]["p_drop"] < 0.05
    assert main(["compare", str(a), str(b), "--fail-on-drop"]) == 1
    assert main(["compare", str(b), str(a), "--fail-on-drop"]) == 0
    assert main(["compare", "tiny_dflash_cpu@post", "tiny_dflash_cpu@latest",
                 "--results", str(results)]) == 0  # fmt: skip
    glob = str(results / "runs" / "tiny_dflash_cpu" / "*")
    assert main(["compare", glob, str(b), "--results", str(results), "--json"]) == 0
    assert main(["compare", "tiny_dflash_cpu@nope", str(b), "--results", str(results)]) == 2
    assert main(["compare", str(results / "nothing*"), str(b)]) == 2
    assert main(["compare", str(a), str(b), "--level", "2"]) == 2


def test_cli_compare_against_shipped_baseline(capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[2] / "results"
    code = main(["compare", "baseline:gemma4_dflash_31b@post-fix",
                 "baseline:gemma4_dflash_31b@pre-fix", "--results", str(root), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["difference"]["b_minus_a"] == pytest.approx(-0.35)


def test_cli_power(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["power", "gemma4_dflash_31b", "--results", str(results), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sd_source"].startswith("default")
    assert [row["n_prompts"] for row in report["table"]][:3] == [25, 50, 100]
    assert main(["power", "gemma4_dflash_31b", "--results", str(results)]) == 0
    assert "min detectable drop" in capsys.readouterr().out
    assert main(["power", "gemma4_dflash_31b", "--alpha", "0.7"]) == 2
    assert main(["power", "no_such_suite"]) == 2


def test_cli_power_uses_recorded_spread(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(results, 5.5, n=50, suite="gemma4_dflash_31b", floor=5.4)
    assert main(["power", "gemma4_dflash_31b", "--results", str(results), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sd_source"].startswith("pooled over 1 recorded run")


def test_cli_ab_runs_both_builds_and_compares(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import harness.run.runner

    calls = []

    def fake_run_suite(loaded, options):  # the runner's API: (LoadedSuite, RunOptions)
        calls.append((options.sglang, options.label))
        value = 5.3 if options.label == "a" else 5.6
        run_dir = make_run(options.results_dir, value, n=60, seed=len(calls),
                           suite=loaded.suite.name, floor=5.4, label=options.label)  # fmt: skip
        record = plots.read_run(run_dir)
        return SimpleNamespace(status=record.verdict.status, run_dir=run_dir, exit_code=0,
                               record=record, entries=[])  # one entry: a RunOutcome's own

    monkeypatch.setattr(harness.run.runner, "run_suite", fake_run_suite)
    code = main(["ab", "gemma4_dflash_31b", "--a", "sglang==0.5.17", "--b", "sglang==0.5.23",
                 "--results", str(results), "--json"])  # fmt: skip
    assert code == 0
    assert calls == [("sglang==0.5.17", "a"), ("sglang==0.5.23", "b")]
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{"):])
    assert result["difference"]["b_minus_a"] > 0


def test_cli_ab_without_a_record_is_an_engine_error(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.run.runner

    monkeypatch.setattr(harness.run.runner, "run_suite",
                        lambda loaded, options: SimpleNamespace(
                            status="error", run_dir=None, exit_code=3, record=None,
                            entries=[]))
    assert main(["ab", "gemma4_dflash_31b", "--a", "sglang==0.5.17", "--b", "sglang==0.5.23",
                 "--results", str(results)]) == 3  # fmt: skip


@pytest.mark.parametrize("broken", ["a", "b"])
@pytest.mark.parametrize("how", ["partial", "error"])
def test_cli_ab_with_a_crashed_or_partial_side_is_exit_3(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    broken: str, how: str,
) -> None:
    """B's server killed after 30 of 100 requests keeps a partial measurement: no table,
    no exit 0 (not even with --fail-on-drop), but exit 3 naming the side (issue 19, 4)."""
    import harness.run.runner
    from harness.results.record import Verdict

    def fake_run_suite(loaded, options):
        run_dir = make_run(options.results_dir, 5.5, n=60 if options.label != broken else 30,
                           seed=1, suite=loaded.suite.name, floor=5.4, label=options.label)
        record = plots.read_run(run_dir)
        if options.label == broken:
            measurement = record.measurement.model_copy(
                update={"partial": how == "partial", "n_planned": 100})
            reasons = ["server died: exit -9"] if how == "error" else ["partial run"]
            record = record.model_copy(update={"measurement": measurement, "verdict": Verdict(
                status="error", reasons=reasons)})
        return SimpleNamespace(status=record.verdict.status, run_dir=run_dir, exit_code=0,
                               record=record, entries=[])  # one entry: a RunOutcome's own

    monkeypatch.setattr(harness.run.runner, "run_suite", fake_run_suite)
    code = main(["ab", "gemma4_dflash_31b", "--a", "sglang==0.5.17", "--b", "sglang==0.5.23",
                 "--results", str(results), "--fail-on-drop"])
    captured = capsys.readouterr()
    assert code == 3
    assert f"build {broken} (sglang==0.5.{17 if broken == 'a' else 23})" in captured.err
    assert ("30 of 100 requests" in captured.err) == (how == "partial")
    assert "questions" not in captured.out  # no comparison table
