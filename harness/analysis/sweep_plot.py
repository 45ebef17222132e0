"""A concurrency sweep's figure (`harness sweep`, `harness plot SWEEP_DIR`): accept length
(in the definition the suite judges, with its CI and the gate's tolerated drop), TPOT and
output throughput against concurrency, and with `[speedup]` the speedup of TPOT and of
throughput over the target alone, each point read from its own run record through the one
door. A point without a figure is left out of that panel, never drawn as zero."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.plot_style import (
    FLOOR_COLOUR,
    VERDICT_COLOURS,
    error_bar,
    new_figure,
    save_png,
    shown,
    suite_floor,
)
from harness.files import inside
from harness.results.readers import BadRecord, read_run
from harness.results.sweeps import SWEEP_PNG, SweepRecord, read_sweep

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from harness.results.record import RunRecord

Point = tuple[int, "RunRecord"]


def results_root_of_sweep(folder: Path) -> Path:
    """results/sweeps/<suite>/<sweep>: the results folder three levels up."""
    return Path(folder).resolve().parents[2]


def sweep_points(sweep: SweepRecord, results: Path) -> list[Point]:
    """(concurrency, record) of each point that has a readable record."""
    points = []
    for point in sweep.points:
        if point.run_dir is None:
            continue
        run_dir = Path(results) / point.run_dir
        if not inside(run_dir, results):  # a record names runs of its own results only
            continue
        try:
            points.append((point.concurrency, read_run(run_dir)))
        except BadRecord:  # a damaged point is left out of the figure, never invented
            continue
    return points


def point_statuses(sweep: SweepRecord) -> dict[int, str]:
    """Each point's status as the sweep judged it: the gate's finding where there is one
    (floors and gate together), else the point's own run verdict."""
    statuses = {point.concurrency: str(point.status) for point in sweep.points}
    for finding in sweep.gate.findings if sweep.gate is not None else []:
        statuses[finding.concurrency] = str(finding.status)
    return statuses


def _has_speedup(points: list[Point]) -> bool:
    return any(record.measurement is not None and record.measurement.speedup is not None
               for _, record in points)


def _speedup_point(axes: Axes, concurrency: float, value: float | None,
                   ci: tuple[float, float] | None, marker: str, colour: str) -> None:
    """One speedup figure at one point, with its CI; a missing figure is left out."""
    if value is None:
        return
    low, high = ci or (value, value)
    below, above = error_bar(value, low, high)
    axes.errorbar(concurrency, value, yerr=[[below], [above]], fmt=marker, ms=7, capsize=5,
                  color=colour)


def sweep_figure(sweep: SweepRecord, points: list[Point]) -> Figure:
    with_speedup = _has_speedup(points)
    figure = new_figure(16.0 if with_speedup else 12.0, 4.2)
    panels = figure.subplots(1, 4 if with_speedup else 3)
    accept, tpot, rate = panels[:3]
    speedup = panels[3] if with_speedup else None
    metric = sweep.metric
    reference = None
    judged = point_statuses(sweep)
    for concurrency, record in points:
        measurement = record.measurement
        status = judged.get(concurrency, "error")
        colour = VERDICT_COLOURS.get(status, "black")
        if measurement is None or measurement.partial or measurement.metric != metric:
            continue  # never two definitions on one axis
        value = measurement.accept_length
        low, high = measurement.accept_length_ci or (value, value)
        below, above = error_bar(value, low, high)
        accept.errorbar(concurrency, value, yerr=[[below], [above]], fmt="o", ms=7,
                        capsize=5, color=colour)
        if concurrency == 1:
            reference = value
        latency = measurement.latency
        if latency is not None and latency.tpot_s is not None:
            spread = latency.tpot_s
            low_t, high_t = spread.p50_ci or (spread.p50, spread.p50)
            below, above = error_bar(spread.p50 * 1000, low_t * 1000, high_t * 1000)
            tpot.errorbar(concurrency, spread.p50 * 1000, yerr=[[below], [above]], fmt="o",
                          ms=7, capsize=5, color="#1f77b4")
            tpot.plot(concurrency, spread.p90 * 1000, "v", color="#1f77b4", alpha=0.5)
        if latency is not None and latency.output_tok_s is not None:
            value_r = latency.output_tok_s
            low_r, high_r = latency.output_tok_s_ci or (value_r, value_r)
            below, above = error_bar(value_r, low_r, high_r)
            rate.errorbar(concurrency, value_r, yerr=[[below], [above]], fmt="o", ms=7,
                          capsize=5, color="#ff7f0e")
        found = measurement.speedup
        if speedup is not None and found is not None:
            _speedup_point(speedup, concurrency, found.tpot, found.tpot_ci, "o", "#1f77b4")
            # beside TPOT's marker, not on it (a log axis: a constant factor is a shift)
            _speedup_point(speedup, concurrency * 1.08, found.throughput,
                           found.throughput_ci, "s", "#ff7f0e")
    floor = suite_floor(points[0][1]) if points else None
    if floor is not None:
        accept.axhline(floor, color=FLOOR_COLOUR, ls="--", lw=1.2, label=f"floor {floor:g}")
    if sweep.gate is not None and reference is not None:
        allowed = reference * (1 - sweep.gate.max_drop)
        accept.axhline(allowed, color="grey", ls=":", lw=1.2,
                       label=f"concurrency 1 - {sweep.gate.max_drop:.1%} (gate)")
    if floor is not None or (sweep.gate is not None and reference is not None):
        accept.legend(fontsize=8, loc="lower left")
    accept.set_ylabel(f"accept length ({metric} definition)")
    tpot.set_ylabel("TPOT ms, p50 (CI) and p90 (v)\n(e2e - TTFT) / (output tokens - 1)")
    rate.set_ylabel("output tokens/s\noutput tokens / measured wall time")
    if speedup is not None:
        speedup.axhline(1.0, color="grey", ls=":", lw=1.2, label="no speedup (1x)")
        speedup.plot([], [], "o", color="#1f77b4", label="TPOT: alone / speculative")
        speedup.plot([], [], "s", color="#ff7f0e", label="throughput: speculative / alone")
        speedup.legend(fontsize=8, loc="best")
        speedup.set_ylabel("speedup over the target alone (95% CI)\n"
                           "definitions: measurement.speedup.definitions")
    for axes in panels:
        axes.set_xscale("log", base=2)
        axes.set_xticks(sweep.concurrencies, [str(c) for c in sweep.concurrencies])
        axes.set_xlabel("concurrency (requests in flight)")
        axes.grid(alpha=0.3)
    accept.set_title("95% CI: bootstrap over prompts", fontsize=9)
    figure.suptitle(f"{shown(sweep.suite)} sweep: {sweep.status.upper()}"
                    + (f"  [{shown(sweep.label)}]" if sweep.label else ""), fontsize=11)
    return figure


def plot_sweep(folder: Path, results: Path | None = None, out: Path | None = None) -> Path:
    """Draw a sweep folder's figure (default SWEEP_DIR/sweep.png); `results`: the results
    folder its points' run folders are relative to (default: the one that holds it)."""
    sweep = read_sweep(folder)
    root = Path(results) if results is not None else results_root_of_sweep(folder)
    figure = sweep_figure(sweep, sweep_points(sweep, root))
    return save_png(figure, out or Path(folder) / SWEEP_PNG)
