"""The nightly summary: one row per suite (latest figure, floor, baselines, verdict, change
since the night before, trend), as a markdown table for a CI step summary.

The step detection itself is `harness.analysis.trend`; this module only reports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.analysis.staleness import as_utc, latest_night_text, overdue_reason
from harness.analysis.trend import Trend, history_errors, suite_history
from harness.results.baselines import shown_label
from harness.results.readers import BadRecord, read_run
from harness.results.store import latest_unrecorded

if TYPE_CHECKING:
    import pandas as pd

    from harness.results.store import UnrecordedRun



@dataclass(frozen=True)
class SuiteSummary:
    suite: str
    trend: Trend
    accept_length: float | None
    ci: tuple[float, float] | None
    floor: float | None
    baselines: list[tuple[str, float]]
    verdict: str | None
    change: float | None  # since the run before (last night)
    change_ci: float | None  # 95% half-width of that change
    stale: bool = False  # its latest run is older than `since`: tonight it has none
    incomplete_runs: int = 0  # errored or partial runs in the history (when brought in)
    # a run folder newer than the latest record, without a readable record (a harness
    # killed before it wrote run.json, a damaged run.json): the night errored
    unrecorded: str | None = None
    latest_at: datetime | None = None  # its latest night (a record or a folder without one)
    latest_night: str = "no night"  # that night's time and age, as printed
    overdue: str | None = None  # why its latest night is older than --max-age allows

    @property
    def failing(self) -> bool:
        return (self.verdict in ("fail", "error", None) or self.trend.alarm
                or self.overdue is not None)


def _baselines(runs: pd.DataFrame, suite: str, latest: Any) -> list[tuple[str, float]]:
    found = {
        str(row.label): float(row.accept_length)
        for row in runs[(runs["suite"] == suite) & (runs["kind"] == "baseline")].itertuples()
        if row.label and row.accept_length == row.accept_length  # NaN != NaN
    }
    # the suite document names baselines too; read them from the latest record when present
    document = _suite_document(latest)
    baselines = document.get("baselines")
    for entry in baselines if isinstance(baselines, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("accept_length"), int | float):
            other = entry.get("protocol")
            label = shown_label(str(entry.get("label")), other if isinstance(other, str) else None)
            found.setdefault(label, float(entry["accept_length"]))
    return sorted(found.items(), key=lambda item: item[1])


def _suite_document(latest: Any) -> dict[str, object]:
    path = getattr(latest, "path", None) if latest is not None else None
    if not isinstance(path, str):
        return {}
    try:  # read again: the record may have changed since the loader read it
        return read_run(path).suite.document
    except BadRecord:
        return {}


def summarize(runs: pd.DataFrame, trends: dict[str, Trend], window: int = 60,
              since: pd.Timestamp | None = None, include_incomplete: bool = False,
              max_age: timedelta | None = None, now: datetime | None = None,
              ) -> list[SuiteSummary]:
    """One summary per suite. `since` (a UTC timestamp): only a run started at or after it
    is tonight's; a suite whose latest run is older has no verdict tonight (an error).
    The figure and "change since last night" come from complete runs only, unless
    `include_incomplete` (then `incomplete_runs` counts the errored or partial ones used);
    the verdict is always the latest run's, so a crashed night is still an error, and so
    is a run folder newer than the latest record without a readable one
    (`runs.attrs["unrecorded"]`, from `store.load_runs`). Each summary names its latest
    night with its age at `now`; under `max_age` an older one is `overdue` (an error)."""
    now = now or datetime.now(UTC)
    unrecorded = runs.attrs.get("unrecorded", [])
    summaries = []
    for suite, trend in trends.items():
        history = suite_history(runs, suite, window, include_incomplete)
        every = runs[(runs["suite"] == suite) & (runs["kind"].fillna("run") == "run")]
        latest = every.sort_values("started_at").iloc[-1] if len(every) else None
        accept = ci = change = change_ci = None
        if len(history):
            last = history.iloc[-1]
            accept = float(last["accept_length"])
            if last["ci_low"] == last["ci_low"] and last["ci_high"] == last["ci_high"]:
                ci = (float(last["ci_low"]), float(last["ci_high"]))
        if len(history) >= 2:
            se = history_errors(history)[-2:]
            change = float(history["accept_length"].iloc[-1] - history["accept_length"].iloc[-2])
            if np.all(np.isfinite(se)):
                change_ci = 1.96 * math.sqrt(float(np.sum(se**2)))
        floor = None
        if latest is not None and "floor" in latest and latest["floor"] == latest["floor"]:
            floor = float(latest["floor"])
        stale = latest is not None and since is not None and latest["started_at"] < since
        verdict = None if latest is None or stale else latest["verdict"]
        missing = latest_unrecorded(unrecorded, suite,
                                    None if latest is None else latest["started_at"])
        latest_at = _latest_night(latest, missing)
        if missing is not None and (since is None or missing.started_at >= since):
            verdict = "error"  # a night without a record is no pass
        else:
            missing = None
        summaries.append(SuiteSummary(
            suite=suite, trend=trend, accept_length=accept, ci=ci, floor=floor,
            baselines=_baselines(runs, suite, latest), verdict=verdict,
            change=change, change_ci=change_ci, stale=stale,
            incomplete_runs=int(history["incomplete"].sum()) if include_incomplete else 0,
            unrecorded=missing.describe() if missing else None,
            latest_at=latest_at, latest_night=latest_night_text(latest_at, now),
            overdue=overdue_reason(latest_at, now, max_age),
        ))  # fmt: skip
    return summaries


def _latest_night(latest: Any, missing: UnrecordedRun | None) -> datetime | None:
    """The series' newest night: its latest record's start, or a newer folder's."""
    moments = [as_utc(missing.started_at)] if missing is not None else []
    if latest is not None and latest["started_at"] == latest["started_at"]:
        started = latest["started_at"]
        moments.append(as_utc(started.to_pydatetime() if hasattr(started, "to_pydatetime")
                              else started))
    return max(moments, default=None)


def _cell(value: float | None, fmt: str = "{:.3f}") -> str:
    return "–" if value is None else fmt.format(value)


def markdown_table(summaries: Sequence[SuiteSummary]) -> str:
    """The step summary: one row per suite, failing suites marked."""
    lines = [
        "| suite | latest night | accept length [95% CI] | floor | baselines | verdict | "
        "change since last night | trend |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        accept = _cell(s.accept_length)
        if s.ci is not None:
            accept += f" [{s.ci[0]:.3f}, {s.ci[1]:.3f}]"
        baselines = ", ".join(f"{label} {value:g}" for label, value in s.baselines) or "–"
        change = _cell(s.change, "{:+.3f}")
        if s.change is not None and s.change_ci is not None:
            change += f" (±{s.change_ci:.3f})"
        if s.incomplete_runs:
            change += f" (history incl. {s.incomplete_runs} partial/error run(s))"
        verdict = s.verdict or ("no run tonight" if s.stale else "no run")
        if s.unrecorded:
            verdict += f" ({s.unrecorded})"
        if s.overdue:
            verdict += f" (**stale**: {s.overdue})"
        mark = "❌ " if s.failing else ""
        trend = ("⚠️ " if s.trend.alarm else "") + s.trend.describe()
        if s.trend.notes:
            trend += " (" + "; ".join(s.trend.notes) + ")"
        lines.append(
            f"| {mark}{s.suite} | {s.latest_night} | {accept} | {_cell(s.floor, '{:g}')} | "
            f"{baselines} | {verdict} | {change} | {trend} |"
        )
    return "\n".join(lines) + "\n"
