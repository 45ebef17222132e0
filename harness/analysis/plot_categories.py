"""The per-category figure of one run (`categories.png` beside `accept_length.png`).

Same conventions as `harness.analysis.plots` (`plot_style`: object API, no pyplot, PNG
written atomically).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.plot_style import (
    FLOOR_COLOUR,
    VERDICT_COLOURS,
    category_floor_checks,
    error_bar,
    figure_in,
    new_figure,
    save_png,
    suite_metric,
)
from harness.results.layout import CATEGORIES_PNG
from harness.results.readers import read_run
from harness.results.record import RunRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def categories_key(dashed: bool) -> str:
    """The figure's key: the dashed line named only where one is drawn."""
    return ("95% CI per category (bootstrap over its prompts)"
            + ("; dashed: category floor" if dashed else ""))


def categories_figure(record: RunRecord) -> Figure:
    """Each category's accept length with its CI (bootstrap over its prompts), its floor
    where the suite sets one, and its accuracy where graded; the run's overall figure as a
    line. Each workload entry is its own record, so each gets its own figure."""
    measurement = record.measurement
    if measurement is None:  # plot_categories draws none then
        raise ValueError(f"run {record.run_id}: no measurement to draw by category")
    figure = new_figure(max(6.0, 1.1 * len(measurement.categories or {}) + 2), 4.4)
    axes = figure.add_subplot()
    results = measurement.categories or {}
    checks = category_floor_checks(record)  # each with its own strictness, as judged
    names = list(results)
    dashed = False  # whether a category floor line is drawn (the title's key says so)
    for x, name in enumerate(names):
        result = results[name]
        if result.accept_length is None:
            continue
        value = result.accept_length
        low, high = result.accept_length_ci or (value, value)
        check = checks.get(name)
        below = check is not None and not check.met(value)
        colour = VERDICT_COLOURS["fail"] if below else "#1f77b4"
        below_ci, above_ci = error_bar(value, low, high)
        axes.errorbar(x, value, yerr=[[below_ci], [above_ci]], fmt="o", ms=8,
                      capsize=6, lw=2, color=colour)
        label = f"{value:.3f}" + (f"\nacc {result.accuracy:.2f}" if result.accuracy is not None
                                  else "")
        axes.annotate(label, (x, value), xytext=(10, 0), textcoords="offset points",
                      va="center", fontsize=8)
        if check is not None:
            axes.hlines(check.floor, x - 0.3, x + 0.3, colors=FLOOR_COLOUR, linestyles="--",
                        lw=1.5)
            dashed = True
    overall = figure_in(record, suite_metric(record))
    if overall is not None:
        axes.axhline(overall[0], color="black", lw=1, alpha=0.6,
                     label=f"all prompts {overall[0]:.3f}")
        axes.legend(loc="lower right", fontsize=8)
    axes.set_xticks(range(len(names)),
                    [f"{name}\n{results[name].n_prompts} prompts" for name in names], fontsize=8)
    axes.set_xlim(-0.6, len(names) - 0.4)
    axes.set_ylabel(f"accept length ({measurement.metric} definition)")
    axes.grid(axis="y", alpha=0.3)
    status = record.verdict.status if record.verdict else "external"
    figure.suptitle(f"{record.suite.name} by category: {status.upper()}", fontsize=11)
    axes.set_title(categories_key(dashed), fontsize=9)
    return figure


def plot_categories(run_dir: Path, out: Path | None = None,
                    record: RunRecord | None = None) -> Path | None:
    """run_dir/categories.png; None when the run recorded no categories."""
    run_dir = Path(run_dir)
    record = record or read_run(run_dir)
    if record.measurement is None or not record.measurement.categories:
        return None
    return save_png(categories_figure(record), out or run_dir / CATEGORIES_PNG)
