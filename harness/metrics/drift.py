"""Drift over serving time (`harness soak`): accept length per window of serving time, and
the trend of accept length within one run, gated by a tolerance.

Windows: each request falls in the window it finished in (`RequestRow.finished_s`, from
the start of the measured phase); a window's figure is the suite's definition pooled over
its rows (`definitions.accept_length_of`: server_avg is the server's metrics delta over
the window, computed exactly from each request's own counts) with the run's CI (a
bootstrap over questions, `measure.confidence_interval`).

The trend: a soak repeats one workload, so every question is asked again and again. The
slope of accept length against time is taken within each question (question fixed
effects: each (question, turn)'s own level is removed, so the spread between prompts, the
largest source of variance, does not blur the trend), each request weighted as the
definition weighs it (verify steps for the pooled definitions, 1 for the means), with a
cluster-robust standard error by question (a question's repeats are not independent) and
a t quantile with questions - 1 degrees of freedom (scipy's, `stats.t_quantile`). The drift
is that slope over the run's duration, as a share of the run's accept length:

    drift = slope x duration / accept length      (-0.05: fell 5% over the run)

The gate is a non-inferiority test as the paired gate's (`paired_gate`): with the
two-sided 1 - 2 alpha interval (L, U) of the drift and the tolerated fall T,
`within` when L > -T (the fall is shown smaller than T), `beyond` when U < -T (shown
larger), else `inconclusive`, judged by the suite's `inconclusive` setting. A rise is not
a regression; it is recorded, never failed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from harness.metrics.definitions import RequestLike, accept_length_of, fields_of, metric_pairs
from harness.metrics.measure import confidence_interval
from harness.metrics.stats import judged, t_quantile

DriftDecision = Literal["within", "beyond", "inconclusive"]

WINDOW_DEFINITION = ("the suite's accept-length definition pooled over the requests that "
                     "finished in the window (sum of numerators / sum of weights); 95% CI: "
                     "bootstrap over questions")
DRIFT_DEFINITION = ("slope of accept length against serving time within each question "
                    "(question fixed effects, each request weighted as the definition "
                    "weighs it, cluster-robust by question), x the run's duration, as a "
                    "share of the run's accept length")


@dataclass(frozen=True)
class WindowFigure:
    index: int
    start_s: float
    end_s: float
    n_requests: int
    n_questions: int
    accept_length: float | None  # None: no request finished in it (never drawn as 0)
    ci: tuple[float, float] | None


def finished_at(row: RequestLike) -> float | None:
    """When a request finished, seconds into the measured phase (None: not recorded)."""
    value = fields_of(row).get("finished_s")
    return float(value) if isinstance(value, int | float) else None


def _named(row: RequestLike, key: str) -> object:
    return fields_of(row).get(key)


def window_count(duration_s: float, window_s: float) -> int:
    return max(1, math.ceil(duration_s / window_s - 1e-9))


def window_of(finished_s: float, duration_s: float, window_s: float) -> int:
    """A request's window; one that finished after the duration (sent before it, in
    flight at its end) counts in the last."""
    return min(int(finished_s // window_s), window_count(duration_s, window_s) - 1)


def window_figures(rows: Sequence[RequestLike], metric: str, duration_s: float,
                   window_s: float, seed: int = 0) -> list[WindowFigure]:
    """Each window's accept length under `metric` and its CI; ValueError when a row has
    no finishing time (a record older than the soak's)."""
    count = window_count(duration_s, window_s)
    binned: list[list[RequestLike]] = [[] for _ in range(count)]
    for row in rows:
        finished = finished_at(row)
        if finished is None:
            raise ValueError(f"request {_named(row, 'index')} has no finished_s: its window "
                             "is unknown")
        binned[window_of(finished, duration_s, window_s)].append(row)
    figures = []
    for index, members in enumerate(binned):
        _, weights = metric_pairs(members, metric) if members else ([], [])
        value = accept_length_of(members, metric) if sum(weights) > 0 else None
        figures.append(WindowFigure(
            index=index, start_s=index * window_s,
            end_s=min((index + 1) * window_s, duration_s), n_requests=len(members),
            n_questions=len({_named(row, "question_index") for row in members}),
            accept_length=value,
            ci=confidence_interval(members, metric, seed) if value is not None else None))
    return figures


@dataclass(frozen=True)
class DriftResult:
    decision: DriftDecision
    metric: str
    n_requests: int  # requests with a verify step
    n_questions: int  # questions asked at least twice: those the slope is taken within
    accept_length: float  # the run's, under `metric`
    slope_per_s: float
    slope_ci: tuple[float, float]
    duration_s: float
    drift: float  # slope x duration / accept length
    drift_ci: tuple[float, float]  # two-sided, level 1 - 2 alpha
    max_drift: float  # the tolerated fall, a share
    alpha: float

    @property
    def level(self) -> float:
        return 1.0 - 2.0 * self.alpha

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "level": self.level, "definition": DRIFT_DEFINITION}


def drift_test(rows: Sequence[RequestLike], metric: str, duration_s: float,
               max_drift: float, alpha: float) -> DriftResult:
    """The drift of accept length over the run and its decision; ValueError when no trend
    can be taken (fewer than two questions asked twice, rows without a finishing time)."""
    import numpy as np

    numerators, weights = metric_pairs(rows, metric)
    groups: dict[tuple[object, object], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        if weights[i] <= 0:
            continue
        if finished_at(row) is None:
            raise ValueError(f"request {_named(row, 'index')} has no finished_s")
        groups[(_named(row, "question_index"), _named(row, "turn"))].append(i)
    repeated = {key: members for key, members in groups.items() if len(members) >= 2}
    questions = {key[0] for key in repeated}
    if len(questions) < 2:
        raise ValueError(f"{len(questions)} question(s) finished twice or more: a trend is "
                         "taken within questions, and needs at least two asked again "
                         "(lengthen the duration or ask fewer questions)")
    x_parts, y_parts, w_parts, clusters = [], [], [], []
    for (question, _turn), members in repeated.items():
        w = np.array([weights[i] for i in members], dtype=float)
        x = np.array([finished_at(rows[i]) for i in members], dtype=float)
        y = np.array([numerators[i] / weights[i] for i in members])
        x_parts.append(x - np.average(x, weights=w))
        y_parts.append(y - np.average(y, weights=w))
        w_parts.append(w)
        clusters += [question] * len(members)
    x, y, w = np.concatenate(x_parts), np.concatenate(y_parts), np.concatenate(w_parts)
    spread = float(np.sum(w * x * x))
    if spread <= 0:
        raise ValueError("every repeat of a question finished at the same time: no trend")
    slope = float(np.sum(w * x * y) / spread)
    residual = y - slope * x
    scores: dict[object, float] = defaultdict(float)
    for cluster, score in zip(clusters, w * x * residual, strict=True):
        scores[cluster] += float(score)
    g = len(scores)
    variance = g / (g - 1) * sum(s * s for s in scores.values()) / (spread * spread)
    margin = t_quantile(1.0 - alpha, g - 1) * math.sqrt(variance)
    level = accept_length_of(rows, metric)
    scale = duration_s / level
    drift = slope * scale
    drift_ci = ((slope - margin) * scale, (slope + margin) * scale)
    decision: DriftDecision = "within" if drift_ci[0] > -max_drift else \
        "beyond" if drift_ci[1] < -max_drift else "inconclusive"
    return DriftResult(decision=decision, metric=metric,
                       n_requests=sum(1 for weight in weights if weight > 0),
                       n_questions=len(questions), accept_length=level, slope_per_s=slope,
                       slope_ci=(slope - margin, slope + margin), duration_s=duration_s,
                       drift=drift, drift_ci=drift_ci, max_drift=max_drift, alpha=alpha)


def status_of(decision: DriftDecision, inconclusive: str) -> Literal["pass", "fail"]:
    """pass / fail: an inconclusive finding judged as the soak's setting says."""
    return judged(decision, "within", "beyond", inconclusive)


def describe(result: DriftResult, status: str) -> str:
    """One line for the verdict: the drift, its CI, the tolerance, the decision."""
    low, high = result.drift_ci
    words = {"within": "the fall is shown within the tolerance",
             "beyond": "accept length fell by more than the tolerance",
             "inconclusive": f"inconclusive (judged {status.upper()} by the soak's "
                             "`inconclusive` setting)"}
    return (f"drift over {result.duration_s:g} s: {result.drift:+.2%} of accept length "
            f"{result.accept_length:.4f} ({result.metric}; {result.level:.0%} CI "
            f"{low:+.2%}..{high:+.2%}; slope {result.slope_per_s:+.4g}/s within "
            f"{result.n_questions} questions, {result.n_requests} requests), tolerated fall "
            f"{result.max_drift:.1%}: {words[result.decision]} "
            f"(one-sided alpha {result.alpha:g})")
