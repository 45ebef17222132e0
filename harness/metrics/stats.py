"""The harness's statistics: accept length, its uncertainty, comparisons and the gate's
operating characteristic; the sequential rule is `harness.metrics.stopping`'s.

The unit of sampling is the prompt, not the decoding step: steps of one request share a
prompt and are strongly correlated, so every variance here is a cluster (prompt-level)
variance. Accept length is a ratio estimator, R = sum(n_i) / sum(steps_i), where n_i is
the numerator of the suite's metric (`numerator`); its variance comes from the
linearised residuals e_i = n_i - R * steps_i (delta method) or from resampling whole
prompts (bootstrap). Functions take `(tokens, steps)`: pass the metric's numerators as
`tokens`. See docs/statistics.md for the derivations and the measured error rates.

The t distribution is scipy's, the bootstrap numpy's (docs/statistics.md, "Which library
computes what"); numpy and scipy are imported lazily, so CLI modules importing this one
stay fast. Synthetic data for tests and benchmarks lives in `harness.analysis.simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal, SupportsInt

if TYPE_CHECKING:
    import numpy as np

# The normal law is the standard library's (Wichura's AS241 quantile, erf for the cdf):
# it agrees with scipy.stats.norm to within 4e-15 (absolute) and costs a fraction of a
# microsecond a scalar call where scipy.stats.norm costs hundreds
# (`python benchmarks/bench_stats.py`), and every caller here asks for one number.
_NORMAL = NormalDist()

# Per-prompt standard deviation (accept-length units) assumed by `harness power` when a
# suite has no recorded runs yet: an assumption for DFlash/EAGLE GSM8K answers at accept
# lengths of 3-6, to be replaced by recorded data as soon as it exists.
DEFAULT_PROMPT_SD = 0.75

Decision = Literal["pass", "fail"]
Metric = Literal["server_avg", "per_request", "per_request_mean", "spec_accept_length_mean"]
METRIC_NAMES: tuple[str, ...] = ("server_avg", "per_request", "per_request_mean",
                                 "spec_accept_length_mean")
# the definitions that average requests (each weighs 1) rather than pool verify steps
MEAN_METRICS: tuple[str, ...] = ("per_request_mean", "spec_accept_length_mean")


def normal_cdf(z: float) -> float:
    return _NORMAL.cdf(z)


def normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def t_quantile(p: float, df: float) -> float:
    """Student-t quantile t_{p, df} for any df >= 1 (math.inf: the normal quantile).

    scipy.special.stdtrit, the function scipy.stats.t.ppf evaluates, called directly: the
    same figure to the last bit, while t.ppf's argument handling costs tens of times the
    evaluation (`python benchmarks/bench_stats.py`), and the paired gate and the
    sequential rule ask for one quantile at a time.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if not df >= 1:  # also refuses NaN
        raise ValueError(f"the t quantile needs df >= 1, got {df}")
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


# ------------------------------------------------------------------ numerators and ratio


def _as_int(value: object) -> int:
    """A row's count as an int: a RequestRow's int, or a number as a dict or a frame's row
    holds it (a float, a numpy integer)."""
    if isinstance(value, int):
        return value
    if isinstance(value, (SupportsInt, str)):
        return int(value)
    raise TypeError(f"a count must be a number, got {type(value).__name__}")


def numerator(row: Mapping[str, object], metric: Metric) -> float | None:
    """A request row's numerator under `metric` (docs/statistics.md, "Definitions"); every
    figure is sum(numerators) / sum(weights) (`weight`).

    server_avg (SGLang's /server_info avg_spec_accept_length): correct drafts + verify
    steps; a v1 row without `correct_drafts` falls back to completion_tokens - 1 (the
    prefill token left out). per_request (meta_info spec_accept_length): completion_tokens.
    A request that ended with 0 verify steps counts in neither: the server counted no step
    of it, and SGLang gives it no spec fields (`_calculate_spec_decoding_metrics` writes
    them only when spec_verify_ct > 0), so its prefill token is in no pooled figure.
    per_request_mean (vLLM's reference-acceptance test, `run_acceptance_length_eval` in
    tests/v1/e2e/spec_decode/acceptance_rates/utils.py): the request's own accept length
    1 + accepted / drafts, i.e. (correct drafts + k x verify steps) / verify steps, and 1
    for a request that made no draft; weighted 1 each, so the figure is the unweighted
    mean over requests. A v1 row without `correct_drafts` cannot give it.
    spec_accept_length_mean (the DFlash authors' benchmark, PyPI `dflash` 0.1.0
    `dflash/benchmark.py`, SGLang backend: the mean of each response's
    meta_info.spec_accept_length): completion_tokens / verify steps of each request that
    made a verify step (SGLang writes the field only then), weighted 1 each.
    None when the row lacks what the metric needs.
    """
    if metric not in METRIC_NAMES:
        raise ValueError(f"unknown metric {metric!r} ({', '.join(METRIC_NAMES)})")
    tokens, drafts, steps = (row.get("completion_tokens"), row.get("correct_drafts"),
                             row.get("verify_steps"))
    if metric == "spec_accept_length_mean":
        if steps == 0:
            return 0  # no spec field: in no mean (weight 0)
        return None if tokens is None or steps is None else _as_int(tokens) / _as_int(steps)
    if metric == "per_request_mean":
        if steps == 0:
            return 1.0  # vLLM's test: a prompt with no draft counts as 1
        if drafts is None or steps is None:
            return None
        k = _as_int(row.get("non_draft_tokens_per_step") or 1)
        return (_as_int(drafts) + k * _as_int(steps)) / _as_int(steps)
    if steps == 0:
        return 0  # ended at prefill: no verify step, no spec field, nothing pooled
    if metric == "per_request":
        return None if tokens is None else _as_int(tokens)
    if drafts is not None and steps is not None:
        # each step makes its correct drafts and k more (SGLang's num_non_draft_tokens_per_req)
        k = _as_int(row.get("non_draft_tokens_per_step") or 1)
        return _as_int(drafts) + k * _as_int(steps)
    return None if tokens is None else max(_as_int(tokens) - 1, 0)


def weight(row: Mapping[str, object], metric: Metric) -> int:
    """A request row's weight (the ratio's denominator) under `metric`: its verify steps
    for the pooled definitions, 1 for per_request_mean (every request weighs the same)."""
    if metric == "per_request_mean":
        return 1
    steps = _as_int(row.get("verify_steps") or 0)
    if metric == "spec_accept_length_mean":
        return 1 if steps else 0
    return steps


def metric_pairs(rows: Sequence[Mapping[str, object]], metric: Metric
                 ) -> tuple[list[float], list[int]]:
    """(numerators, weights) of the rows that have both and a positive weight."""
    numerators, weights = [], []
    for row in rows:
        value, count = numerator(row, metric), weight(row, metric)
        if value is not None and count:
            numerators.append(value)
            weights.append(count)
    return numerators, weights


def request_arrays(tokens: Sequence[float], steps: Sequence[float]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, steps) as float arrays, checked: 1-D, equal length, some verify steps."""
    import numpy as np

    t = np.asarray(tokens, dtype=float)
    s = np.asarray(steps, dtype=float)
    if t.shape != s.shape or t.ndim != 1:
        raise ValueError(f"tokens and steps must be 1-D of equal length, got {t.shape}, {s.shape}")
    if t.size == 0:
        raise ValueError("no requests")
    if s.sum() <= 0:
        raise ValueError("no verify steps: accept length is undefined")
    return t, s


def accept_length(tokens: Sequence[float], steps: Sequence[float]) -> float:
    """Sum of numerators over sum of verify steps (exact; not a mean of ratios)."""
    t, s = request_arrays(tokens, steps)
    return float(t.sum() / s.sum())


def _contributions(tokens: Sequence[float], steps: Sequence[float]) -> np.ndarray:
    """Per-prompt linearised contributions e_i / mean(steps), in accept-length units."""
    t, s = request_arrays(tokens, steps)
    contributions: np.ndarray = (t - t.sum() / s.sum() * s) / s.mean()
    return contributions


def prompt_sd(tokens: Sequence[float], steps: Sequence[float]) -> float:
    """sd(e_i) / mean(steps): the per-prompt spread whose square over n is the
    delta-method variance of R (accept-length units)."""
    if len(tokens) < 2:
        raise ValueError("need at least 2 prompts for a spread")
    return float(_contributions(tokens, steps).std(ddof=1))


def standard_error(tokens: Sequence[float], steps: Sequence[float]) -> float:
    """Delta-method (cluster) standard error of the ratio; inf with fewer than 2 prompts."""
    if len(tokens) < 2:
        return math.inf
    return prompt_sd(tokens, steps) / math.sqrt(len(tokens))


def bootstrap_ci(
    tokens: Sequence[float],
    steps: Sequence[float],
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the ratio, resampling whole prompts.

    Each replicate draws n (tokens_i, steps_i) pairs with replacement (numpy's generator
    seeded with `seed`, the suite's workload seed: the same data gives the same interval)
    and takes the ratio of sums; a replicate that drew only prompts without a verify step
    has no ratio and is left out. Percentile, not BCa, after `benchmarks/bench_bootstrap.py`
    (coverage at n = 10..120; docs/statistics.md).

    Written here rather than called from scipy.stats.bootstrap(paired=True,
    method="percentile"), which gives the same interval to within a few units in the last
    place for the same seed (`tests/metrics/test_scipy_statistics.py`), because
    `python benchmarks/bench_stats.py` measures scipy's about twice as slow a call (one
    more gather of the resampled index) and, above all, the first CI in a process several
    times as slow (scipy.stats's import): a harness killed or faulted mid-measurement
    records its partial figures, CI included, and must exit within 5 s of the fault
    (`tests/faults`); with scipy's bootstrap those tests took 11-16 s on a loaded 2-core
    machine.
    """
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    t, s = request_arrays(tokens, steps)
    if t.size == 1:
        point = float(t[0] / s[0])
        return point, point
    index = np.random.default_rng(seed).integers(0, t.size, size=(n_boot, t.size))
    boot_steps = s[index].sum(axis=1)
    ratios = t[index].sum(axis=1) / np.where(boot_steps > 0, boot_steps, np.nan)
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


# ------------------------------------------------- differences: the one delta-method place


@dataclass(frozen=True)
class Difference:
    """An estimated difference with its normal (delta-method) CI and p-values."""

    estimate: float
    se: float  # inf or nan when unknown
    ci: tuple[float, float] | None
    p_value: float  # two-sided, H0: no difference; nan when se is unknown
    p_drop: float  # one-sided, H0: no drop; small = evidence the estimate is below 0
    method: str


def judged(decision: str, passing: str, failing: str, inconclusive: str) -> Decision:
    """pass / fail of a three-way test's decision: `passing` passes, `failing` fails, and
    any other (inconclusive) is judged as the `inconclusive` setting says."""
    if decision == passing:
        return "pass"
    if decision == failing:
        return "fail"
    return "pass" if inconclusive == "pass" else "fail"


def wald(estimate: float, se: float, level: float = 0.95, method: str = "") -> Difference:
    """CI estimate +- z * se and normal p-values. The only place they are computed."""
    if not math.isfinite(se) or se < 0:
        return Difference(estimate, se, None, math.nan, math.nan, method)
    if se == 0.0:
        p_drop = 0.0 if estimate < 0 else 1.0 if estimate > 0 else 0.5
        return Difference(estimate, se, (estimate, estimate), float(estimate == 0), p_drop, method)
    half = _NORMAL.inv_cdf(0.5 + level / 2.0) * se
    z = estimate / se
    return Difference(estimate, se, (estimate - half, estimate + half),
                      2.0 * _NORMAL.cdf(-abs(z)), _NORMAL.cdf(z), method)  # fmt: skip


def ratio_difference(
    tokens_a: Sequence[float],
    steps_a: Sequence[float],
    tokens_b: Sequence[float],
    steps_b: Sequence[float],
    paired: bool,
    level: float = 0.95,
) -> Difference:
    """R_B - R_A. Paired (row i of both sides is one prompt): the per-prompt contributions
    are differenced, so prompt difficulty cancels. Independent: the variances add."""
    estimate = accept_length(tokens_b, steps_b) - accept_length(tokens_a, steps_a)
    if paired:
        if len(tokens_a) != len(tokens_b):
            raise ValueError("paired samples need the same prompts on both sides")
        d = _contributions(tokens_b, steps_b) - _contributions(tokens_a, steps_a)
        se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size >= 2 else math.inf
        return wald(estimate, se, level, "paired by question (delta method)")
    se = math.hypot(standard_error(tokens_a, steps_a), standard_error(tokens_b, steps_b))
    return wald(estimate, se, level, "independent samples (delta method)")


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error at most the level for any
    dependence between the tests): sorted ascending, p_(i) * (m - i + 1), made monotone,
    capped at 1. NaN (a test that could not be made) stays NaN and is not counted in m."""
    known = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(known)
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def difference_to_figure(
    tokens: Sequence[float], steps: Sequence[float], figure: float, run_is_b: bool,
    level: float = 0.95,
) -> Difference:
    """B - A where one side is a run and the other a fixed figure (a baseline without
    per-request data): only the run's uncertainty."""
    ratio = accept_length(tokens, steps)
    estimate = ratio - figure if run_is_b else figure - ratio
    return wald(estimate, standard_error(tokens, steps), level,
                "against a fixed figure: only the run's uncertainty (delta method)")


# --------------------------------------------- the gate's operating characteristic (power)


def gate_fail_probability(true_minus_floor: float, sd: float, n: int) -> float:
    """P(the fixed gate fails) = P(point estimate < floor), normal approximation."""
    if sd <= 0:
        return float(true_minus_floor < 0)
    return _NORMAL.cdf(-true_minus_floor * math.sqrt(n) / sd)


def fail_margin(sd: float, n: int, alpha: float) -> float:
    """How far above the floor the true value must be for P(gate fails) <= alpha."""
    return _NORMAL.inv_cdf(1 - alpha) * sd / math.sqrt(n)


def caught_drop(sd: float, n: int, beta: float) -> float:
    """How far below the floor the true value must be for P(gate fails) >= 1 - beta."""
    return _NORMAL.inv_cdf(1 - beta) * sd / math.sqrt(n)


def min_detectable_drop(sd: float, n: int, alpha: float = 0.05, beta: float = 0.2) -> float:
    """Smallest drop below a fixed reference figure that `harness compare --fail-on-drop`
    (one-sided, level alpha) detects with power 1 - beta: (z_{1-a} + z_{1-b}) sd / sqrt(n)."""
    return fail_margin(sd, n, alpha) + caught_drop(sd, n, beta)


def prompts_for_margin(sd: float, margin: float, alpha: float) -> int:
    """Prompts for the gate to fail a build `margin` above the floor with P <= alpha."""
    if margin <= 0:
        raise ValueError("margin must be positive")
    return math.ceil((_NORMAL.inv_cdf(1 - alpha) * sd / margin) ** 2)


@dataclass(frozen=True)
class PowerRow:
    n_prompts: int
    se: float
    fail_margin: float  # true - floor needed for P(fail) <= alpha
    caught_drop: float  # floor - true that fails with P >= 1 - beta
    min_detectable_drop: float  # compare --fail-on-drop against a fixed figure


DEFAULT_PROMPT_COUNTS = (25, 50, 100, 200, 400, 800, 1319)


def power_table(
    sd: float, alpha: float = 0.05, beta: float = 0.2,
    n_values: Sequence[int] = DEFAULT_PROMPT_COUNTS,
) -> list[PowerRow]:
    """The fixed gate's operating characteristic per prompt count (`harness power`)."""
    return [PowerRow(n, sd / math.sqrt(n), fail_margin(sd, n, alpha), caught_drop(sd, n, beta),
                     min_detectable_drop(sd, n, alpha, beta)) for n in n_values]  # fmt: skip


# -------------------------------------------------------------------- draft positions


def sum_histograms(histograms: Sequence[Sequence[int] | None]) -> list[int]:
    """Element-wise sum of accepted-draft histograms of different lengths (SGLang sizes
    each request's histogram by its largest accepted count)."""
    summed: list[int] = []
    for histogram in histograms:
        for accepted, count in enumerate(histogram or []):
            summed.extend([0] * (accepted + 1 - len(summed)))
            summed[accepted] += count
    return summed


def per_position_acceptance(histogram: Sequence[int]) -> list[float]:
    """P(draft position k is accepted), k = 1.., from a histogram of correct drafts per step.

    histogram[j] counts verify steps that accepted exactly j draft tokens; position k is
    accepted in the steps that accepted at least k.
    """
    total = sum(histogram)
    if total <= 0:
        return []
    tail = 0
    tails = []
    for count in reversed(histogram[1:]):
        tail += count
        tails.append(tail / total)
    return tails[::-1]


# ------------------------------------------- latency: statistics of values in clusters


QUANTILES = (0.5, 0.9, 0.99)
BOOTSTRAP_CELLS = 4_000_000  # replicate x value cells per batch (memory ~ 32 MB a batch)


@dataclass(frozen=True)
class ClusterStatistic:
    """A statistic of values grouped in clusters (prompts), with its bootstrap CI."""

    value: float
    ci: tuple[float, float] | None


def _weighted_quantile(sorted_values: np.ndarray, cumulative: np.ndarray, q: float
                       ) -> np.ndarray:
    """Per row of `cumulative` (running weights over `sorted_values`): the smallest value
    whose running weight reaches q of the row's total (numpy's "inverted_cdf")."""
    import numpy as np

    total = cumulative[:, -1]
    needed = np.maximum(np.ceil(q * total - 1e-9), 1.0)
    quantiles: np.ndarray = sorted_values[(cumulative >= needed[:, None]).argmax(axis=1)]
    return quantiles


def cluster_statistics(values: Sequence[float], clusters: Sequence[Hashable],
                       quantiles: Sequence[float] = QUANTILES, level: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> dict[str, ClusterStatistic]:
    """The mean and the `quantiles` of `values` ("mean", "p50", "p90", "p99"), each with a
    percentile-bootstrap CI that resamples whole clusters (a prompt's requests, and all
    the gaps of its requests, go together), as `bootstrap_ci` does for accept length.

    A quantile is numpy's "inverted_cdf": the smallest observed value with at least q of
    the values at or below it. An interval that misses its own point estimate (a quantile
    on few clusters can) is widened to hold it. Fewer than 2 clusters: no interval.
    """
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size == 0 or len(clusters) != v.size:
        raise ValueError("values and clusters must be 1-D, non-empty, of equal length")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite")
    _, member = np.unique(np.asarray([str(c) for c in clusters]), return_inverse=True)
    k = int(member.max()) + 1
    order = np.argsort(v, kind="stable")
    ordered, owner = v[order], member[order]
    ones = np.cumsum(np.ones((1, v.size)), axis=1)
    points = {"mean": float(v.mean())}
    for q in quantiles:
        points[_q_name(q)] = float(_weighted_quantile(ordered, ones, q)[0])
    if k < 2:
        return {name: ClusterStatistic(point, None) for name, point in points.items()}
    draws = np.random.default_rng(seed).integers(0, k, size=(n_boot, k))
    replicates: dict[str, list[np.ndarray]] = {name: [] for name in points}
    batch = max(1, BOOTSTRAP_CELLS // v.size)
    for start in range(0, n_boot, batch):
        chosen = draws[start:start + batch]
        rows = np.arange(chosen.shape[0])[:, None]
        weights = np.zeros((chosen.shape[0], k))
        np.add.at(weights, (np.broadcast_to(rows, chosen.shape), chosen), 1.0)
        per_value = weights[:, owner]
        cumulative = np.cumsum(per_value, axis=1)
        total = cumulative[:, -1]
        replicates["mean"].append((per_value * ordered).sum(axis=1) / total)
        for q in quantiles:
            replicates[_q_name(q)].append(_weighted_quantile(ordered, cumulative, q))
    tail = (1.0 - level) / 2.0
    out = {}
    for name, point in points.items():
        low, high = np.quantile(np.concatenate(replicates[name]), [tail, 1.0 - tail])
        out[name] = ClusterStatistic(point, (min(float(low), point), max(float(high), point)))
    return out


def _q_name(q: float) -> str:
    return f"p{round(q * 100):d}"


def ratio_bootstrap_ci(numerators: Sequence[Sequence[float]],
                       denominators: Sequence[Sequence[float]],
                       combine: Callable[[list[np.ndarray]], np.ndarray],
                       level: float = 0.95, n_boot: int = 2000,
                       seed: int = 0) -> tuple[float, float] | None:
    """Percentile-bootstrap CI over clusters of `combine(sums)`, where `sums` are the
    resampled sums of each numerator and denominator series (row i of every series is
    cluster i), e.g. a ratio of two ratios of sums. None with fewer than 2 clusters."""
    import numpy as np

    series = [np.asarray(s, dtype=float) for s in (*numerators, *denominators)]
    n = series[0].size
    if n < 2 or any(s.shape != (n,) for s in series):
        return None
    index = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    sums = [s[index].sum(axis=1) for s in series]
    # a replicate whose ratio is not a finite number (a zero sum, an overflow) is dropped
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        values = np.asarray(combine(sums), dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)
