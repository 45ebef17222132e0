"""The floors as data: one typed check per floor a suite sets (`floor_checks`).

Each check carries its stable key (the name the sequential rule's decisions and the record's
`measurement.sequential` use), its floor, its strictness, the definition its figure is in,
how that figure is read from a Measurement (`reading`), the sample the sequential rule tests
at an early look (`sample`) and which statistic tests it (`statistic`). `met` is the one
comparison of a figure with its floor. The judge (`run/judge`), the sequential rule
(`run/sequential`), `harness power`, the plots and the site all iterate this list, so a
floor the judge checks is a floor the rule settles, and one place says "below".

Order: accept length, accuracy, then each category's accept length and accuracy (in the
suite's order), then the draft positions k = 1.., then speedup of TPOT and of throughput
(the order of the verdict's reasons). A speedup floor is judged on the figure of the
target-alone run measured after the speculative one ([speedup], harness.metrics.speedup):
the sequential rule cannot settle it at an early look (`NoEarlySample`), so it stays open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from harness.metrics import breakdown, speedup
from harness.metrics.definitions import RequestLike
from harness.suite.entries import Floors

if TYPE_CHECKING:
    from harness.results.record import Measurement

FloorKind = Literal["accept_length", "accuracy", "category_accept_length", "category_accuracy",
                    "position", "speedup_tpot", "speedup_throughput"]
# "ratio": the skew-corrected t of tokens_i - floor * steps_i over questions;
# "score": (p - floor) / sqrt(floor (1 - floor) / n) over graded requests
# (harness.run.sequential computes both at the rule's thresholds).
Statistic = Literal["ratio", "score"]

ACCEPT_LENGTH = "accept length"  # the key of the overall accept-length check
ACCURACY = "accuracy"  # the key of the overall accuracy check; also its definition's name
POSITION_ACCEPTANCE = "position_acceptance"  # the definition of a position floor's figure

SPEEDUP_TPOT = speedup.SPEEDUP_TPOT  # key and definition of the TPOT speedup floor's figure
SPEEDUP_THROUGHPUT = speedup.SPEEDUP_THROUGHPUT  # ... and of the throughput speedup floor's

# What the definitions other than the accept-length metrics measure (those are
# harness.suite.entries.METRIC_DEFINITIONS).
DEFINITIONS: dict[str, str] = {
    ACCURACY: "the share of graded requests answered correctly",
    POSITION_ACCEPTANCE: "P(draft position k accepted): verify steps accepting at least k "
                         "drafts over all verify steps (spec_correct_drafts_histogram)",
    **{key: text for key, text in speedup.DEFINITIONS.items()
       if key in (SPEEDUP_TPOT, SPEEDUP_THROUGHPUT)},
}


def meets(value: float, floor: float, strict: bool) -> bool:
    """A figure against its floor: `>` when the floor is strict, else `>=`."""
    return value > floor if strict else value >= floor


def relation(strict: bool) -> str:
    return ">" if strict else ">="


@dataclass(frozen=True)
class Figure:
    """A check's figure in a measurement and how a reason shows it (its CI, its prompts)."""

    value: float
    shown: str


@dataclass(frozen=True)
class Missing:
    """The measurement lacks the figure a check needs: an error, never a pass."""

    reason: str


@dataclass(frozen=True)
class RatioSample:
    """Per question: the numerator (tokens, or steps reaching a position) and the steps."""

    tokens: list[float]  # whole tokens, or a per-request mean's summands (per_request_mean)
    steps: list[int]


@dataclass(frozen=True)
class GradedSample:
    """Per graded request: whether it was answered correctly."""

    correct: list[bool]


@dataclass(frozen=True)
class NoEarlySample:
    """A floor whose figure exists only after the run (speedup: the target alone is
    measured after it): open at every early look."""


@dataclass(frozen=True)
class FloorCheck:
    key: str  # stable: the rule's decisions and the record key floors by it
    kind: FloorKind
    floor: float
    strict: bool
    definition: str  # the figure's definition: "server_avg", "per_request", ACCURACY, ...
    category: str | None = None
    position: int | None = None  # k, for a draft-position floor

    @property
    def statistic(self) -> Statistic:
        return "score" if self.kind in ("accuracy", "category_accuracy") else "ratio"

    @property
    def overall(self) -> bool:
        """A floor on the whole run ("the floor"), not on a category or position ("its")."""
        return self.kind in ("accept_length", "accuracy", "speedup_tpot", "speedup_throughput")

    @property
    def relation(self) -> str:
        return relation(self.strict)

    def met(self, value: float) -> bool:
        return meets(value, self.floor, self.strict)

    def reading(self, measurement: Measurement) -> Figure | Missing:
        """This check's figure in `measurement` (judged in the floors' own definition)."""
        if self.kind == "accept_length":
            ci = measurement.accept_length_ci
            return Figure(measurement.accept_length,
                          f"accept length ({self.definition}) {measurement.accept_length:.4f}"
                          + _ci(ci))
        if self.kind == "accuracy":
            if measurement.accuracy is None:
                return Missing("accuracy floor set but no accuracy measured")
            return Figure(measurement.accuracy, f"accuracy {measurement.accuracy:.3f}")
        if self.kind == "position":
            return self._position(measurement)
        if self.kind in ("speedup_tpot", "speedup_throughput"):
            return self._speedup(measurement)
        return self._category(measurement)

    def _speedup(self, measurement: Measurement) -> Figure | Missing:
        found = measurement.speedup
        which = "tpot" if self.kind == "speedup_tpot" else "throughput"
        value = getattr(found, which, None) if found is not None else None
        if found is None or value is None:
            why = found.note if found is not None and found.note else \
                "no target-alone run was measured"
            return Missing(f"{self.key} floor set but no speedup measured: {why}")
        return Figure(value, f"{self.key} ({self.definition}) {value:.4f}"
                             + _ci(getattr(found, f"{which}_ci")) + f", {found.n_prompts} "
                             "prompts paired")

    def _category(self, measurement: Measurement) -> Figure | Missing:
        results = measurement.categories or {}
        name = str(self.category)
        result = results.get(name)
        if result is None:
            return Missing(f"category {name!r} has a floor but no measured request "
                           f"(measured: {', '.join(results) or 'no categories'})")
        if self.kind == "category_accuracy":
            if result.accuracy is None:
                return Missing(f"category {name!r} has an accuracy floor but is not graded")
            return Figure(result.accuracy, f"category {name} accuracy {result.accuracy:.3f}")
        if result.accept_length is None:
            return Missing(f"category {name!r}: no accept length (no verify step)")
        return Figure(result.accept_length,
                      f"category {name} accept length {result.accept_length:.4f}"
                      + _ci(result.accept_length_ci) + f", {result.n_prompts} prompts")

    def _position(self, measurement: Measurement) -> Figure | Missing:
        if not sum(measurement.accept_histogram or []):
            return Missing("position floors set but no request carries an accepted-draft "
                           "histogram (spec_correct_drafts_histogram)")
        k = int(self.position or 0)
        rates = measurement.per_position_acceptance or []
        cis = measurement.per_position_ci or []
        if k > len(rates):
            # no verify step accepted k drafts: SGLang sizes each histogram by the largest
            # accepted count, so a draft that never reaches position k reports fewer
            # positions; it is judged at rate 0 (a broken draft fails)
            return Figure(0.0, f"P(position {k} accepted) 0.000 "
                               f"(no verify step reached position {k})")
        rate = rates[k - 1]
        return Figure(rate, f"P(position {k} accepted) {rate:.3f}"
                            + _ci(cis[k - 1] if k <= len(cis) else None))

    def sample(self, rows: Sequence[RequestLike]) -> RatioSample | GradedSample | NoEarlySample:
        """What the sequential rule tests at an early look, from the request rows so far."""
        if self.kind in ("speedup_tpot", "speedup_throughput"):
            return NoEarlySample()
        if self.kind == "accuracy":
            return _graded(rows)
        if self.kind == "accept_length":
            _, tokens, steps = breakdown.question_pairs(rows, self.definition)
            return RatioSample(tokens, steps)
        if self.kind == "position":
            _, tails, totals = breakdown.position_counts(rows)
            k = int(self.position or 0)
            tail = tails[k - 1] if k <= len(tails) else [0] * len(totals)
            return RatioSample([float(value) for value in tail], totals)
        group = breakdown.by_category(rows).get(str(self.category), [])
        if self.kind == "category_accuracy":
            return _graded(group)
        _, tokens, steps = breakdown.question_pairs(group, self.definition)
        return RatioSample(tokens, steps)


def floor_checks(floors: Floors) -> list[FloorCheck]:
    """Every floor `floors` sets, as checks, in the verdict's order."""
    metric = floors.metric
    checks = [FloorCheck(ACCEPT_LENGTH, "accept_length", floors.accept_length, floors.strict,
                         metric)]
    if floors.accuracy is not None:
        checks.append(FloorCheck(ACCURACY, "accuracy", floors.accuracy,
                                 floors.accuracy_strict, ACCURACY))
    for name, floor in floors.categories.items():
        if floor.accept_length is not None:
            checks.append(FloorCheck(f"category {name} accept length", "category_accept_length",
                                     floor.accept_length, floor.strict, metric, category=name))
        if floor.accuracy is not None:
            checks.append(FloorCheck(f"category {name} accuracy", "category_accuracy",
                                     floor.accuracy, floor.strict, ACCURACY, category=name))
    checks += [FloorCheck(f"position {k}", "position", floor, floors.positions_strict,
                          POSITION_ACCEPTANCE, position=k)
               for k, floor in enumerate(floors.positions, start=1)]
    for key in (SPEEDUP_TPOT, SPEEDUP_THROUGHPUT):
        floor = getattr(floors, key)
        if floor is not None:
            checks.append(FloorCheck(key, key, floor, False, key))  # type: ignore[arg-type]
    return checks


def recorded_floor_checks(document: Mapping[str, object], metric: str) -> list[FloorCheck]:
    """The checks of the floors a record's suite document declares (`metric`: the
    definition its figures are in, for records whose document predates `floors.metric`).
    A document whose floors do not validate declares none: nothing is drawn against them."""
    floors = document.get("floors") if isinstance(document, Mapping) else None
    if not isinstance(floors, Mapping):
        return []
    try:
        return floor_checks(Floors.model_validate({"metric": metric, **floors}))
    except (ValidationError, TypeError):
        return []


def _graded(rows: Sequence[Any]) -> GradedSample:
    marks = [_value(row, "correct") for row in rows]
    return GradedSample([bool(mark) for mark in marks if mark is not None])


def _value(row: Any, key: str) -> Any:
    value = row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)
    return None if isinstance(value, float) and math.isnan(value) else value


def _ci(ci: Sequence[float] | None) -> str:
    return f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
