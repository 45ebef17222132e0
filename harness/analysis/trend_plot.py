"""The history plot with detected steps marked: where, and the levels either side."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.plot_style import save_png
from harness.analysis.plots import history_figure
from harness.analysis.trend import Trend, TrendParams, analyse, suite_history

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

TREND_PNG = "trend.png"
DROP_COLOUR = "#d62828"
RISE_COLOUR = "#2a9d4b"


def trend_figure(
    runs: pd.DataFrame, suite: str, trend: Trend | None = None, floor: float | None = None,
    params: TrendParams | None = None,
) -> Figure:
    """History (runs, CIs, floor) with each segment's level and each step marked; errored
    and partial runs only with `params.include_incomplete`, drawn as hollow red rings."""
    params = params or TrendParams()
    history = suite_history(runs, suite, params.window, params.include_incomplete)
    trend = trend or analyse(history, suite, params)
    # draw only the analysed window, so marks and points share one time axis
    figure = history_figure(history.assign(suite=suite, kind="run"), suite, floor=floor)
    axes = figure.axes[0]
    if len(history) == 0:
        return figure
    times = history["started_at"].dt.tz_localize(None).to_numpy()
    if params.include_incomplete and history["incomplete"].any():
        marked = history["incomplete"].to_numpy(dtype=bool)
        axes.scatter(times[marked], history["accept_length"].to_numpy()[marked], s=140,
                     facecolors="none", edgecolors="#d62728", lw=1.5, zorder=5,
                     label="errored or partial run")
    edges = [0, *(step.index for step in trend.steps), len(history)]
    # with no step there is one segment and nothing to mark
    levels = [trend.steps[0].before, *(step.after for step in trend.steps)] if trend.steps else []
    for (start, end), level in zip(itertools.pairwise(edges), levels, strict=False):
        axes.hlines(level, times[start], times[end - 1], colors="#444444", lw=2, alpha=0.7)
    for step in trend.steps:
        colour = DROP_COLOUR if step.is_drop else RISE_COLOUR
        axes.axvline(times[step.index], color=colour, ls="-.", lw=1.2,
                     label=f"step {step.delta:+.2f} (z {step.z:.1f})")  # fmt: skip
    axes.set_title(f"{suite}: {len(history)} runs, {trend.describe()}", fontsize=11)
    axes.legend(loc="best", fontsize=8, ncols=2)
    return figure


def plot_trend(
    runs: pd.DataFrame,
    suite: str,
    out: Path,
    trend: Trend | None = None,
    floor: float | None = None,
    params: TrendParams | None = None,
) -> Path:
    """Write the trend PNG (e.g. results/plots/<suite>/trend.png) and return its path."""
    return save_png(trend_figure(runs, suite, trend, floor, params), Path(out))
