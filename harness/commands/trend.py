"""`harness trend [SUITE...]`: step detection over each suite's history, the summary table."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console
from rich.table import Table

from harness.analysis.staleness import parse_age
from harness.analysis.trend import TrendParams, analyse_all
from harness.analysis.trend_plot import TREND_PNG, plot_trend
from harness.analysis.trend_report import SuiteSummary, markdown_table, summarize
from harness.errors import BadInput
from harness.results.store import PLOTS_DIR, load_runs
from harness.run.judge import report_exit

if TYPE_CHECKING:
    from harness.analysis.trend_report import SuiteSummary
    from harness.results.record import VerdictStatus

if TYPE_CHECKING:
    import pandas as pd


def run(args: argparse.Namespace) -> int:
    """`harness trend` (its arguments: commands/parsers/trend.py)."""
    root = args.results
    if not root.is_dir():
        raise BadInput(f"{root}: no results folder")
    if args.window < 2 or not 0 < args.alpha < 1:
        raise BadInput("--window must be >= 2 and --alpha in (0, 1)")
    params = TrendParams(alpha=args.alpha, min_shift=args.min_shift, window=args.window,
                         include_incomplete=args.include_incomplete,
                         by_question=not args.by_ci)
    max_age = parse_age(args.max_age) if args.max_age else None
    runs = load_runs(root)
    if args.label is not None:  # baselines stay: they carry their own labels
        runs = runs[(runs["kind"] == "baseline") | (runs["label"] == args.label)]
    trends = analyse_all(runs, _with_entries(args.suites, runs) or _recorded(runs), params)
    summaries = summarize(runs, trends, params.window, _since(args.since),
                          params.include_incomplete, max_age)
    if args.plot:
        for item in summaries:
            plot_trend(runs, item.suite, root / PLOTS_DIR / item.suite / TREND_PNG,
                       item.trend, item.floor, params)  # fmt: skip
    if args.json:
        print(json.dumps([_as_json(item) for item in summaries], indent=2, default=str))
    elif args.markdown:
        print("## Speculative decoding: nightly accept length\n")
        print(markdown_table(summaries))
    else:
        _print_table(summaries)
    return report_exit(_status(item) for item in summaries)




def _status(item: SuiteSummary) -> VerdictStatus:
    """A suite's latest verdict as the report's exit policy counts it: an open drop in its
    history fails it; a suite named (e.g. planned tonight) without any run, whose latest
    night is older than --max-age, or with a verdict no reader knows, is as bad as one that
    errored."""
    if item.overdue is not None:
        return "error"
    if item.trend.alarm:
        return "fail"
    if item.verdict in ("pass", "fail", "error", "skipped"):
        return item.verdict  # type: ignore[return-value]
    return "error"


def _with_entries(names: list[str], runs: pd.DataFrame) -> list[str]:
    """Each named suite and the series of its workload entries (`<suite>.<entry>`, one
    record each), so a nightly job's suite names cover every series it wrote."""
    if not names:
        return []
    recorded = sorted(set(runs["suite"]) | set(_recorded(runs)))
    expanded = []
    for name in names:
        expanded.append(name)
        expanded += [series for series in recorded if series.startswith(name + ".")]
    return expanded


def _recorded(runs: pd.DataFrame) -> list[str]:
    """Every series with a run: a record, or a run folder without a readable one (a
    harness killed before it wrote run.json), which is an errored night to report."""
    recorded = set(runs.loc[runs["kind"] == "run", "suite"])
    recorded |= {run.suite for run in runs.attrs.get("unrecorded", [])}
    return sorted(recorded)


def _since(text: str | None) -> pd.Timestamp | None:
    if text is None:
        return None
    try:
        moment = pd.Timestamp(text)
    except ValueError:
        raise BadInput(f"--since {text!r}: not an ISO 8601 time (e.g. 2026-11-30T02:17:00Z)"
                       ) from None
    return moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")


def _as_json(item: object) -> dict[str, object]:
    assert isinstance(item, SuiteSummary)
    return {
        "suite": item.suite,
        "runs": item.trend.n_runs,
        "accept_length": item.accept_length,
        "ci": item.ci,
        "floor": item.floor,
        "baselines": dict(item.baselines),
        "verdict": item.verdict,
        "stale": item.stale,
        "latest_at": item.latest_at,
        "latest_night": item.latest_night,
        "overdue": item.overdue,
        "unrecorded": item.unrecorded,
        "incomplete_runs": item.incomplete_runs,
        "change": item.change,
        "change_ci": item.change_ci,
        "excess_sd": item.trend.excess_sd,
        "alarm": item.trend.alarm,
        "trend": item.trend.describe(),
        "judged_by": item.trend.judged_by,
        "comparison": item.trend.comparison,
        "notes": list(item.trend.notes),
        "steps": [
            {
                "index": s.index,
                "at": s.at,
                "before": s.before,
                "after": s.after,
                "delta": s.delta,
                "z": s.z,
            }
            for s in item.trend.steps
        ],
    }


def _print_table(summaries: list[SuiteSummary]) -> None:
    table = Table(title="accept length trend")
    for column in ("suite", "runs", "latest night", "last [CI]", "floor", "verdict", "change",
                   "trend"):
        table.add_column(column)
    for item in summaries:
        last = "–" if item.accept_length is None else f"{item.accept_length:.3f}"
        if item.ci:
            last += f" [{item.ci[0]:.3f}, {item.ci[1]:.3f}]"
        change = "–" if item.change is None else f"{item.change:+.3f}"
        style = "red" if item.failing else None
        runs = str(item.trend.n_runs) + (f" ({item.incomplete_runs} partial/error)"
                                         if item.incomplete_runs else "")
        table.add_row(item.suite, runs, item.latest_night, last,
                      "–" if item.floor is None else f"{item.floor:g}",
                      item.verdict or "–", change, item.trend.describe(), style=style)  # fmt: skip
    console = Console()
    console.print(table)
    for item in summaries:  # below the table: a path is not cut to a column's width
        lines = [f"latest night {item.latest_night}"]
        lines += [f"judged {item.trend.comparison}"] if item.trend.comparison else []
        lines += [f"note: {note}" for note in item.trend.notes]
        if item.unrecorded:
            lines.append(f"error: {item.unrecorded}")
        if item.overdue:
            lines.append(f"error: stale: {item.overdue}")
        for line in lines:
            console.print(f"{item.suite}: {line}", soft_wrap=True, markup=False,
                          highlight=False)
