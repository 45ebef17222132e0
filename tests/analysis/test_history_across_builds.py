"""A history over builds shows the step between them: runs of the reference engine's
`--build reference:policy=fixed`, then `reference:policy=fixed,noise=0.1`, recorded by the
run's own writer (`harness.run.runner.run_suite`: the suite loaded, the build chosen, the
record written), are one history in `harness trend` and on the published site.

Only the engine's launch and measurement are stood in for (`_prepare_and_measure`): each
run is given the figure the reference engine measures for its build (tiny_dflash_cpu's
floors comment: 3.8465 under the fixed policy, 3.2416 with draft noise 0.1), so the
records differ from real ones in nothing the history reads.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.publish.model import gather
from harness.results.record import BuildInfo, Measurement, Verdict
from harness.results.store import load_runs
from harness.run import runner
from harness.run.outcome import RunOptions, RunOutcome
from harness.run.plan import build_options
from harness.suite.model import load_suite

SUITE = "tiny_dflash_cpu"
FIXED = "reference:policy=fixed"
NOISY = "reference:policy=fixed,noise=0.1"
LEVEL = {0.0: 3.8465, 0.1: 3.2416}  # accept length (server_avg) by draft noise
STEPS = 1000
HALF_CI = 0.33  # the suite's measured CI half-width on 100 prompts


def _measured(runs: list[Any], models: Any, chosen: Any, gpus: Any, fit: Any) -> RunOutcome:
    """The engine's part of a run, as the reference engine's figures for the build."""
    for run in runs:
        suite = run.loaded.suite  # as served: the build's settings applied
        level = LEVEL[suite.engine.draft_noise]
        correct = round((level - 1) * STEPS)
        figure = (correct + STEPS) / STEPS
        run.build = BuildInfo(engine="reference", spec=run.options.sglang,
                              options=build_options(suite))
        run.measurement = Measurement(
            metric="server_avg", accept_length=figure, accept_length_server_avg=figure,
            accept_length_ci=(figure - HALF_CI, figure + HALF_CI), n_requests=100,
            n_prompts=100, n_planned=100, completion_tokens=correct + STEPS + 100,
            verify_steps=STEPS, correct_drafts=correct)
        passed = figure >= suite.floors.accept_length
        run.finish(Verdict(status="pass" if passed else "fail"))
    return runs[0].outcome()


@pytest.fixture
def record_runs(monkeypatch: pytest.MonkeyPatch, results: Path) -> Any:
    monkeypatch.setattr(runner, "_prepare_and_measure", _measured)
    loaded = load_suite(SUITE)

    def record(spec: str, times: int) -> None:
        for _ in range(times):
            options = RunOptions(results_dir=results, sglang=spec, label="nightly",
                                 plot=False, progress=False)
            runner.run_suite(loaded, options)

    return record


def _line(results: Path) -> Any:
    site = gather(results)
    series = next(s for s in site.series if s.name == SUITE)
    return next(line for line in series.lines if line.name == "nightly")


def test_the_first_run_of_a_new_build_shows_its_change(record_runs: Any,
                                                        results: Path) -> None:
    record_runs(FIXED, 3)
    record_runs(NOISY, 1)
    line = _line(results)
    assert len(line.history) == 4  # one history: the new build did not start another
    assert line.change == pytest.approx(LEVEL[0.1] - LEVEL[0.0], abs=1e-3)


def test_a_drop_across_builds_is_found_by_trend_and_on_the_site(
        record_runs: Any, results: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    record_runs(FIXED, 3)
    record_runs(NOISY, 3)
    runs = load_runs(results, suite=SUITE)
    assert runs["suite_sha256"].nunique() == 1  # the suite's identity is the file's
    assert set(runs["build.spec"]) == {FIXED, NOISY}  # the build is recorded as the build

    code = main(["trend", SUITE, "--results", str(results), "--json"])
    [summary] = json.loads(capsys.readouterr().out)
    assert code == 1, summary  # the open drop is an alarm
    assert summary["runs"] == 6 and summary["alarm"]
    assert [round(step["delta"], 2) for step in summary["steps"]] == [-0.6]

    line = _line(results)
    assert len(line.history) == 6
    assert [view.is_drop for view in line.steps] == [True]
    view = line.steps[0]
    assert view.is_open
    assert view.step.before == pytest.approx(LEVEL[0.0], abs=1e-3)
    assert view.step.after == pytest.approx(LEVEL[0.1], abs=1e-3)
    assert (view.before["build.spec"], view.after["build.spec"]) == (FIXED, NOISY)
    assert line.trend.describe().startswith("drop -0.60")

    site = tmp_path / "site"
    assert main(["publish", "--results", str(results), "--out", str(site)]) == 0
    page = (site / "suites" / f"{SUITE}.html").read_text()
    assert "stable" not in page and "no step in the analysed window" not in page
    assert f"{view.step.before:.3f} → {view.step.after:.3f}" in page and "yes: alarm" in page
