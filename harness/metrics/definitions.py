"""The accept-length definitions over request rows (`measure`'s docstring says what each
one is and which engine computes it): per-request numerators and weights, and the figures.

Every definition is a ratio sum(numerator_i) / sum(weight_i) over requests (`stats.numerator`,
`stats.weight`), so the same statistics (CI, paired gate, sequential rule, power) serve all:
- `server_avg`: numerator correct drafts + k x verify steps, weight verify steps: SGLang's
  /server_info figure; vLLM's pooled `1 + accepted / drafts` (its correctness test); and
  TensorRT-LLM's `compute_acceptance_length`, which pools (accepted + requests with drafts)
  / requests with drafts over iterations (one request in one iteration is one verify step);
- `per_request`: numerator completion tokens, weight verify steps;
- `per_request_mean`: numerator the request's own 1 + accepted / drafts (1 with no draft),
  weight 1: the unweighted mean over requests, vLLM's reference-acceptance test
  (`run_acceptance_length_eval`) and the exports' mean of per-request means;
- `spec_accept_length_mean`: numerator a request's completion tokens / verify steps, weight
  1 when it made a verify step: the mean of SGLang's per-request spec_accept_length, as the
  DFlash authors' benchmark prints it for SGLang (PyPI `dflash` 0.1.0, `benchmark.py`).
The texts of each are `harness.suite.entries.METRIC_DEFINITIONS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

from harness.errors import MissingMetric
from harness.metrics import stats

if TYPE_CHECKING:
    from harness.results.record import RequestRow

METRICS = stats.METRIC_NAMES
# the definitions every run's rows give (the mean needs correct_drafts, which v1 rows lack)
POOLED_METRICS = ("server_avg", "per_request")

RequestLike: TypeAlias = "RequestRow | Mapping[str, object]"
"""A request row as the metrics read it: the loader's `RequestRow`, or a dict of its fields
(requests.jsonl, `store.load_requests`)."""


def fields_of(row: RequestLike) -> Mapping[str, object]:
    """A request row's fields: a dict as it is, a RequestRow's own (its `__dict__`, no
    copy: a sequential run sums every row's numerator at every look)."""
    return row if isinstance(row, Mapping) else vars(row)


def numerator(row: RequestLike, metric: str) -> float:
    """Request `row`'s numerator under `metric` (a RequestRow or a dict of its fields);
    the definition itself is `stats.numerator`."""
    fields = fields_of(row)
    value = stats.numerator(fields, metric)  # type: ignore[arg-type]
    if value is None:
        raise MissingMetric(f"request {fields.get('index')}: no counts for metric {metric}")
    return value


def weight(row: RequestLike, metric: str) -> int:
    """Request `row`'s weight under `metric` (`stats.weight`)."""
    return stats.weight(fields_of(row), metric)  # type: ignore[arg-type]


def metric_pairs(rows: Sequence[RequestLike], metric: str) -> tuple[list[float], list[int]]:
    """`stats.metric_pairs` of RequestRows or their dicts."""
    return stats.metric_pairs([fields_of(row) for row in rows], metric)  # type: ignore[arg-type]


def numerators(rows: Sequence[RequestLike], metric: str) -> list[float]:
    return [numerator(row, metric) for row in rows]


def steps_of(rows: Sequence[RequestLike]) -> list[int]:
    return [_count(fields_of(row)["verify_steps"]) for row in rows]


def _count(value: object) -> int:
    """A row's count as an int (a dict's from JSON may hold a float such as 3.0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"a count, not {type(value).__name__}: {value!r}")
    return int(value)


def request_value(row: RequestLike, metric: str) -> float | None:
    """One request's own accept length under `metric`: its numerator over its weight for
    the pooled definitions (None with no verify step), its value for per_request_mean;
    None when the row lacks the counts (a v1 row's server_avg fallback is the pooled
    figure's, not the request's)."""
    fields = fields_of(row)
    if metric == "server_avg" and fields.get("correct_drafts") is None:
        return None
    count = weight(row, metric)
    value = stats.numerator(fields, metric)  # type: ignore[arg-type]
    return None if value is None or count == 0 else value / count


def accept_length_of(rows: Sequence[RequestLike], metric: str) -> float:
    """`metric`'s figure over `rows`: sum of numerators / sum of weights (MissingMetric
    when a weighed row lacks the definition's counts or nothing is weighed)."""
    weighed = [row for row in rows if weight(row, metric)]
    if not weighed:
        raise MissingMetric(f"no measured request with a verify step: no {metric} figure")
    return sum(numerators(weighed, metric)) / sum(weight(row, metric) for row in weighed)


def accept_lengths(rows: Sequence[RequestLike]) -> dict[str, float | None]:
    """Every definition's figure over `rows` (raises MissingMetric when the pooled ones
    are undefined); a mean is None when the rows lack its counts (per_request_mean needs
    correct_drafts)."""
    steps = sum(steps_of(rows))
    if not rows:
        raise MissingMetric("no measured request completed: no accept length")
    if steps == 0:
        raise MissingMetric("measured requests reported 0 verify steps: no accept length")
    figures: dict[str, float | None] = {
        metric: sum(numerators(rows, metric)) / steps for metric in POOLED_METRICS}
    for metric in stats.MEAN_METRICS:
        try:
            figures[metric] = accept_length_of(rows, metric)
        except MissingMetric:
            figures[metric] = None
    return figures
