"""A workload grid's figure (`harness grid`, `harness plot GRID_DIR`): one heatmap per
figure, rows the tiers (each stated as the prefix it is) by prefix caching and
concurrency, columns the content categories; accept length in the definition the suite
judges, and with `[speedup]` the speedup of TPOT and of output throughput over the target
alone, each labelled with its definition. Each cell shows its figure and its CI, and its
verdict (the gate's finding where there is one); a cell without a figure is grey and says
so, never drawn as zero. On a speedup's heatmap the verdict shown is that figure's own
speedup gate against the reference cell (`[grid] speedup_max_drop`) where there is one.
The figures are the grid record's (copied from each cell's run record through the one
door)."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm

from harness.analysis.plot_style import VERDICT_COLOURS, new_figure, save_png, shown
from harness.results.grid import GRID_PNG, GridCellRecord, GridRecord, read_grid

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Row = tuple[str, str | None, int]  # tier, prefix caching, concurrency
MISSING_COLOUR = "#d9d9d9"


def grid_rows(grid: GridRecord) -> list[Row]:
    caching: list[str | None] = list(grid.prefix_caching) or [None]
    return [(tier.name, cache, concurrency) for tier in grid.tiers for cache in caching
            for concurrency in grid.concurrency]


def row_label(grid: GridRecord, row: Row) -> str:
    tier, cache, concurrency = row
    shots = next(t.shots for t in grid.tiers if t.name == tier)
    parts = [f"{shown(tier, 16)} ({shots} shots)"]
    if cache is not None:
        parts.append(f"prefix cache {cache}")
    parts.append(f"c{concurrency}")
    return " / ".join(parts)


SPEEDUP_FIGURES = {"tpot": "speedup_tpot", "throughput": "speedup_throughput"}


def cell_statuses(grid: GridRecord, what: str = "accept") -> dict[str, str]:
    """Each cell's status as the grid judged it: the gate's finding where there is one
    (floors and gates together), else the cell's own run verdict; on a speedup's panel
    (`what` tpot or throughput) that figure's speedup gate where the grid gates it."""
    statuses = {cell.name: str(cell.status) for cell in grid.cells}
    for finding in grid.gate.findings if grid.gate is not None else []:
        statuses[finding.cell] = str(finding.status)
        for gated in finding.speedup:
            if gated.get("figure") == SPEEDUP_FIGURES.get(what):
                statuses[finding.cell] = str(gated.get("status", "error"))
    return statuses


def _figure_of(cell: GridCellRecord, what: str
               ) -> tuple[float | None, tuple[float, float] | None]:
    if what == "accept":
        return cell.accept_length, cell.accept_length_ci
    if what == "tpot":
        return cell.speedup_tpot, cell.speedup_tpot_ci
    return cell.speedup_throughput, cell.speedup_throughput_ci


def _heatmap(axes: Axes, grid: GridRecord, what: str, title: str) -> None:
    rows = grid_rows(grid)
    by_place: dict[tuple[str, str | None, int, str], GridCellRecord] = {
        (c.tier, c.prefix_caching, c.concurrency, c.category): c for c in grid.cells}
    values = np.full((len(rows), len(grid.categories)), np.nan)
    for i, (tier, cache, concurrency) in enumerate(rows):
        for j, category in enumerate(grid.categories):
            cell = by_place.get((tier, cache, concurrency, category))
            value = _figure_of(cell, what)[0] if cell is not None else None
            if value is not None and math.isfinite(value):
                values[i, j] = value
    cmap = "viridis" if what == "accept" else "RdYlGn"
    colormap = colormaps[cmap].with_extremes(bad=MISSING_COLOUR)
    norm = None
    finite = values[np.isfinite(values)]
    if what != "accept" and finite.size:  # 1x (no speedup) in the middle of the scale
        low, high = min(float(finite.min()), 0.99), max(float(finite.max()), 1.01)
        norm = TwoSlopeNorm(vcenter=1.0, vmin=low, vmax=high)
    image = axes.imshow(np.ma.masked_invalid(values), cmap=colormap, norm=norm,
                        aspect="auto")
    axes.figure.colorbar(image, ax=axes, shrink=0.8)
    statuses = cell_statuses(grid, what)
    for i, (tier, cache, concurrency) in enumerate(rows):
        for j, category in enumerate(grid.categories):
            cell = by_place.get((tier, cache, concurrency, category))
            if cell is None:
                continue
            value, ci = _figure_of(cell, what)
            status = statuses.get(cell.name, "error")
            if value is None:
                text = f"no figure\n{status.upper()}"
            else:
                text = f"{value:.2f}" + (f"\n[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
                text += f"\n{status.upper()}"
            axes.text(j, i, text, ha="center", va="center", fontsize=7,
                      color=VERDICT_COLOURS.get(status, "black") if value is None
                      else "black",
                      bbox={"facecolor": "white", "alpha": 0.6, "lw": 0, "pad": 1})
    axes.set_xticks(range(len(grid.categories)),
                    [shown(c, 16) for c in grid.categories], rotation=30, ha="right")
    axes.set_yticks(range(len(rows)), [row_label(grid, row) for row in rows], fontsize=8)
    axes.set_xlabel("content category")
    axes.set_title(title, fontsize=9)


def grid_figure(grid: GridRecord) -> Figure:
    speedups = [what for what in ("tpot", "throughput")
                if any(_figure_of(c, what)[0] is not None for c in grid.cells)]
    panels_n = 1 + len(speedups)
    rows = len(grid_rows(grid))
    figure = new_figure(5.5 + 4.5 * panels_n, 2.6 + 0.45 * rows)
    panels = np.atleast_1d(figure.subplots(1, panels_n))
    _heatmap(panels[0], grid, "accept",
             f"accept length ({grid.metric} definition), 95% CI over prompts\n"
             + textwrap.shorten(grid.definition, 110))
    titles = {"tpot": "speedup of TPOT over the target alone (speedup_tpot definition)",
              "throughput": "speedup of output throughput over the target alone "
                            "(speedup_throughput definition)"}
    for axes, what in zip(panels[1:], speedups, strict=True):
        definition = grid.speedup_definitions.get(SPEEDUP_FIGURES[what], "")
        axes_title = titles[what] + ("\n" + textwrap.shorten(definition, 75)
                                     if definition else "")
        if grid.gate is not None and grid.gate.speedup_max_drop is not None:
            axes_title += (f"\nverdict: speedup gate, within {grid.gate.speedup_max_drop:.0%} "
                           "of the reference cell's")
        _heatmap(axes, grid, what, axes_title)
    panels[0].set_ylabel("prompt length tier (GSM8K train worked examples prefixed)\n"
                         + ("/ prefix caching " if grid.prefix_caching else "")
                         + "/ concurrency")
    gate = ""
    if grid.gate is not None:
        ref = grid.gate.reference
        gate = (f"; gate: each cell within {grid.gate.max_drop:.1%} of its category's "
                f"reference cell (tier {ref.get('tier')}"
                + (f", prefix cache {ref['prefix_caching']}" if ref.get("prefix_caching")
                   else "")
                + (f", c{ref['concurrency']}" if ref.get("concurrency") else "") + ")"
                + (f"; speedups within {grid.gate.speedup_max_drop:.1%} of the reference "
                   "cell's"
                   if grid.gate.speedup_max_drop is not None else ""))
    figure.suptitle(f"{shown(grid.suite)} grid: {grid.status.upper()}, {grid.questions} "
                    f"questions per cell{gate}"
                    + (f"  [{shown(grid.label)}]" if grid.label else ""), fontsize=10)
    return figure


def plot_grid(folder: Path, out: Path | None = None) -> Path:
    """Draw a grid folder's figure (default GRID_DIR/grid.png)."""
    grid = read_grid(folder)
    return save_png(grid_figure(grid), out or Path(folder) / GRID_PNG)
