"""A forced-acceptance ladder's figure (`harness forced`): speedup over the target alone
(TPOT and throughput, each in its definition, harness.metrics.speedup, with its 95% CI)
against the achieved accept length: the system's curve through the forced points, the
real run marked on it, the line of no speedup and the break-even accept length. A point
without a figure is left out, never drawn as zero."""

from __future__ import annotations

from pathlib import Path

from harness.analysis.plot_style import VERDICT_COLOURS, new_figure, save_png
from harness.metrics.speedup import SPEEDUP_THROUGHPUT, SPEEDUP_TPOT
from harness.results.forced import FORCED_PNG, ForcedRecord

PANELS = ((SPEEDUP_TPOT, "speedup_tpot", "speedup_tpot_ci", "TPOT speedup"),
          (SPEEDUP_THROUGHPUT, "speedup_throughput", "speedup_throughput_ci",
           "throughput speedup"))


def plot_forced(folder: Path, record: ForcedRecord) -> Path:
    figure = new_figure(10.0, 4.2)
    axes = figure.subplots(1, 2)
    breaks = {found.figure: found for found in record.break_even}
    for ax, (figure_name, attr, ci_attr, title) in zip(axes, PANELS, strict=True):
        forced = sorted((p.achieved, getattr(p, attr), getattr(p, ci_attr))
                        for p in record.points if p.forced is not None
                        and p.achieved is not None and getattr(p, attr) is not None)
        if forced:
            xs = [x for x, _, _ in forced]
            ys = [y for _, y, _ in forced]
            low = [y - ci[0] if ci else 0.0 for _, y, ci in forced]
            high = [ci[1] - y if ci else 0.0 for _, y, ci in forced]
            ax.errorbar(xs, ys, yerr=[low, high], marker="o", color="#1f77b4", capsize=3,
                        label="forced (the system's curve)")
        for point in record.points:
            value = getattr(point, attr)
            if point.forced is None and point.achieved is not None and value is not None:
                ax.plot([point.achieved], [value], marker="*", markersize=16, linestyle="",
                        color=VERDICT_COLOURS["pass"], label=f"real run ({point.achieved:.3g})")
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
        ax.legend(fontsize=8)
    figure.suptitle(f"{record.suite}: speed with the acceptance forced ({record.engine}, "
                    f"block {record.block_size})", fontsize=11)
    return save_png(figure, Path(folder) / FORCED_PNG)
