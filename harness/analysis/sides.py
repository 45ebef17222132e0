"""The sides of a comparison: runs pooled per question (`Side`, `add_run`). Selectors are
resolved to runs by `harness.analysis.selectors`; two sides' questions are matched by
`harness.analysis.question_pairing`.

A side is chosen by a selector (`harness compare --help`). A set of runs is pooled by
prompt: the numerators and steps of one question are summed across runs, so the question
stays the unit of sampling even when it was asked every night. Per question the side
keeps the numerators of each accept-length definition its rows give (`stats.numerator`:
`per_request` completion tokens, `server_avg` correct drafts + verify steps;
docs/statistics.md); `compare` picks one definition for both sides.

Each run is read through the door (`harness.results.readers`): a run folder without a
usable record or request rows is a `BadRecord` (exit 2), which the selectors report or skip
as they say.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from harness.errors import BadInput
from harness.metrics import stats
from harness.metrics.definitions import weight
from harness.metrics.stats import MEAN_METRICS
from harness.results.baselines import BaselineFigure
from harness.results.readers import read_measured_requests, read_run
from harness.results.record import RequestRow, RunRecord
from harness.results.rows import METRICS, flatten_record, row_count, row_number, row_text
from harness.secrets import redact_text


class SideSummary(TypedDict):
    """One side of a comparison as `harness compare` reports it."""

    name: str
    runs: list[str | None]  # its records' run ids
    builds: list[str]
    engines: list[str]
    verdicts: list[str | None]
    baseline: str | None  # a baseline figure's label
    source: str | None
    metric: str
    n_questions: int
    accept_length: float
    ci: tuple[float, float] | None
    accuracy: float | None
    per_position_acceptance: list[float]


@dataclass
class Side:
    """What one side of a comparison measured."""

    name: str
    records: list[dict[str, object]] = field(default_factory=list)  # loader rows of its runs
    baseline: BaselineFigure | None = None
    questions: list[int] = field(default_factory=list)
    verify_steps: list[int] = field(default_factory=list)  # per question, pooled over runs
    numerators: dict[str, list[float]] = field(default_factory=dict)  # metric -> per question
    # metric -> per question weight (verify steps; requests for per_request_mean)
    weights: dict[str, list[int]] = field(default_factory=dict)
    metric: str | None = None  # the definition compared (`use_metric`)
    note: str | None = None  # which runs a suite selector took
    n_correct: int = 0
    n_judged: int = 0
    histograms: list[list[int]] = field(default_factory=list)
    positions: list[list[float]] = field(default_factory=list)
    rows: list[RequestRow] = field(default_factory=list)  # its runs' request rows
    # what identifies its prompts, per run (`protocol_of`): pairing needs one on each side
    protocols: list[dict[str, object]] = field(default_factory=list)
    prompt_hashes: dict[Hashable, str] = field(default_factory=dict)  # question -> prompt sha256

    @property
    def declared(self) -> str | None:
        """The metric its records (or baseline) declare, None if they disagree."""
        if self.baseline is not None:
            return self.baseline.metric
        metrics = {metric for row in self.records if (metric := row_text(row, "metric"))}
        return metrics.pop() if len(metrics) == 1 else None

    def available(self) -> set[str]:
        """The metrics this side can give."""
        if self.baseline is not None:
            return {self.baseline.metric}
        if self.questions:
            return set(self.numerators)
        return {m for m in METRICS if all(_figure(row, m) is not None for row in self.records)}

    def use_metric(self, metric: str) -> None:
        if metric not in self.available():
            raise BadInput(f"{self.name}: no accept length under metric {metric!r} "
                           f"(it has: {', '.join(sorted(self.available())) or 'none'})")
        self.metric = metric

    def current_metric(self) -> str:
        """The metric compared: the one chosen, else what the side declares and can give."""
        if self.metric:
            return self.metric
        available = self.available()
        for metric in (self.declared, "server_avg", "per_request"):
            if metric in available:
                return metric
        return self.declared or "per_request"

    @property
    def tokens(self) -> list[float]:
        """Per-question numerators of the compared metric (docs/statistics.md)."""
        return self.numerators.get(self.current_metric(), [])

    @property
    def steps(self) -> list[int]:
        """Per-question weights of the compared metric: verify steps for the pooled
        definitions, requests for per_request_mean (`stats.weight`)."""
        return self.weights.get(self.current_metric(), self.verify_steps)

    @property
    def has_requests(self) -> bool:
        return len(self.tokens) > 0 and sum(self.steps) > 0

    def restricted(self, questions: Iterable[Hashable]) -> tuple[list[float], list[int]]:
        """(numerators, steps) of the compared metric over `questions` only, in order."""
        where: dict[Hashable, int] = {q: i for i, q in enumerate(self.questions)}
        keep = [where[q] for q in questions]
        return [self.tokens[i] for i in keep], [self.steps[i] for i in keep]

    def accept_length(self) -> float:
        if self.has_requests:
            return stats.accept_length(self.tokens, self.steps)
        if self.baseline is not None:
            return self.baseline.accept_length
        metric = self.current_metric()
        figures = [figure for row in self.records
                   if (figure := _figure(row, metric)) is not None]
        if not self.records or len(figures) < len(self.records):
            raise BadInput(f"{self.name}: no accept length recorded under metric {metric!r}")
        return sum(figures) / len(figures)

    def ci(self, level: float) -> tuple[float, float] | None:
        if self.has_requests and len(self.tokens) >= 2:
            return stats.bootstrap_ci(self.tokens, self.steps, level=level)
        if self.baseline is not None:
            return self.baseline.ci
        if len(self.records) == 1:
            row = self.records[0]
            low, high = row_number(row, "ci_low"), row_number(row, "ci_high")
            if row["metric"] == self.current_metric() and low is not None and high is not None:
                return (low, high)
        return None

    def accuracy(self) -> float | None:
        if self.n_judged:
            return self.n_correct / self.n_judged
        if self.baseline is not None:
            return self.baseline.accuracy
        known = [share for row in self.records
                 if (share := row_number(row, "accuracy")) is not None]
        return sum(known) / len(known) if known else None

    def per_position(self) -> list[float]:
        summed = stats.sum_histograms(self.histograms)
        if summed:
            return stats.per_position_acceptance(summed)
        if len(self.positions) == 1 and len(self.records) == 1:
            return list(self.positions[0])
        return []

    def summary(self, level: float) -> SideSummary:
        return {
            "name": self.name,
            "runs": [row_text(row, "run_id") for row in self.records],
            "builds": sorted({_build_name(row) for row in self.records}),
            # which engine measured it: a comparison across engines says so (compare)
            "engines": sorted({str(row["build.engine"]) for row in self.records
                               if row["build.engine"]}),
            "verdicts": [row_text(row, "verdict") for row in self.records],
            "baseline": self.baseline.label if self.baseline else None,
            "source": self.baseline.source if self.baseline else None,
            "metric": self.current_metric(),
            "n_questions": len(self.tokens),
            "accept_length": self.accept_length(),
            "ci": self.ci(level),
            "accuracy": self.accuracy(),
            "per_position_acceptance": self.per_position(),
        }


def _figure(row: dict[str, object], metric: str) -> float | None:
    """A record's accept length under `metric`, from its sums when it has them."""
    steps = row_count(row, "verify_steps")
    tokens, correct = row_count(row, "completion_tokens"), row_count(row, "correct_drafts")
    if steps:
        if metric == "per_request" and tokens is not None:
            return tokens / steps
        if metric == "server_avg" and correct is not None:
            return (correct + steps) / steps
    if metric in MEAN_METRICS and row["metric"] != metric:
        return row_number(row, f"accept_length_{metric}")  # a mean: never from pooled sums
    if row[f"accept_length_{metric}"] is None and row["metric"] == metric:
        return row_number(row, "accept_length")
    return row_number(row, f"accept_length_{metric}")


def _build_name(row: dict[str, object]) -> str:
    """The spec as given, else the installed engine and its version ("reference 0.1.0")."""
    installed = " ".join(str(part) for part in (row["build.engine"], row["build.version"])
                         if part)
    return redact_text(str(row["build.spec"])) if row["build.spec"] else installed or "-"


def common_metric(a: Side, b: Side) -> str:
    """The metric both sides can give: what they declare if they agree and can, else
    server_avg, else per_request. BadInput when they share none."""
    both = a.available() & b.available()
    if not both:
        raise BadInput(f"{a.name} gives accept length as {', '.join(sorted(a.available())) or '-'}"
                       f", {b.name} as {', '.join(sorted(b.available())) or '-'}: not comparable")
    for metric in (a.declared, b.declared, "server_avg", "per_request"):
        if metric in both:
            return metric
    raise AssertionError("unreachable")  # pragma: no cover


def add_run(side: Side, run_dir: Path) -> None:
    """Add one run folder to `side`, read through the door; BadRecord (exit 2, naming the
    file and why) if it holds no usable record or no usable request rows."""
    run_dir = Path(run_dir)
    add_record(side, run_dir, read_run(run_dir))


# The workload fields that make question i the same prompt in two runs (WorkloadInfo):
# the data rows, the kind and protocol, the template and sampling. Counts, routes and the
# planned-prompts hash are left out: a run of 50 and one of 480 of one suite share them.
PROTOCOL_FIELDS = ("kind", "protocol", "data_sha256", "chat_template_sha256",
                   "system_prompt_sha256", "chat_template_kwargs", "stop", "temperature",
                   "top_p", "top_k", "sampling_seed")


def protocol_of(record: RunRecord) -> dict[str, object]:
    """What identifies a run's prompts, from its record (None for what it does not say;
    the data hash falls back to the provenance's)."""
    workload = record.workload
    found = {name: getattr(workload, name, None) for name in PROTOCOL_FIELDS}
    found["data_sha256"] = found["data_sha256"] or record.provenance.data_sha256
    shots = record.suite.document.get("workload")
    found["shots"] = shots.get("shots") if isinstance(shots, dict) else None
    return found


def add_record(side: Side, run_dir: Path, record: RunRecord) -> None:
    """Pool one run's request rows into `side` (its record already read: `read_run`)."""
    # the figures below are computed from the rows, never taken on trust: none, refused
    requests = read_measured_requests(run_dir, record)
    side.records.append(flatten_record(record.model_dump(mode="json"), str(run_dir)))
    side.protocols.append(protocol_of(record))
    measurement = record.measurement
    if measurement is not None and measurement.accept_histogram:
        side.histograms.append(measurement.accept_histogram)
    if measurement is not None and measurement.per_position_acceptance:
        side.positions.append(measurement.per_position_acceptance)
    steps = dict(zip(side.questions, side.verify_steps, strict=True))
    pooled = {metric: dict(zip(side.questions, values, strict=True))
              for metric, values in side.numerators.items()}  # fmt: skip
    weighed = {metric: dict(zip(side.questions, values, strict=True))
               for metric, values in side.weights.items()}  # fmt: skip
    if not side.questions:
        pooled = {metric: {} for metric in METRICS if _gives(requests, metric)}
        weighed = {metric: {} for metric in pooled}
    for request in requests:
        side.rows.append(request)  # per category / per position breakdowns (compare)
        question = request.question_index
        if request.prompt_sha256 and not request.turn:
            side.prompt_hashes.setdefault(question, request.prompt_sha256)
        steps[question] = steps.get(question, 0) + request.verify_steps
        for metric in list(pooled):  # a typed row has what the pooled definitions need
            value = stats.numerator(vars(request), metric)  # type: ignore[arg-type]
            if value is None:  # a row without correct drafts: no mean on this side
                del pooled[metric], weighed[metric]
                continue
            count = weight(request, metric)
            pooled[metric][question] = pooled[metric].get(question, 0) + (value if count else 0)
            weighed[metric][question] = weighed[metric].get(question, 0) + count
        if request.correct is not None:
            side.n_judged += 1
            side.n_correct += request.correct
    side.questions = sorted(steps)
    side.verify_steps = [steps[q] for q in side.questions]
    side.numerators = {metric: [values.get(q, 0) for q in side.questions]
                       for metric, values in pooled.items()} if side.questions else {}  # fmt: skip
    side.weights = {metric: [values.get(q, 0) for q in side.questions]
                    for metric, values in weighed.items()} if side.questions else {}  # fmt: skip


def _gives(requests: list[RequestRow], metric: str) -> bool:
    """Whether every row has the counts `metric` needs."""
    return all(stats.numerator(vars(row), metric) is not None  # type: ignore[arg-type]
               for row in requests)
