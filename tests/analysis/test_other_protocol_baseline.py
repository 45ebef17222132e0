"""A baseline measured in another protocol (`protocol = "<id>"` in the suite) is drawn
apart and labelled everywhere a baseline shows, and sets nothing the gate reads: the run's
plot, the history plot, the site's chart and table label, the run's plan, the nightly
summary, and the paired gate's level (`power`, the run's sizing lines)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from harness.analysis import plots, trend_report
from harness.commands.power import paired_power
from harness.files import SUITES_DIR
from harness.protocols.pairing import sizing_lines
from harness.publish.charts import history_figure, svg_style
from harness.publish.model import SeriesView
from harness.results.baselines import BaselineFigure
from harness.run.dry_run import baseline_line
from harness.run.outcome import RunOptions
from harness.suite.model import load_suite
from tests.results.records import make_run

OTHER = "vllm.dflash.correctness"
MARK = f"[other protocol: {OTHER}, not gated]"


def _figure(label: str, value: float, protocol: str | None) -> BaselineFigure:
    return BaselineFigure(label=label, accept_length=value, ci=None, accuracy=None,
                          source="s", engine=None, path="(suite document)",
                          metric="server_avg", external=True, protocol=protocol)


@pytest.fixture()
def suite_with_other(tmp_path: Path) -> Path:
    """tiny_dflash_cpu with a higher baseline measured in another protocol."""
    text = (SUITES_DIR / "tiny_dflash_cpu.toml").read_text()
    anchor = "# The paired relative gate"
    assert anchor in text
    other = ('[[baselines]]\nlabel = "elsewhere"\naccept_length = 7.5\nsource = "another '
             f'protocol\'s figure"\nexternal = true\nprotocol = "{OTHER}"\n\n')
    path = tmp_path / "tiny_dflash_cpu.toml"
    path.write_text(text.replace(anchor, other + anchor, 1))
    return path


def test_the_run_plot_draws_it_last_grey_and_named(results: Path) -> None:
    run_dir = make_run(results, 2.3)
    record = plots.read_run(run_dir)
    figure = plots.run_figure(record, [_figure("elsewhere", 7.5, OTHER),
                                       _figure("own", 3.0, None)], 2.0)
    axes = figure.axes[0]
    labels = [t.get_text() for t in axes.get_xticklabels()]
    assert labels[0] == "baseline\nown"
    assert labels[1] == f"other protocol\n{OTHER}\nelsewhere"
    marks = [container.lines[0] for container in axes.containers]  # one errorbar each
    assert to_rgba(marks[1].get_color()) == to_rgba("lightgrey")
    assert to_rgba(marks[0].get_color()) != to_rgba("lightgrey")


def test_the_history_plot_names_it_and_draws_it_grey() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    runs = pd.DataFrame({
        "suite": "s", "kind": "run", "verdict": "pass",
        "started_at": pd.to_datetime([start + timedelta(days=i) for i in range(5)], utc=True),
        "accept_length": 3.1, "ci_low": 3.0, "ci_high": 3.2,
    })
    figure = plots.history_figure(runs, "s", [_figure("elsewhere", 7.5, OTHER),
                                              _figure("own", 3.0, None)], floor=2.0)
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    other = lines[f"elsewhere {MARK} 7.5"]
    assert other.get_linestyle() == "-." and other.get_color() == "grey"
    assert lines["own 3"].get_linestyle() == ":" and lines["own 3"].get_color() != "grey"


def test_the_plan_and_the_nightly_summary_name_it(suite_with_other: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite(suite_with_other).suite
    [other] = [b for b in suite.baselines if b.protocol]
    assert not other.gated and all(b.gated for b in suite.baselines if not b.protocol)
    assert baseline_line(other, suite.floors.metric).startswith(
        f"baseline   elsewhere {MARK}: 7.5 ")
    document = {"baselines": [b.model_dump() for b in suite.baselines]}
    monkeypatch.setattr(trend_report, "_suite_document", lambda latest: document)
    runs = pd.DataFrame({"suite": [], "kind": [], "label": [], "accept_length": []})
    found = dict(trend_report._baselines(runs, "tiny_dflash_cpu", None))
    assert found[f"elsewhere {MARK}"] == 7.5 and found["reference fixed"] == 3.8465


def test_the_paired_gate_takes_no_level_from_it(suite_with_other: Path, tmp_path: Path) -> None:
    loaded = load_suite(suite_with_other)
    found = paired_power(loaded, tmp_path, 100)
    assert found is not None
    # the highest baseline of the suite's own protocol, not the other protocol's 7.5
    assert found["reference"] == 3.8465
    assert found["reference_source"] == "baseline 'reference fixed'"
    [line] = sizing_lines(loaded, RunOptions())
    plain = load_suite("tiny_dflash_cpu")
    assert line == sizing_lines(plain, RunOptions())[0]  # as if it were not there


def test_the_sites_chart_names_it_and_draws_it_grey() -> None:
    series = SeriesView(name="s", suite="s", entry=None, slug="s", metric="server_avg",
                        floor=2.0, baselines=[_figure("own", 3.0, None),
                                              _figure("elsewhere", 7.5, OTHER)],
                        lines=[], latest=None)
    with svg_style():
        figure, _ = history_figure(series, {})
    lines = {line.get_label(): line for line in figure.axes[0].get_lines()}
    other = lines[f"baseline elsewhere {MARK} 7.5"]
    assert other.get_linestyle() == "-." and other.get_color() == "grey"
    assert lines["baseline own 3"].get_color() != "grey"
