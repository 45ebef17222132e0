"""Which comparison judges a history: by question, or by each night's CI over questions.

Nights that asked the same questions the same way (`question_pairing.pairing` between
every two successive nights: one data hash, kind, protocol, template, sampling, and the
same prompt tokens question by question) are compared by question: each night's figure
on the questions every night asked, with the night-to-night noise measured from the runs
themselves (`harness.metrics.night_noise`, the paired gate's by-question standard
error). Otherwise the history is judged by each night's bootstrap CI over questions, as
before, and `Comparison.notes` name why: the night where the prompts change, a night
without request rows, too few shared questions. A night that lacks some questions is
named and the nights are compared on the questions all asked; a history of one build's
repeats only is named too (its steps are the engine's or the host's, not a build's).

Each night is read through the door (`sides.add_record`: `read_run`, `read_requests`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.analysis.question_pairing import pairing
from harness.analysis.sides import Side, add_record
from harness.metrics.night_noise import NightNoise, night_noise
from harness.results.readers import BadRecord, read_run
from harness.results.rows import METRICS

if TYPE_CHECKING:
    import pandas as pd

BY_QUESTION = "by question"
BY_CI = "by each night's CI over questions"


@dataclass(frozen=True)
class Comparison:
    """How a history was judged and why; `noise` is set when by question."""

    judged_by: str  # BY_QUESTION or BY_CI
    detail: str  # one line: what was compared on what
    notes: tuple[str, ...] = ()  # what kept it from (or narrowed) the by-question comparison
    noise: NightNoise | None = None

    @property
    def by_question(self) -> bool:
        return self.noise is not None


def night_name(row: pd.Series) -> str:
    """A night as a reader finds it: its start time and run id."""
    started = row.get("started_at")
    when = started.strftime("%Y-%m-%d %H:%M") if hasattr(started, "strftime") else "?"
    return f"{when} ({row.get('run_id') or Path(str(row.get('path'))).name})"


def _by_ci(why: str, notes: list[str] | tuple[str, ...] = ()) -> Comparison:
    return Comparison(BY_CI, why, tuple(notes))


def _sides(history: pd.DataFrame) -> tuple[list[Side], str | None]:
    sides = []
    for _, row in history.iterrows():
        path = row.get("path")
        if not isinstance(path, str) or not path:
            return [], f"night {night_name(row)} has no run folder"
        side = Side(name=f"night {night_name(row)}")
        try:
            add_record(side, Path(path), read_run(Path(path)))
        except BadRecord as error:
            return [], f"night {night_name(row)}: {error.reason}"
        sides.append(side)
    return sides, None


def _metric(history: pd.DataFrame, sides: list[Side]) -> str | None:
    """The definition every night can give: the latest record's, else server_avg, else
    per_request."""
    common = set(METRICS)
    for side in sides:
        common &= side.available()
    declared = [str(m) for m in history["metric"].dropna()] if "metric" in history else []
    for metric in declared[-1:] + list(METRICS):
        if metric in common:
            return metric
    return None


def compare_nights(history: pd.DataFrame) -> Comparison:
    """The comparison for a history (oldest first: `trend.suite_history`'s rows)."""
    if len(history) < 2:
        return _by_ci("fewer than two nights")
    sides, missing = _sides(history)
    if missing:
        return _by_ci(f"{BY_CI}: {missing}", [missing])
    names = [night_name(row) for _, row in history.iterrows()]
    notes: list[str] = []
    for i in range(len(sides) - 1):
        found = pairing(sides[i], sides[i + 1])
        if not found.paired:
            why = "; ".join(found.warnings[:-1]) or found.describe()
            notes.append(f"the prompts change between night {names[i]} and night "
                         f"{names[i + 1]}: {why}")
    if notes:
        return _by_ci(f"{BY_CI}: the nights did not ask the same questions the same way",
                      notes)
    every = set.intersection(*(set(side.questions) for side in sides))
    union = set.union(*(set(side.questions) for side in sides))
    shared = sorted(every, key=str)
    for name, side in zip(names, sides, strict=True):
        lacking = sorted(union - set(side.questions), key=str)
        if lacking:
            shown = ", ".join(str(q) for q in lacking[:5]) + (" ..." if len(lacking) > 5
                                                              else "")
            notes.append(f"night {name} lacks {len(lacking)} of the {len(union)} questions "
                         f"({shown}): every night is compared on the {len(shared)} all asked")
    if len(shared) < 2:
        return _by_ci(f"{BY_CI}: fewer than two questions every night asked", notes)
    metric = _metric(history, sides)
    if metric is None:
        return _by_ci(f"{BY_CI}: no accept-length definition every night gives", notes)
    for side in sides:
        side.use_metric(metric)
    pairs = [side.restricted(shared) for side in sides]
    noise = night_noise([tokens for tokens, _ in pairs], [steps for _, steps in pairs])
    builds = sorted({str(spec) for spec in history.get("build.spec", []) if spec == spec})
    if len(builds) <= 1:
        notes.append(f"one build only ({builds[0] if builds else 'unnamed'}): {len(sides)} "
                     "repeats; a step here is the engine's or the host's, not a build's")
    data = sides[-1].protocols[-1].get("data_sha256")
    detail = (f"{BY_QUESTION}: {len(sides)} nights on the same {len(shared)} questions"
              + (f" (data {str(data)[:12]})" if data else "")
              + f", {metric}; night-to-night noise from the runs: engine sd "
              f"{noise.engine_se:.4f} per night")
    return Comparison(BY_QUESTION, detail, tuple(notes), noise)
