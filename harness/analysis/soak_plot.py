"""A soak's figure (`harness soak`): accept length per window of serving time, each in the
suite's definition with its 95% CI, at the window's middle; the drift's line (the run's
accept length moved by the fitted slope) and the tolerated fall. A window without a
request is left out, never drawn as zero."""

from __future__ import annotations

import math
from pathlib import Path

from harness.analysis.plot_style import new_figure, save_png
from harness.results.soaks import SOAK_PNG, SoakRecord


def plot_soak(folder: Path, record: SoakRecord) -> Path:
    figure = new_figure(8.0, 4.2)
    ax = figure.subplots(1, 1)
    scale, unit = (60.0, "min") if record.duration_s >= 600 else (1.0, "s")
    drawn = [w for w in record.windows if w.accept_length is not None]
    xs = [(w.start_s + w.end_s) / 2 / scale for w in drawn]
    ys = [float(w.accept_length or 0.0) for w in drawn]
    low = [y - w.ci[0] if w.ci else 0.0 for y, w in zip(ys, drawn, strict=True)]
    high = [w.ci[1] - y if w.ci else 0.0 for y, w in zip(ys, drawn, strict=True)]
    ax.errorbar(xs, ys, yerr=[low, high], marker="o", color="#1f77b4", capsize=3,
                label=f"accept length per window ({record.metric}, 95% CI)")
    result = record.drift.result if record.drift is not None else None
    title = f"{record.suite}: accept length over serving time ({record.engine})"
    if isinstance(result, dict):
        level, slope = _number(result["accept_length"]), _number(result["slope_per_s"])
        middle = record.duration_s / 2
        ends = [0.0, record.duration_s]
        ax.plot([t / scale for t in ends], [level + slope * (t - middle) for t in ends],
                color="#d62828", linestyle="--",
                label=f"drift {_number(result['drift']):+.2%} over the run "
                      f"({record.drift.status if record.drift else ''})")
        ax.axhline(level * (1 - record.drift.max_drift) if record.drift else level,
                   color="#7a7a7a", linestyle=":", linewidth=1,
                   label=f"tolerated fall {record.drift.max_drift:.0%} of "
                         f"{level:.3g}" if record.drift else "")
    ax.set_xlabel(f"serving time ({unit}; each window {record.window_s:g} s)")
    ax.set_ylabel(f"accept length ({record.metric})")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return save_png(figure, Path(folder) / SOAK_PNG)


def _number(value: object) -> float:
    """A figure of the drift's result (a JSON object read back): a number, or NaN."""
    return float(value) if isinstance(value, int | float) else math.nan
