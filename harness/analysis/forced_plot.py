"""A forced-acceptance ladder's figure (`harness forced`): speedup over the target alone
(TPOT and throughput, each in its definition, harness.metrics.speedup, with its 95% CI)
against the achieved accept length: the system's curve through the forced points, the
real run marked on it, the line of no speedup and the break-even accept length. With a
reference build's ladder (`--against`) its curve and real run are drawn beside, in grey.
A point without a figure is left out, never drawn as zero. The caption under the panels
says what each figure is (the record's `definitions`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from harness.analysis.plot_style import VERDICT_COLOURS, new_figure, save_png
from harness.metrics.speedup import SPEEDUP_THROUGHPUT, SPEEDUP_TPOT
from harness.results.forced import FORCED_PNG, ForcedRecord

PANELS = ((SPEEDUP_TPOT, "speedup_tpot", "speedup_tpot_ci", "TPOT speedup"),
          (SPEEDUP_THROUGHPUT, "speedup_throughput", "speedup_throughput_ci",
           "throughput speedup"))
CAPTIONED = ("achieved", SPEEDUP_TPOT, SPEEDUP_THROUGHPUT, "break_even")
CURVE, AGAINST = "#1f77b4", "#9a9a9a"


def caption(record: ForcedRecord) -> str:
    """The definitions of every figure drawn, one wrapped line each."""
    lines = [f"{name}: {record.definitions[name]}" for name in CAPTIONED
             if name in record.definitions]
    return "\n".join(textwrap.fill(line, 190) for line in lines)


def _curve(ax: Axes, record: ForcedRecord, attr: str, ci_attr: str, colour: str,
           who: str) -> None:
    forced = sorted((p.achieved, getattr(p, attr), getattr(p, ci_attr))
                    for p in record.points if p.forced is not None
                    and p.achieved is not None and getattr(p, attr) is not None)
    if forced:
        xs = [x for x, _, _ in forced]
        ys = [y for _, y, _ in forced]
        low = [y - ci[0] if ci else 0.0 for _, y, ci in forced]
        high = [ci[1] - y if ci else 0.0 for _, y, ci in forced]
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", color=colour, capsize=3,
                    label=f"{who}forced (the system's curve)")
    for point in record.points:
        value = getattr(point, attr)
        if point.forced is None and point.achieved is not None and value is not None:
            star = VERDICT_COLOURS["pass"] if not who else AGAINST
            ax.plot([point.achieved], [value], marker="*", markersize=16, linestyle="",
                    color=star, label=f"{who}real run ({point.achieved:.3g})")


def draw_forced(record: ForcedRecord, against: ForcedRecord | None = None) -> Figure:
    figure = new_figure(10.0, 5.2)
    axes = figure.subplots(1, 2)
    breaks = {found.figure: found for found in record.break_even}
    for ax, (figure_name, attr, ci_attr, title) in zip(axes, PANELS, strict=True):
        if against is not None:
            _curve(ax, against, attr, ci_attr, AGAINST, "reference build: ")
        _curve(ax, record, attr, ci_attr, CURVE, "")
        ax.axhline(1.0, color="#7a7a7a", linestyle="--", linewidth=1, label="no speedup")
        found = breaks.get(figure_name)
        if found is not None and found.accept_length is not None:
            ax.axvline(found.accept_length, color="#d62828", linestyle=":",
                       label=f"break-even {found.accept_length:.3g}")
        elif found is not None:
            ax.set_title(f"{title}\nbreak-even: none in range", fontsize=9)
        if found is None or found.accept_length is not None:
            ax.set_title(title, fontsize=10)
        ax.set_xlabel(f"achieved accept length ({record.metric})")
        ax.set_ylabel(f"{figure_name} (x over the target alone)")
        ax.legend(fontsize=7)
    split = record.split
    verdict = "" if split is None else (
        f"; against {split.against_spec}: {split.status.upper()}"
        + (f", {' and '.join(split.blamed)} at fault" if split.blamed else ""))
    figure.suptitle(f"{record.suite}: speed with the acceptance forced ({record.engine}, "
                    f"block {record.block_size}){verdict}", fontsize=11)
    figure.supxlabel(caption(record), fontsize=6, ha="left", x=0.01)
    return figure


def plot_forced(folder: Path, record: ForcedRecord, against: ForcedRecord | None = None,
                out: Path | None = None) -> Path:
    """The ladder's figure, written to `out` (default: forced.png in its folder)."""
    return save_png(draw_forced(record, against), out or Path(folder) / FORCED_PNG)
