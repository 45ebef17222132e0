"""All statistics of the harness: accept length, its uncertainty, comparisons, the gate's
operating characteristic and sequential stopping.

The unit of sampling is the prompt, not the decoding step: steps of one request share a
prompt and are strongly correlated, so every variance here is a cluster (prompt-level)
variance. Accept length is a ratio estimator, R = sum(n_i) / sum(steps_i), where n_i is
the numerator of the suite's metric (`numerator`); its variance comes from the
linearised residuals e_i = n_i - R * steps_i (delta method) or from resampling whole
prompts (bootstrap). Functions take `(tokens, steps)`: pass the metric's numerators as
`tokens`. See docs/statistics.md for the derivations and the measured error rates.

numpy is imported lazily, so CLI modules importing this one stay fast. Synthetic data
for tests and benchmarks lives in `harness.analysis.simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import numpy as np

_NORMAL = NormalDist()

# Per-prompt standard deviation (accept-length units) assumed by `harness power` when a
# suite has no recorded runs yet: an assumption for DFlash/EAGLE GSM8K answers at accept
# lengths of 3-6, to be replaced by recorded data as soon as it exists.
DEFAULT_PROMPT_SD = 0.75

Decision = Literal["pass", "fail"]
Metric = Literal["server_avg", "per_request"]


def normal_cdf(z: float) -> float:
    return _NORMAL.cdf(z)


def normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile by its Cornish-Fisher expansion in 1/df (Abramowitz and Stegun
    26.7.5); within 0.003 of the exact value for df >= 10 and p <= 0.999."""
    z = _NORMAL.inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


# ------------------------------------------------------------------ numerators and ratio


def numerator(row: Mapping[str, Any], metric: Metric) -> int | None:
    """A request row's numerator under `metric` (docs/statistics.md, "Two definitions").

    server_avg (SGLang's /server_info avg_spec_accept_length): correct drafts + verify
    steps; a v1 row without `correct_drafts` falls back to completion_tokens - 1 (the
    prefill token left out). per_request (meta_info spec_accept_length): completion_tokens.
    A request that ended with 0 verify steps counts in neither: the server counted no step
    of it, and SGLang gives it no spec fields (`_calculate_spec_decoding_metrics` writes
    them only when spec_verify_ct > 0), so its prefill token is in no pooled figure.
    None when the row lacks what the metric needs.
    """
    if metric not in ("server_avg", "per_request"):
        raise ValueError(f"unknown metric {metric!r} (server_avg or per_request)")
    tokens, drafts, steps = (row.get("completion_tokens"), row.get("correct_drafts"),
                             row.get("verify_steps"))
    if steps == 0:
        return 0  # ended at prefill: no verify step, no spec field, nothing pooled
    if metric == "per_request":
        return None if tokens is None else int(tokens)
    if drafts is not None and steps is not None:
        # each step makes its correct drafts and k more (SGLang's num_non_draft_tokens_per_req)
        return int(drafts) + int(row.get("non_draft_tokens_per_step") or 1) * int(steps)
    return None if tokens is None else max(int(tokens) - 1, 0)


def metric_pairs(rows: Sequence[Mapping[str, Any]], metric: Metric) -> tuple[list[int], list[int]]:
    """(numerators, verify steps) of the rows that have both and at least one verify step."""
    numerators, steps = [], []
    for row in rows:
        value, count = numerator(row, metric), row.get("verify_steps")
        if value is not None and count:
            numerators.append(value)
            steps.append(int(count))
    return numerators, steps


def _arrays(tokens: Sequence[float], steps: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
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
    t, s = _arrays(tokens, steps)
    return float(t.sum() / s.sum())


def _contributions(tokens: Sequence[float], steps: Sequence[float]) -> np.ndarray:
    """Per-prompt linearised contributions e_i / mean(steps), in accept-length units."""
    t, s = _arrays(tokens, steps)
    return (t - t.sum() / s.sum() * s) / s.mean()


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

    Each replicate draws n (tokens_i, steps_i) pairs with replacement and takes the
    ratio of sums. Kept over scipy's BCa after `benchmarks/bench_bootstrap.py` (coverage
    at n = 10..200; docs/statistics.md). Fixed seed: the same data gives the same interval.
    """
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    t, s = _arrays(tokens, steps)
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


# ------------------------------------------------------------------ sequential stopping


def skew_corrected_z(excess: np.ndarray) -> np.ndarray:
    """Hall's (1992) skewness-corrected t statistic for H0: mean = 0, along the last axis.

    With x = mean/sd and gamma the sample skewness, sqrt(n) * (x + gamma x^2 / 3 +
    gamma^2 x^3 / 27 + gamma / (6 n)): monotone in x, and its tails match Student's t
    far better than the plain t when the data are skewed. +-inf where sd = 0.
    """
    import numpy as np

    n = excess.shape[-1]
    mean = excess.mean(axis=-1)
    sd = excess.std(axis=-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = mean / sd
        gamma = ((excess - mean[..., None]) ** 3).mean(axis=-1) / sd**3
        z = np.sqrt(n) * (x + gamma * x**2 / 3 + gamma**2 * x**3 / 27 + gamma / (6 * n))
        return np.where(sd > 0, z, np.sign(mean) * np.inf)


@dataclass(frozen=True)
class SequentialRule:
    """Stop a run at a planned look once its verdict against `floor` is settled.

    Looks are at every `wave` requests and at `max_n` (`looks`); the driver sends exactly
    up to the next look, waits for all of it, and calls `decide` with those requests in
    submission order (at any other count `decide` returns None). At an early look the
    statistic is the skew-corrected t (`skew_corrected_z`) of X_i = tokens_i - floor *
    steps_i, whose mean is > 0 exactly when the true ratio is above the floor:
    - "fail" when it is below -t_{1 - alpha/K}: P(an early "fail" | true >= floor) <= alpha;
    - "pass" when it is above t_{1 - beta/K}: P(an early "pass" | true <= floor) <= beta;
      (K early looks, Bonferroni: the bound holds however the looks are correlated);
    - at `max_n` the fixed protocol's verdict (point estimate vs floor), whose own error
      rates are the gate's operating characteristic (`gate_fail_probability`: about 50%
      at the floor itself). alpha and beta bound only what stopping early adds.
    """

    floor: float
    alpha: float = 0.05
    beta: float = 0.2
    max_n: int = 200
    wave: int = 50
    strict: bool = False  # True: pass needs the figure > floor (SGLang's `>`)

    def __post_init__(self) -> None:
        if self.wave < 20 or self.max_n < 1:
            raise ValueError("wave must be >= 20 requests (the t approximation) and max_n >= 1")
        for name in ("alpha", "beta"):
            if not 0.0 < getattr(self, name) < 0.5:
                raise ValueError(f"{name} must be in (0, 0.5)")

    def looks(self, max_n: int | None = None) -> list[int]:
        """Cumulative request counts at which `decide` is called; the last is max_n."""
        if max_n is not None and max_n != self.max_n:
            raise ValueError(f"this rule was planned for {self.max_n} requests, not {max_n}")
        return [*range(self.wave, self.max_n, self.wave), self.max_n]

    def critical_values(self, n: int) -> tuple[float, float]:
        """(fail, pass) thresholds of the statistic at an early look of n requests."""
        early = max(1, len(self.looks()) - 1)
        return t_quantile(1 - self.alpha / early, n - 1), t_quantile(1 - self.beta / early, n - 1)

    def fixed_verdict(self, tokens: Sequence[float], steps: Sequence[float]) -> Decision:
        estimate = accept_length(tokens, steps)
        above = estimate > self.floor if self.strict else estimate >= self.floor
        return "pass" if above else "fail"

    def decide(self, tokens: Sequence[float], steps: Sequence[float]) -> Decision | None:
        n = len(tokens)
        if n >= self.max_n:
            return self.fixed_verdict(tokens[: self.max_n], steps[: self.max_n])
        if n not in self.looks():
            return None  # not a planned look: the error rates hold only at the looks
        t, s = _arrays(tokens, steps)
        z = float(skew_corrected_z(t - self.floor * s))
        fail_at, pass_at = self.critical_values(n)
        if z < -fail_at:
            return "fail"
        if z > pass_at:
            return "pass"
        return None

    def first_decision(
        self, tokens: Sequence[float], steps: Sequence[float]
    ) -> tuple[Decision, int]:
        """Replay the looks on max_n requests: (verdict, requests used)."""
        if len(tokens) < self.max_n:
            raise ValueError(f"need {self.max_n} requests to replay, got {len(tokens)}")
        for look in self.looks():
            verdict = self.decide(tokens[:look], steps[:look])
            if verdict is not None:
                return verdict, look
        raise AssertionError("the last look always decides")  # pragma: no cover

    def operating_characteristic(
        self, true_minus_floor: float, sd: float, reps: int = 4000, seed: int = 0
    ) -> tuple[float, float]:
        """(P(fail), expected requests) for per-prompt values N(true - floor, sd^2), by
        simulation (normal data: no skew). For `harness power`."""
        import numpy as np

        excess = np.random.default_rng(seed).normal(true_minus_floor, sd, (reps, self.max_n))
        verdict = np.zeros(reps)  # -1 fail, +1 pass, 0 open
        used = np.full(reps, float(self.max_n))
        for look in self.looks()[:-1]:
            z = skew_corrected_z(excess[:, :look])
            fail_at, pass_at = self.critical_values(look)
            now = (verdict == 0) & ((z < -fail_at) | (z > pass_at))
            verdict[now] = np.where(z[now] < 0, -1, 1)
            used[now] = look
        mean = excess.mean(axis=1)
        final_pass = mean > 0 if self.strict else mean >= 0
        verdict[verdict == 0] = np.where(final_pass, 1, -1)[verdict == 0]
        return float(np.mean(verdict < 0)), float(used.mean())


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
