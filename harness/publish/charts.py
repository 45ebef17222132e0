"""The site's charts: SVG from matplotlib, inlined in the pages.

SVG rather than a JavaScript plotting library: the pages then hold no script at all (a
crafted record has nothing to run in, and the pages' Content-Security-Policy forbids
script outright), nothing is vendored or fetched, text stays text (`svg.fonttype` none:
small files, readable by a browser test), and each run's point is a plain link to its
run page. Same conventions as `harness.analysis.plots` (object API, never pyplot) and its
colours (`plot_style`); mathtext is off, so a `$` in a label is a dollar sign.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

import matplotlib
import numpy as np

from harness.analysis.plot_style import (
    BASELINE_COLOURS,
    FLOOR_COLOUR,
    category_floor_checks,
    error_bar,
    error_bars,
    new_figure,
    position_floor_checks,
    shown,
)
from harness.results.baselines import shown_label

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from harness.publish.model import LineView, SeriesView

LINE_COLOURS = {"main": "#1f77b4", "release": "#ff7f0e"}
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
DROP_COLOUR, RISE_COLOUR = "#d62828", "#2a9d4b"
_PATH = re.compile(r' d="[^"]*"')
_DECIMALS = re.compile(r"(\.\d)\d+")
BAND_ABOVE = 200  # more runs than this in a line: a CI band instead of one bar each
BINS = 360  # and binned to about 2 pt of the 720 pt wide axes


def line_colour(name: str, index: int) -> str:
    return LINE_COLOURS.get(name, OTHER_COLOURS[index % len(OTHER_COLOURS)])


@contextmanager
def svg_style() -> Iterator[None]:
    """Create and save figures inside this: text as text, reproducible ids, no mathtext."""
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "spec-harness",
                                "text.parse_math": False, "font.size": 9}):  # fmt: skip
        yield


def to_svg(figure: Figure, titles: dict[str, list[str]] | None = None) -> str:
    """The figure as an inline <svg> element (no XML prolog, no date). `titles`: for a
    collection drawn with `set_gid(gid)`, each point's `<title>` in order (what a browser
    shows under the pointer, with no script)."""
    buffer = io.StringIO()
    with warnings.catch_warnings():  # a glyph DejaVu lacks: the browser draws it (text)
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):].replace(' target="_blank"', "")  # links open in place
    for gid, texts in (titles or {}).items():
        text = _with_titles(text, gid, texts)
    # path coordinates to 0.1 pt (matplotlib writes 6 decimals): a 1,000-night history's
    # paths take half the bytes, and no one sees a tenth of a point
    return _PATH.sub(lambda match: _DECIMALS.sub(r"\1", match.group(0)), text)


_POINT = re.compile(r"<(use|path) ([^>]*?)/>")


def _with_titles(text: str, gid: str, titles: list[str]) -> str:
    """Give the i-th point of the collection `gid` the i-th title: matplotlib writes one
    <use> (or <path>) per point, in order, inside <g id="gid">, after its <defs>."""
    at = text.find(f'<g id="{gid}">')
    if at < 0:
        return text
    defs_end = text.find("</defs>", at)
    next_group = text.find("<g id=", at + 1)
    start = defs_end + len("</defs>") if 0 <= defs_end < next_group else at
    out, position = [text[:start]], start
    for title in titles:
        found = _POINT.search(text, position)
        if found is None:
            break
        out += [text[position:found.start()],
                f"<{found[1]} {found[2]}><title>{escape(title)}</title></{found[1]}>"]
        position = found.end()
    return "".join(out) + text[position:]


def point_title(line: str, row: dict[str, Any], metric: str) -> str:
    """What the pointer shows over a night: when, the figure and its CI, build, verdict."""
    when = row["started_at"].strftime("%Y-%m-%d %H:%M UTC")
    low, high = row.get("ci_low"), row.get("ci_high")
    ci = (f" [95% CI {low:.4f}, {high:.4f}]" if isinstance(low, float) and low == low
          and isinstance(high, float) and high == high else "")
    build = row.get("build.spec") or row.get("build.engine") or "-"
    verdict = str(row.get("verdict") or "no verdict").upper()
    return (f"{line} {when}: accept length {row['accept_length']:.4f}{ci} ({metric}); "
            f"build {build}; {verdict}; run {row.get('run_id')}")


def drawn(series: SeriesView, line: LineView) -> pd.DataFrame:
    """The runs of a line the history chart draws: a figure in the series' definition."""
    runs = line.runs.dropna(subset=["accept_length"])
    return runs[runs["metric"].fillna("per_request") == series.metric]


def history_svg(series: SeriesView, pages: dict[str, str], prefix: str = "../") -> str:
    """Every line of the series over time: figure, CI, floor, baselines, steps; each run
    with a page is a link to it (`prefix` + its page path); each night's value, CI, build
    and verdict under the pointer (an SVG <title>)."""
    figure, titles = history_figure(series, pages, prefix)
    return to_svg(figure, titles)


def history_figure(series: SeriesView, pages: dict[str, str], prefix: str = "../"
                   ) -> tuple[Figure, dict[str, list[str]]]:
    """The history chart and its points' titles (`to_svg`); the legend sits right of the
    axes, where it covers no point."""
    figure = new_figure(11.5, 4.4)
    axes = figure.add_subplot()
    titles: dict[str, list[str]] = {}
    for index, line in enumerate(series.lines):
        colour = line_colour(line.name, index)
        runs = drawn(series, line)
        if runs.empty:
            continue
        times = runs["started_at"].dt.tz_localize(None).to_numpy()
        values = runs["accept_length"].to_numpy(dtype=float)
        low = runs["ci_low"].fillna(runs["accept_length"]).to_numpy(dtype=float)
        high = runs["ci_high"].fillna(runs["accept_length"]).to_numpy(dtype=float)
        bad = runs["verdict"].isin(["fail", "error"]).to_numpy()
        label = f"{shown(line.name)} ({len(runs)} runs, 95% CI)"
        if len(runs) <= BAND_ABOVE:
            axes.errorbar(times, values, yerr=error_bars(values, low, high), fmt="none",
                          ecolor=colour, alpha=0.45, capsize=2, lw=1)  # fmt: skip
            axes.plot(times, values, color=colour, lw=1, label=label)
            if bad.any():
                axes.scatter(times[bad], values[bad], marker="x", s=30, color=DROP_COLOUR,
                             zorder=5, label=f"{shown(line.name)}: fail/error")  # fmt: skip
        else:
            _binned(axes, times, values, low, high, bad, colour, label, line.name)
        linked = runs["path"].isin(list(pages)).to_numpy()
        rows = runs.to_dict("records")
        if len(runs) <= BAND_ABOVE and not linked.all():  # small markers, each its title
            plain = axes.scatter(times[~linked], values[~linked], s=6, color=colour,
                                 zorder=4)  # fmt: skip
            plain.set_gid(f"nights-{index}")
            titles[f"nights-{index}"] = [point_title(line.name, row, series.metric)
                                         for row, link in zip(rows, linked, strict=True)
                                         if not link]
        if linked.any():  # each its own link to its run page, above a failed run's x (whose
            # arms still show around it), so that the click reaches the link
            dots = axes.scatter(times[linked], values[linked], s=18, color=colour, zorder=6)
            dots.set_urls([prefix + pages[path] for path in runs["path"][linked]])
            dots.set_gid(f"pages-{index}")
            titles[f"pages-{index}"] = [point_title(line.name, row, series.metric)
                                        for row, link in zip(rows, linked, strict=True)
                                        if link]
        _mark_steps(axes, line)
    for i, baseline in enumerate(series.baselines):
        other = baseline.protocol is not None  # another protocol: grey, named, not gated
        axes.axhline(baseline.accept_length, lw=1.1, ls="-." if other else ":",
                     color="grey" if other else BASELINE_COLOURS[i % len(BASELINE_COLOURS)],
                     # the label cut to fit, the other protocol's mark never
                     label=f"baseline {shown_label(shown(baseline.label), baseline.protocol)} "
                     f"{baseline.accept_length:g}")  # fmt: skip
    if series.floor is not None:
        axes.axhline(series.floor, color=FLOOR_COLOUR, ls="--", lw=1.4,
                     label=f"floor {series.floor:g}")  # fmt: skip
    axes.set_ylabel(f"accept length ({series.metric} definition)")
    axes.set_title(f"{shown(series.name)}: accept length by night", fontsize=10)
    axes.grid(alpha=0.3)
    # outside the axes (constrained layout makes room): a legend inside covers nights
    figure.legend(loc="outside right upper", fontsize=7)
    figure.autofmt_xdate()
    return figure, titles


def _binned(axes: Any, times: Any, values: Any, low: Any, high: Any, bad: Any, colour: str,
            label: str, name: str) -> None:
    """Many runs: per time bin (about 2 pt of the axes) the CI envelope and the median,
    failing bins as a red overlay (an isolated one marked): what drawing every run would
    show at this size, in a fraction of the bytes."""
    stamps = times.astype("datetime64[ns]").astype(np.int64)
    edges = np.linspace(stamps[0], stamps[-1], BINS + 1)
    bins = np.clip(np.searchsorted(edges, stamps, side="right") - 1, 0, BINS - 1)
    used, starts = np.unique(bins, return_index=True)  # runs are sorted: bins contiguous
    centre = times[starts]
    axes.fill_between(centre, np.minimum.reduceat(low, starts),
                      np.maximum.reduceat(high, starts), color=colour, alpha=0.18, lw=0)
    medians = np.array([np.median(chunk) for chunk in np.split(values, starts[1:])])
    axes.plot(centre, medians, color=colour, lw=1, label=label + f", {len(used)} bins")
    failing = np.logical_or.reduceat(bad, starts)
    if failing.any():
        axes.plot(centre, np.where(failing, medians, np.nan), color=DROP_COLOUR, lw=2.2,
                  zorder=5, label=f"{shown(name)}: fail/error")  # fmt: skip
        alone = failing & ~np.r_[False, failing[:-1]] & ~np.r_[failing[1:], False]
        if alone.any():
            axes.plot(centre[alone], medians[alone], ls="none", marker="x", ms=5,
                      color=DROP_COLOUR, zorder=5)  # fmt: skip


def _mark_steps(axes: Any, line: LineView) -> None:
    """Each step of the line's trend: where, and the levels either side (its window)."""
    if not line.steps:
        return
    times = line.history["started_at"].dt.tz_localize(None).to_numpy()
    edges = [0, *(view.step.index for view in line.steps), len(times)]
    levels = [line.steps[0].step.before, *(view.step.after for view in line.steps)]
    for start, end, level in zip(edges, edges[1:], levels, strict=False):
        axes.hlines(level, times[start], times[end - 1], colors="#444444", lw=2, alpha=0.6)
    for view in line.steps:
        colour = DROP_COLOUR if view.is_drop else RISE_COLOUR
        axes.axvline(times[view.step.index], color=colour, ls="-.", lw=1.1,
                     label=f"{shown(line.name)}: step {view.step.delta:+.2f} "
                     f"(z {view.step.z:.1f})")  # fmt: skip


def _panel(rows: list[tuple[str, str, list[tuple[str, float, Any, float | None]]]],
           ylabel: str, title: str, unit_range: bool = False) -> str | None:
    """Points with CIs per x name, one colour per line, floors as short dashes.
    rows: (line, colour, [(x name, value, (low, high) | None, floor | None)])."""
    names = list(dict.fromkeys(name for _, _, items in rows for name, *_ in items))
    if not names:
        return None
    figure = new_figure(max(5.5, 0.9 * len(names) + 2.5), 3.6)
    axes = figure.add_subplot()
    width = 0.6 / max(1, len(rows))
    floored: set[str] = set()
    for i, (line, colour, items) in enumerate(rows):
        offset = (i - (len(rows) - 1) / 2) * width
        for name, value, ci, floor in items:
            x = names.index(name) + offset
            below, above = error_bar(value, *(ci or (value, value)))
            axes.errorbar(x, value, yerr=[[below], [above]], fmt="o", ms=5, capsize=3,
                          color=colour, label=shown(line) if name == items[0][0] else None)
            if floor is not None and name not in floored:
                floored.add(name)
                at = names.index(name)
                axes.hlines(floor, at - 0.4, at + 0.4, colors=FLOOR_COLOUR, linestyles="--")
    axes.set_xticks(range(len(names)), [shown(name, 18) for name in names], fontsize=8)
    axes.set_xlim(-0.6, len(names) - 0.4)
    if unit_range:
        axes.set_ylim(0, 1.02)
    axes.set_ylabel(ylabel)
    axes.set_title(title, fontsize=9)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(loc="best", fontsize=7)
    return to_svg(figure)


PanelRows = list[tuple[str, str, list[tuple[str, float, Any, float | None]]]]


def category_rows(series: SeriesView) -> PanelRows:
    """Each line's latest run by category: (line, colour, [(category, figure, CI, floor)])."""
    rows = []
    for index, line in enumerate(series.lines):
        record = series.latest_record(line)
        if record is None or record.measurement is None or not record.measurement.categories:
            continue
        floors = category_floor_checks(record)
        items = [(name, result.accept_length, result.accept_length_ci,
                  floors[name].floor if name in floors else None)
                 for name, result in record.measurement.categories.items()
                 if result.accept_length is not None]  # fmt: skip
        rows.append((line.name, line_colour(line.name, index), items))
    return rows


def categories_svg(series: SeriesView) -> str | None:
    """Each line's latest run by category (CI over the category's prompts, its floor)."""
    return _panel(category_rows(series), f"accept length ({series.metric} definition)",
                  "latest run of each line by category: 95% CI, dashed: category floor")


def position_rows(series: SeriesView) -> PanelRows:
    """Each line's latest run: (line, colour, [(position k, P(accepted), CI, floor)])."""
    rows = []
    for index, line in enumerate(series.lines):
        record = series.latest_record(line)
        measurement = record.measurement if record is not None else None
        rates = measurement.per_position_acceptance if measurement is not None else None
        if not rates or measurement is None or record is None:
            continue
        cis = measurement.per_position_ci or []
        floors = position_floor_checks(record)
        items = [(str(k), rate, cis[k - 1] if k <= len(cis) else None,
                  floors[k].floor if k in floors else None)
                 for k, rate in enumerate(rates, start=1)]  # fmt: skip
        rows.append((line.name, line_colour(line.name, index), items))
    return rows


def positions_svg(series: SeriesView) -> str | None:
    """Each line's latest run: P(draft position k accepted) with CIs, position floors."""
    return _panel(position_rows(series), "P(draft position k accepted)",
                  "latest run of each line by draft position k: 95% CI, dashed: floor",
                  unit_range=True)
