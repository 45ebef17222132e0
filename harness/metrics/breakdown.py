"""Figures by question, by category and by draft position, with CIs and differences.

The unit of sampling is the question (docs/statistics.md): the turns of a multi-turn
question, and the same question asked in several runs, are summed into one
(numerator, verify steps) pair before any interval or test. Per draft position k the
rate P(position k accepted) is a ratio too: per question, the verify steps that accepted
at least k drafts over all its verify steps (from SGLang's per-request
`spec_correct_drafts_histogram`), so the same bootstrap over questions gives its CI and
the same delta-method difference compares two builds position by position.

Rows are `RequestRow`s or their dicts (requests.jsonl, `store.load_requests` records).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from harness.errors import MissingMetric
from harness.metrics import stats
from harness.metrics.definitions import METRICS, RequestLike, numerator, weight

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_CATEGORY = "all"


def _get(row: Any, key: str, default: Any = None) -> Any:
    value = row.get(key, default) if isinstance(row, Mapping) else getattr(row, key, default)
    # pandas gives NaN for a missing cell
    return default if isinstance(value, float) and math.isnan(value) else value


def rows_from_frame(frame: pd.DataFrame) -> list[dict[str, object]]:
    """`store.load_requests` rows as dicts, a missing cell (NaN) left out as in the file."""
    return [{k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}
            for row in frame.to_dict("records")]


def category_of(row: RequestLike) -> str:
    return str(_get(row, "category") or DEFAULT_CATEGORY)


def by_question(rows: Sequence[RequestLike]) -> dict[Hashable, list[RequestLike]]:
    """Rows grouped by question, in order of first appearance (runs keep their own
    question numbering; pooled runs of one suite share it)."""
    groups: dict[Hashable, list[RequestLike]] = {}
    for row in rows:
        groups.setdefault(_get(row, "question_index"), []).append(row)
    return groups


def by_category(rows: Sequence[RequestLike]) -> dict[str, list[RequestLike]]:
    groups: dict[str, list[RequestLike]] = {}
    for row in rows:
        groups.setdefault(category_of(row), []).append(row)
    return groups


def question_pairs(rows: Sequence[RequestLike], metric: str
                   ) -> tuple[list[Hashable], list[float], list[int]]:
    """(questions, numerators, weights), one entry per question (turns summed): the
    weights are verify steps, or requests for per_request_mean (`stats.weight`)."""

    keys, tokens, steps = [], [], []
    for key, group in by_question(rows).items():
        weighed = [row for row in group if weight(row, metric)]
        keys.append(key)
        tokens.append(sum(numerator(row, metric) for row in weighed))
        steps.append(sum(weight(row, metric) for row in weighed))
    return keys, tokens, steps


def position_counts(rows: Sequence[RequestLike]
                    ) -> tuple[list[Hashable], list[list[int]], list[int]]:
    """(questions, tails[k][q], totals[q]) over the questions whose rows carry a histogram:
    tails[k][q] counts question q's verify steps that accepted at least k + 1 drafts."""
    keys, summed = [], []
    for key, group in by_question(rows).items():
        histogram = stats.sum_histograms([_get(row, "accept_histogram") for row in group])
        if sum(histogram) > 0:
            keys.append(key)
            summed.append(histogram)
    width = max((len(h) for h in summed), default=0)
    totals = [sum(h) for h in summed]
    tails = [[sum(h[k:]) for h in summed] for k in range(1, width)]
    return keys, tails, totals


def per_position(rows: Sequence[RequestLike], level: float = 0.95, seed: int = 0
                 ) -> tuple[list[float], list[tuple[float, float]] | None]:
    """P(position k accepted) for k = 1.., and its bootstrap CI over questions (None with
    fewer than two questions)."""
    keys, tails, totals = position_counts(rows)
    if not keys:
        return [], None
    rates = [sum(tail) / sum(totals) for tail in tails]
    if len(keys) < 2:
        return rates, None
    cis = [stats.bootstrap_ci(tail, totals, level=level, seed=seed) for tail in tails]
    return rates, cis


def summarise_group(rows: Sequence[RequestLike], metric: str, seed: int = 0) -> dict[str, object]:
    """A category's figures (the fields of `record.CategoryResult`)."""
    keys, tokens, weights = question_pairs(rows, metric)
    total_steps = sum(int(_get(row, "verify_steps", 0)) for row in rows)
    figures: dict[str, float | None] = {m: None for m in METRICS}
    if total_steps > 0:
        for m in METRICS:
            try:
                _, values, counts = question_pairs(rows, m)
                figures[m] = sum(values) / sum(counts)
            except MissingMetric:  # rows without that definition's counts
                figures[m] = None
    ci = None
    if total_steps > 0 and len(keys) >= 2:
        ci = stats.bootstrap_ci(tokens, weights, seed=seed)
    graded = [row for row in rows if _get(row, "correct") is not None]
    n_correct = sum(1 for row in graded if _get(row, "correct"))
    rates, cis = per_position(rows, seed=seed)
    return {
        "n_prompts": len(keys),
        "n_requests": len(rows),
        "accept_length": figures[metric],
        "accept_length_ci": ci,
        "accept_length_server_avg": figures["server_avg"],
        "accept_length_per_request": figures["per_request"],
        "accept_length_per_request_mean": figures["per_request_mean"],
        "accept_length_spec_accept_length_mean": figures["spec_accept_length_mean"],
        "completion_tokens": sum(int(_get(row, "completion_tokens", 0)) for row in rows),
        "verify_steps": total_steps,
        "accuracy": n_correct / len(graded) if graded else None,
        "n_correct": n_correct if graded else None,
        "per_position_acceptance": rates or None,
        "per_position_ci": cis,
    }


def categories(rows: Sequence[RequestLike], metric: str, seed: int = 0
               ) -> dict[str, dict[str, object]]:
    return {name: summarise_group(group, metric, seed)
            for name, group in by_category(rows).items()}


# ---------------------------------------------------------------- two sides


def _subset(side: tuple[Sequence[Hashable], Sequence[float], Sequence[int]],
            keys: Sequence[Hashable]
            ) -> tuple[list[Hashable], list[float], list[int]]:
    where = {key: i for i, key in enumerate(side[0])}
    picked = [where[key] for key in keys]
    return list(keys), [side[1][i] for i in picked], [side[2][i] for i in picked]


class DifferenceRow(TypedDict):
    """One category's or draft position's figures on both sides and B - A."""

    a: float | None
    b: float | None
    b_minus_a: float | None
    ci: tuple[float, float] | None
    p_value: float | None  # two-sided
    p_drop: float | None  # one-sided, for a drop of B below A
    method: str
    n_a: int
    n_b: int
    n_shared: int  # the questions the paired figure used (0: independent samples)
    position: NotRequired[int]  # a draft position's row: k
    p_adjusted: NotRequired[float | None]  # Holm's, over a comparison's rows (compare)


def _difference(a: tuple[Sequence[Hashable], Sequence[float], Sequence[int]],
                b: tuple[Sequence[Hashable], Sequence[float], Sequence[int]], level: float,
                pair: bool = True) -> DifferenceRow:
    """B - A of two (questions, numerators, steps) samples: paired on the questions both
    asked when there are at least two and `pair` (the caller knows both sides asked them
    the same way), else independent. `n_shared`: the questions the paired figure used."""
    if not a[0] or not b[0] or sum(a[2]) <= 0 or sum(b[2]) <= 0:
        return {"a": None, "b": None, "b_minus_a": None, "ci": None, "p_value": None,
                "p_drop": None, "method": "no data on one side", "n_a": len(a[0]),
                "n_b": len(b[0]), "n_shared": 0}
    figure_a, figure_b = stats.accept_length(a[1], a[2]), stats.accept_length(b[1], b[2])
    shared = sorted(set(a[0]) & set(b[0]), key=str)
    paired = pair and len(shared) >= 2
    n_a, n_b = len(a[0]), len(b[0])
    if paired:
        sub_a, sub_b = _subset(a, shared), _subset(b, shared)
        if sum(sub_a[2]) > 0 and sum(sub_b[2]) > 0:
            a, b = sub_a, sub_b
        else:  # the shared questions made no verify step: nothing to pair
            paired = False
    d = stats.ratio_difference(a[1], a[2], b[1], b[2], paired=paired, level=level)
    method = d.method + (f", on the {len(shared)} questions both asked"
                         if paired and len(shared) < max(n_a, n_b) else "")
    return {"a": figure_a, "b": figure_b, "b_minus_a": d.estimate, "ci": d.ci, "p_value": d.p_value,
            "p_drop": d.p_drop, "method": method, "n_a": n_a, "n_b": n_b,
            "n_shared": len(shared) if paired else 0}


def compare_categories(rows_a: Sequence[RequestLike], rows_b: Sequence[RequestLike], metric: str,
                       level: float = 0.95, pair: bool = True) -> dict[str, DifferenceRow]:
    """Per category present on either side: both figures and B - A with CI and p-values
    (paired on the shared questions unless `pair` is False)."""
    groups_a, groups_b = by_category(rows_a), by_category(rows_b)
    names = list(dict.fromkeys([*groups_a, *groups_b]))
    return {name: _difference(question_pairs(groups_a.get(name, []), metric),
                              question_pairs(groups_b.get(name, []), metric), level, pair)
            for name in names}


def compare_positions(rows_a: Sequence[RequestLike], rows_b: Sequence[RequestLike],
                      level: float = 0.95, pair: bool = True) -> list[DifferenceRow]:
    """Per draft position k = 1..: P(k accepted) on both sides and B - A, paired on the
    questions both asked unless `pair` is False."""
    keys_a, tails_a, totals_a = position_counts(rows_a)
    keys_b, tails_b, totals_b = position_counts(rows_b)
    out: list[DifferenceRow] = []
    for k in range(max(len(tails_a), len(tails_b))):
        side_a = (keys_a, tails_a[k] if k < len(tails_a) else [0] * len(keys_a), totals_a)
        side_b = (keys_b, tails_b[k] if k < len(tails_b) else [0] * len(keys_b), totals_b)
        out.append({"position": k + 1, **_difference(side_a, side_b, level, pair)})
    return out
