"""The two accept-length definitions over request rows (`measure`'s docstring says what
each one is and where SGLang computes it): per-request numerators and pooled figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

from harness.errors import MissingMetric
from harness.metrics import stats

if TYPE_CHECKING:
    from harness.results.record import RequestRow

METRICS = ("server_avg", "per_request")

RequestLike: TypeAlias = "RequestRow | Mapping[str, object]"
"""A request row as the metrics read it: the loader's `RequestRow`, or a dict of its fields
(requests.jsonl, `store.load_requests`)."""


def fields_of(row: RequestLike) -> Mapping[str, object]:
    """A request row's fields: a dict as it is, a RequestRow's own (its `__dict__`, no
    copy: a sequential run sums every row's numerator at every look)."""
    return row if isinstance(row, Mapping) else vars(row)


def numerator(row: RequestLike, metric: str) -> int:
    """Request `row`'s numerator under `metric` (a RequestRow or a dict of its fields);
    the definition itself is `stats.numerator`."""
    fields = fields_of(row)
    value = stats.numerator(fields, metric)  # type: ignore[arg-type]
    if value is None:
        raise MissingMetric(f"request {fields.get('index')}: no counts for metric {metric}")
    return value


def metric_pairs(rows: Sequence[RequestLike], metric: str) -> tuple[list[int], list[int]]:
    """`stats.metric_pairs` of RequestRows or their dicts."""
    return stats.metric_pairs([fields_of(row) for row in rows], metric)  # type: ignore[arg-type]


def numerators(rows: Sequence[RequestLike], metric: str) -> list[int]:
    return [numerator(row, metric) for row in rows]


def steps_of(rows: Sequence[RequestLike]) -> list[int]:
    return [int(row["verify_steps"] if isinstance(row, dict) else row.verify_steps)
            for row in rows]


def accept_lengths(rows: Sequence[RequestLike]) -> dict[str, float]:
    """Both definitions' figures over `rows` (raises MissingMetric when undefined)."""
    steps = sum(steps_of(rows))
    if not rows:
        raise MissingMetric("no measured request completed: no accept length")
    if steps == 0:
        raise MissingMetric("measured requests reported 0 verify steps: no accept length")
    return {metric: sum(numerators(rows, metric)) / steps for metric in METRICS}
