"""The latency distribution of one run (`latency.png` beside `accept_length.png`).

Each panel is one figure of `harness.metrics.latency` (its one home: the per-request values
come from `request_figures`, the definitions from the record's own `definitions`): the
empirical CDF of the per-request values (per gap for ITL), with the record's p50, p90 and
p99 and their CIs marked, so that the picture and the stored figures cannot disagree. A
run recorded without streamed timings draws no panel for what it lacks, never a zero.
Same conventions as `harness.analysis.plots` (`plot_style`: object API, no pyplot, PNG
written atomically).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from harness.analysis.plot_style import new_figure, save_png, shown
from harness.metrics.latency import E2E, ITL, TPOT, TTFT, request_figures
from harness.results.layout import LATENCY_PNG
from harness.results.readers import read_requests, read_run
from harness.results.record import LatencySummary, RequestRow, RunRecord, Spread

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PERCENTILE_STYLES = {"p50": ("#1f77b4", "-"), "p90": ("#ff7f0e", "--"), "p99": ("#d62828", ":")}
# (definition key, the summary's field, a short title)
PANELS = ((TTFT, "ttft_s", "TTFT per request"), (TPOT, "tpot_s", "TPOT per request"),
          (ITL, "itl_s", "ITL: every gap between chunks"), (E2E, "e2e_s", "end-to-end per request"))


def latency_values(rows: Sequence[RequestRow]) -> dict[str, list[float]]:
    """The values each panel's distribution is drawn from, as `harness.metrics.latency`
    defines them (seconds)."""
    values: dict[str, list[float]] = {TTFT: [], TPOT: [], ITL: [], E2E: []}
    for row in rows:
        figures = request_figures(row)
        values[E2E].append(figures.e2e)
        if figures.ttft is not None:
            values[TTFT].append(figures.ttft)
        if figures.tpot is not None:
            values[TPOT].append(figures.tpot)
        values[ITL].extend(figures.gaps)
    return values


def _scale(spread: Spread) -> tuple[float, str]:
    """Milliseconds where the run's p99 is under 2 s, else seconds."""
    return (1000.0, "ms") if spread.p99 < 2.0 else (1.0, "s")


def _panel(axes: Axes, values: list[float], spread: Spread, title: str) -> None:
    factor, unit = _scale(spread)
    ordered = np.sort(np.asarray(values, dtype=float)) * factor
    share = np.arange(1, len(ordered) + 1) / len(ordered)
    axes.step(ordered, share, where="post", color="black", lw=1.2,
              label=f"{len(ordered)} values")
    for name, (colour, style) in PERCENTILE_STYLES.items():
        point = getattr(spread, name) * factor
        ci = getattr(spread, f"{name}_ci")
        label = f"{name} {point:.4g} {unit}"
        if ci is not None:
            axes.axvspan(ci[0] * factor, ci[1] * factor, color=colour, alpha=0.12, lw=0)
            label += f" [{ci[0] * factor:.4g}, {ci[1] * factor:.4g}]"
        axes.axvline(point, color=colour, linestyle=style, lw=1.5, label=label)
    axes.set_xlabel(unit)
    axes.set_ylabel("share of values at or below")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    axes.set_title(title, fontsize=9)
    axes.legend(loc="lower right", fontsize=7)


def latency_figure(record: RunRecord, rows: Sequence[RequestRow]) -> Figure | None:
    """The run's latency panels; None where the record holds no latency figure."""
    summary: LatencySummary | None = (record.measurement.latency
                                      if record.measurement is not None else None)
    if summary is None:
        return None
    values = latency_values(rows)
    drawn = [(key, field, title) for key, field, title in PANELS
             if getattr(summary, field) is not None and values[key]]
    if not drawn:
        return None
    figure = new_figure(5.0 * min(len(drawn), 2), 3.6 * ((len(drawn) + 1) // 2))
    for index, (key, field, title) in enumerate(drawn):
        axes = figure.add_subplot((len(drawn) + 1) // 2, min(len(drawn), 2), index + 1)
        _panel(axes, values[key], getattr(summary, field), title)
    rate = ""
    if summary.output_tok_s is not None:
        rate = f"; {summary.output_tok_s:.4g} output tokens/s"
    at = f" at concurrency {summary.concurrency}" if summary.concurrency else ""
    figure.suptitle(f"{shown(record.suite.name)}: latency{at}{rate}\n"
                    f"shaded: {summary.ci_level:.0%} CI over prompts; definitions: run.json "
                    "measurement.latency.definitions", fontsize=9)
    return figure


def plot_latency(run_dir: Path, out: Path | None = None,
                 record: RunRecord | None = None) -> Path | None:
    """run_dir/latency.png; None when the run recorded no latency (nothing streamed)."""
    run_dir = Path(run_dir)
    record = record or read_run(run_dir)
    figure = latency_figure(record, read_requests(run_dir, record))
    if figure is None:
        return None
    return save_png(figure, out or run_dir / LATENCY_PNG)
