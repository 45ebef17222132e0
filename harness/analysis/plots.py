"""Headless plots of runs, baselines, floors and history (PNG files).

matplotlib is imported inside the functions and used through its object API
(`Figure` + the Agg canvas), never `pyplot`: no global backend switch, so the same
functions work in the CLI, in threads and inline in a notebook (`*_figure` return a
Figure that Jupyter displays). `plot_*` write PNGs and return their paths.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.analysis.paired_report import interval_text
from harness.analysis.plot_categories import plot_categories
from harness.analysis.plot_latency import plot_latency
from harness.analysis.plot_style import (
    BASELINE_COLOURS,
    FLOOR_COLOUR,
    VERDICT_COLOURS,
    document_metric,
    error_bar,
    error_bars,
    figure_in,
    new_figure,
    position_floor_checks,
    save_png,
    shown,
    suite_floor,
    suite_metric,
)
from harness.metrics.definitions import request_value
from harness.metrics.stats import per_position_acceptance
from harness.results.baselines import BaselineFigure, load_baselines
from harness.results.layout import HISTOGRAM_PNG, RUN_PNG
from harness.results.readers import BadRecord, read_requests, read_run
from harness.results.store import PLOTS_DIR, load_runs
from harness.secrets import redact_text

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from harness.results.record import RequestRow, RunRecord


def results_root_of(run_dir: Path) -> Path:
    """results/runs/<suite>/<run> -> results."""
    return run_dir.resolve().parent.parent.parent


def _baseline_metric(figure: BaselineFigure, default: str) -> str:
    return getattr(figure, "metric", None) or default


def baselines_for(record: RunRecord, results_root: Path | None) -> list[BaselineFigure]:
    """Baseline records under results/baselines/, then any the suite document names that
    have no record (so a suite's declared figures always show); in the suite's metric."""
    return suite_baselines(record.suite.name, record.suite.document, record.schema_version,
                           results_root)


def suite_baselines(suite: str, document: dict[str, object], schema_version: int,
                    results_root: Path | None) -> list[BaselineFigure]:
    metric = document_metric(document, schema_version)
    figures = [figure for figure in (load_baselines(results_root, suite)
                                     if results_root else [])
               if _baseline_metric(figure, metric) == metric]
    known = {figure.label for figure in figures}
    baselines = document.get("baselines")
    for entry in baselines if isinstance(baselines, list) else []:
        if not isinstance(entry, dict) or entry.get("label") in known:
            continue
        if (entry.get("metric") or metric) != metric:
            continue
        if isinstance(entry.get("accept_length"), int | float):
            figures.append(
                BaselineFigure(
                    label=str(entry["label"]),
                    accept_length=float(entry["accept_length"]),
                    ci=None,
                    accuracy=entry.get("accuracy"),
                    source=entry.get("source"),
                    engine=None,
                    path="(suite document)",
                    metric=metric,
                    external=bool(entry.get("external")),
                    protocol=str(entry["protocol"]) if entry.get("protocol") else None,
                )
            )
    return sorted(figures, key=lambda figure: figure.accept_length)


# ---------------------------------------------------------------- (a) one run


def run_figure(
    record: RunRecord,
    baselines: Sequence[BaselineFigure] = (),
    floor: float | None = None,
) -> Figure:
    """The run's accept length with its CI beside each baseline, over the floor."""
    figure = new_figure(7.5, 4.2)
    axes = figure.add_subplot()
    names, values, lows, highs, colours = [], [], [], [], []
    # a baseline of another protocol last, grey, and named so: compared, never gated on
    ordered = sorted(baselines, key=lambda b: b.protocol is not None)
    for i, baseline in enumerate(ordered):
        kind = "baseline" if baseline.protocol is None else f"other protocol\n{baseline.protocol}"
        names.append(f"{kind}\n{shown(baseline.label)}")
        values.append(baseline.accept_length)
        low, high = baseline.ci or (baseline.accept_length, baseline.accept_length)
        below, above = error_bar(baseline.accept_length, low, high)
        lows.append(below)
        highs.append(above)
        colours.append(BASELINE_COLOURS[i % len(BASELINE_COLOURS)] if baseline.protocol is None
                       else "lightgrey")
    measurement = record.measurement
    status = record.verdict.status if record.verdict else "external"
    metric = suite_metric(record)
    finding = record.paired
    paired = finding.result if finding is not None else None
    if finding is not None:  # the reference build this run was paired with (same questions)
        names.append(f"paired ref\n{shown(finding.against.run_id)}")
        values.append(finding.result.a)
        lows.append(0.0)
        highs.append(0.0)
        colours.append("grey")
    figure_shown = figure_in(record, metric)
    if figure_shown is not None:
        names.append(f"this run\n{shown(record.label or record.run_id)}")
        value, ci = figure_shown
        low, high = ci or (value, value)
        values.append(value)
        below, above = error_bar(value, low, high)
        lows.append(below)
        highs.append(above)
        colours.append(VERDICT_COLOURS.get(status, "black"))
    positions = list(range(len(names)))
    for x, y, below, above, colour in zip(positions, values, lows, highs, colours, strict=True):
        axes.errorbar(x, y, yerr=[[below], [above]], fmt="o", ms=9, capsize=8, lw=2, color=colour)
        axes.annotate(f"{y:.3f}", (x, y), xytext=(12, 0), textcoords="offset points",
                      va="center", fontsize=9)  # fmt: skip
    if floor is not None:
        axes.axhline(floor, color=FLOOR_COLOUR, ls="--", lw=1.5, label=f"floor {floor:g}")
        axes.legend(loc="lower right", fontsize=9)
    axes.set_xticks(positions, names, fontsize=9)
    axes.set_xlim(-0.6, len(names) - 0.4)
    span = [v - b for v, b in zip(values, lows, strict=True)] + (
        [floor] if floor is not None else []
    )
    tops = [v + a for v, a in zip(values, highs, strict=True)] + ([floor] if floor else [])
    if span:
        margin = max(0.1, 0.15 * (max(tops) - min(span)))
        axes.set_ylim(min(span) - margin, max(tops) + margin)
    axes.set_ylabel(f"accept length ({metric} definition)")
    axes.grid(axis="y", alpha=0.3)
    detail = ""
    if measurement is not None:
        level = round(measurement.ci_level * 100)
        detail = f"{measurement.n_requests} requests, {level}% CI (bootstrap over prompts)"
    if finding is not None and paired is not None:
        detail += (f"\npaired gate {finding.status.upper()}: B - A "
                   f"{paired.difference:+.3f} ({interval_text(paired, 3)}), "
                   f"tolerated -{paired.tolerated_drop:.3f} ({metric})")
    build = shown(redact_text(record.build.spec or record.build.version or record.build.engine))
    figure.suptitle(f"{shown(record.suite.name)}: {status.upper()}  [{build}]", fontsize=11)
    axes.set_title(detail, fontsize=9)
    return figure


def plot_run(
    run_dir: Path,
    baselines: Sequence[BaselineFigure] | None = None,
    out: Path | None = None,
    *,
    results_root: Path | None = None,
) -> Path:
    """Draw run_dir/run.json against its suite's baselines and floor; returns the PNG path.

    `baselines` None: read them from `results_root` (default: the results folder that
    holds `run_dir`), plus those the suite document names.
    """
    run_dir = Path(run_dir)
    record = read_run(run_dir)
    if baselines is None:
        baselines = baselines_for(record, Path(results_root or results_root_of(run_dir)))
    figure = run_figure(record, baselines, suite_floor(record))
    if out is None and record.measurement is not None and record.measurement.categories:
        plot_categories(run_dir, record=record)  # beside it: the per-category figure
    if out is None and record.measurement is not None and record.measurement.latency:
        plot_latency(run_dir, record=record)  # and the latency distribution
    return save_png(figure, out or run_dir / RUN_PNG)


# ---------------------------------------------------------------- (b) history


def history_figure(
    runs: pd.DataFrame,
    suite: str,
    baselines: Sequence[BaselineFigure] = (),
    floor: float | None = None,
    metric: str | None = None,
) -> Figure:
    """Accept length of every run of a suite over time, CI band, floor and baselines.

    Only runs judged in `metric` are drawn (their CI is in that definition too): a
    history never mixes the two definitions of accept length.
    """
    figure = new_figure(10, 4.5)
    axes = figure.add_subplot()
    runs = runs[(runs["suite"] == suite) & (runs["kind"] == "run")].dropna(
        subset=["accept_length"]
    )
    if metric is not None and "metric" in runs.columns:
        runs = runs[runs["metric"].fillna("per_request") == metric]
    runs = runs.sort_values("started_at")
    times = runs["started_at"].dt.tz_localize(None).to_numpy()
    if len(runs):
        low = runs["ci_low"].fillna(runs["accept_length"]).to_numpy()
        high = runs["ci_high"].fillna(runs["accept_length"]).to_numpy()
        values = runs["accept_length"].to_numpy()
        if len(runs) <= 200:  # few runs: one CI bar each reads better than a band
            axes.errorbar(times, values, yerr=error_bars(values, low, high), fmt="none",
                          ecolor="#1f77b4", alpha=0.5, capsize=3, label="CI")  # fmt: skip
            axes.plot(times, values, color="#1f77b4", lw=1)
        elif len(runs) <= PIXEL_BINS:
            axes.fill_between(times, low, high, color="#1f77b4", alpha=0.2, lw=0, label="CI")
            axes.plot(times, values, color="#1f77b4", lw=1)
        else:
            _draw_binned(axes, times, values, low, high)
        many = len(runs) > 2000
        for status, colour in VERDICT_COLOURS.items():
            chosen = (runs["verdict"] == status).to_numpy()
            # Thousands of passing runs: the line already shows each of them, and 100k
            # markers take seconds to rasterise; failures are always marked.
            if chosen.any() and not (many and status == "pass"):
                axes.plot(times[chosen], values[chosen], ls="none", marker="o",
                          ms=2 if many else 4, color=colour, zorder=3, label=status)  # fmt: skip
    for i, baseline in enumerate(baselines):
        other = baseline.protocol is not None  # another protocol: grey, named, not gated
        colour = "grey" if other else BASELINE_COLOURS[i % len(BASELINE_COLOURS)]
        label = f"{baseline.shown_label} {baseline.accept_length:g}"
        axes.axhline(baseline.accept_length, color=colour, lw=1.2, ls="-." if other else ":",
                     label=label)
    if floor is not None:
        axes.axhline(floor, color=FLOOR_COLOUR, ls="--", lw=1.5, label=f"floor {floor:g}")
    axes.set_ylabel(f"accept length ({metric} definition)" if metric else "accept length")
    axes.set_title(f"{suite}: {len(runs)} runs", fontsize=11)
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", fontsize=8, ncols=2)  # "best" scans every point: slow
    figure.autofmt_xdate()
    return figure


PIXEL_BINS = 1500  # about the plot's width in pixels: finer detail is not visible


def _draw_binned(axes: Any, times: Any, values: Any, low: Any, high: Any) -> None:
    """Many runs: per time bin the CI envelope, the range of values and the median.

    At pixel resolution this is what drawing every run would show, in a fraction of the
    time (100k runs: ~0.1 s instead of ~2 s); failing runs are still marked one by one.
    """
    stamps = times.astype("datetime64[ns]").astype(np.int64)
    edges = np.linspace(stamps[0], stamps[-1], PIXEL_BINS + 1)
    bins = np.clip(np.searchsorted(edges, stamps, side="right") - 1, 0, PIXEL_BINS - 1)
    used = np.unique(bins)
    starts = np.searchsorted(bins, used)  # runs are sorted by time, so bins are contiguous
    centre = times[starts]
    axes.fill_between(centre, np.minimum.reduceat(low, starts), np.maximum.reduceat(high, starts),
                      color="#1f77b4", alpha=0.2, lw=0, label="CI (envelope per bin)")  # fmt: skip
    axes.fill_between(centre, np.minimum.reduceat(values, starts),
                      np.maximum.reduceat(values, starts), color="#1f77b4", alpha=0.45, lw=0,
                      label="runs (range per bin)")  # fmt: skip
    medians = [np.median(chunk) for chunk in np.split(values, starts[1:])]
    axes.plot(centre, medians, color="#1f77b4", lw=0.8)


def plot_history(
    results_root: Path,
    suite: str,
    out: Path | None = None,
    runs: pd.DataFrame | None = None,
) -> Path:
    """results/plots/<suite>/history.png (or `out`); `runs` saves a reload if given."""
    results_root = Path(results_root)
    if runs is None:
        runs = load_runs(results_root, suite=suite)
    suite_runs = runs[(runs["suite"] == suite) & (runs["kind"] == "run")]
    floors = suite_runs["floor"].dropna()
    floor = float(floors.iloc[-1]) if len(floors) else None
    metric = None
    latest = None
    if len(suite_runs):  # the latest run's suite document also names baselines
        with contextlib.suppress(BadRecord):  # read again: it may have changed
            latest = read_run(Path(suite_runs["path"].iloc[-1]))
    if latest is not None:
        metric = document_metric(latest.suite.document, latest.schema_version)
        baselines = suite_baselines(suite, latest.suite.document, latest.schema_version,
                                    results_root)
    else:
        baselines = load_baselines(results_root, suite)
    figure = history_figure(runs, suite, baselines, floor, metric)
    return save_png(figure, out or results_root / PLOTS_DIR / suite / "history.png")


# ---------------------------------------------------------------- (c) per prompt / position


def histogram_figure(
    record: RunRecord, requests: Sequence[RequestRow], floor: float | None = None
) -> Figure:
    """Left: per-request accept lengths. Right: P(draft position k accepted)."""
    figure = new_figure(10, 4)
    left, right = figure.subplots(1, 2)
    metric = suite_metric(record)
    per_request = [value for r in requests if r.verify_steps
                   if (value := request_value(r, metric)) is not None]
    if per_request:
        left.hist(per_request, bins=min(40, max(5, len(per_request) // 5)), color="#1f77b4",
                  alpha=0.8)  # fmt: skip
    run_figure_shown = figure_in(record, metric)
    if run_figure_shown is not None:
        value = run_figure_shown[0]
        left.axvline(value, color="black", lw=1.5, label=f"run {value:.3f}")
    if floor is not None:
        left.axvline(floor, color=FLOOR_COLOUR, ls="--", label=f"floor {floor:g}")
    left.set_xlabel(f"accept length per request ({metric} definition)")
    left.set_ylabel("requests")
    left.legend(fontsize=8)
    positions = record.measurement.per_position_acceptance if record.measurement else None
    if not positions:
        histogram = record.measurement.accept_histogram if record.measurement else None
        if not histogram:
            summed: list[int] = []
            for row in requests:
                for j, count in enumerate(row.accept_histogram or []):
                    summed.extend([0] * (j + 1 - len(summed)))
                    summed[j] += count
            histogram = summed
        positions = per_position_acceptance(histogram) if histogram else []
    if positions:
        ks = list(range(1, len(positions) + 1))
        cis = record.measurement.per_position_ci if record.measurement else None
        errors = None
        if cis and len(cis) == len(positions):
            bars = [error_bar(p, low, high) for p, (low, high) in zip(positions, cis, strict=True)]
            errors = [[below for below, _ in bars], [above for _, above in bars]]
        checks = position_floor_checks(record)
        colours = [VERDICT_COLOURS["fail"] if k in checks and not checks[k].met(rate)
                   else "#2a9d4b" for k, rate in zip(ks, positions, strict=True)]
        right.bar(ks, positions, color=colours, yerr=errors, capsize=3,
                  error_kw={"elinewidth": 1, "ecolor": "#333333"})
        for k, check in checks.items():
            right.hlines(check.floor, k - 0.4, k + 0.4, colors=FLOOR_COLOUR, linestyles="--")
        right.set_ylim(0, 1)
        right.set_xticks(ks)
        if errors is not None:
            right.set_title("95% CI: bootstrap over prompts", fontsize=8)
    else:
        right.text(0.5, 0.5, "no per-position data", ha="center", va="center")
    right.set_xlabel("draft position k")
    right.set_ylabel("P(position k accepted)")
    figure.suptitle(f"{record.suite.name} run {record.run_id}", fontsize=11)
    return figure


def plot_histogram(run_dir: Path, out: Path | None = None) -> Path:
    run_dir = Path(run_dir)
    record = read_run(run_dir)
    figure = histogram_figure(record, read_requests(run_dir, record), suite_floor(record))
    return save_png(figure, out or run_dir / HISTOGRAM_PNG)
