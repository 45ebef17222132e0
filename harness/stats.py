"""All statistics of the harness: accept length, its uncertainty, tests, power, stopping.

The unit of sampling is the prompt, not the decoding step: steps of one request share
a prompt and are strongly correlated, so every variance here is a cluster (prompt-level)
variance. Accept length is a ratio estimator, R = sum(tokens_i) / sum(steps_i); its
variance comes from the linearised residuals e_i = tokens_i - R * steps_i (delta method),
or from resampling whole prompts (bootstrap). See docs/statistics.md for the derivations
and the choices made.

Only numpy (imported lazily, so that CLI modules importing this one stay fast) and the
standard library's `statistics.NormalDist` are used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

_NORMAL = NormalDist()

# Per-prompt standard deviation (accept-length units) assumed by `harness power` when a
# suite has no recorded runs yet. A typical DFlash/EAGLE GSM8K spread of per-request
# accept length around a mean of 3-6 tokens; replace by recorded data as soon as it exists.
DEFAULT_PROMPT_SD = 0.75

Decision = Literal["pass", "fail"]


def normal_cdf(z: float) -> float:
    return _NORMAL.cdf(z)


def normal_quantile(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def _arrays(tokens: Sequence[int], steps: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
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


def accept_length(tokens: Sequence[int], steps: Sequence[int]) -> float:
    """Sum of completion tokens over sum of verify steps (exact; not a mean of ratios)."""
    t, s = _arrays(tokens, steps)
    return float(t.sum() / s.sum())


def prompt_sd(tokens: Sequence[int], steps: Sequence[int]) -> float:
    """Per-prompt standard deviation of the ratio's linearised contribution.

    sd(e_i) / mean(steps) with e_i = tokens_i - R * steps_i: the quantity whose square
    over n is the delta-method variance of R. In accept-length units, so it plugs straight
    into `min_detectable_drop`.
    """
    t, s = _arrays(tokens, steps)
    if t.size < 2:
        raise ValueError("need at least 2 prompts for a spread")
    ratio = t.sum() / s.sum()
    residuals = t - ratio * s
    return float(residuals.std(ddof=1) / s.mean())


def standard_error(tokens: Sequence[int], steps: Sequence[int]) -> float:
    """Delta-method (cluster) standard error of the ratio estimator."""
    t, _ = _arrays(tokens, steps)
    return prompt_sd(tokens, steps) / math.sqrt(t.size)


def bootstrap_ci(
    tokens: Sequence[int],
    steps: Sequence[int],
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the accept length, resampling whole prompts.

    Each replicate draws n (tokens_i, steps_i) pairs with replacement and takes the ratio
    of sums. Percentile rather than BCa: the ratio's sampling distribution is close to
    symmetric at the prompt counts we use (n >= 30), coverage tests show it near nominal,
    and it needs no jackknife. Fixed seed: the same data always gives the same interval.
    """
    import numpy as np

    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    t, s = _arrays(tokens, steps)
    if t.size == 1:
        point = float(t[0] / s[0])
        return point, point
    rng = np.random.default_rng(seed)
    index = rng.integers(0, t.size, size=(n_boot, t.size))
    boot_steps = s[index].sum(axis=1)
    ratios = t[index].sum(axis=1) / np.where(boot_steps > 0, boot_steps, np.nan)
    tail = (1.0 - level) / 2.0
    low, high = np.nanquantile(ratios, [tail, 1.0 - tail])
    return float(low), float(high)


@dataclass(frozen=True)
class TestResult:
    """A one-sided test for a drop below a reference accept length."""

    estimate: float
    reference: float
    standard_error: float
    z: float
    p_value: float  # small = evidence of a drop
    alpha: float
    n: int

    @property
    def drop_detected(self) -> bool:
        return self.p_value < self.alpha


def one_sided_test(
    tokens: Sequence[int],
    steps: Sequence[int],
    reference: float,
    alpha: float = 0.05,
) -> TestResult:
    """H0: true accept length >= reference (no drop); H1: it is lower.

    z = (R - reference) / se with the delta-method cluster standard error; the p-value is
    Phi(z). A normal reference distribution: with n >= 30 prompts the ratio is close to
    normal and the false-alarm rate stays near alpha (tests/analysis check this).
    """
    t, _ = _arrays(tokens, steps)
    estimate = accept_length(tokens, steps)
    se = standard_error(tokens, steps) if t.size >= 2 else math.inf
    if se == 0.0:
        z = math.inf if estimate >= reference else -math.inf
    else:
        z = (estimate - reference) / se
    p_value = _NORMAL.cdf(z) if math.isfinite(z) else (1.0 if z > 0 else 0.0)
    return TestResult(estimate, reference, se, z, p_value, alpha, int(t.size))


def difference_test(
    tokens_a: Sequence[int],
    steps_a: Sequence[int],
    tokens_b: Sequence[int],
    steps_b: Sequence[int],
    level: float = 0.95,
) -> tuple[float, tuple[float, float], float]:
    """B minus A for two independent sets of prompts: (difference, CI, two-sided p-value).

    Independent samples, so the variances add (delta method for each ratio).
    """
    diff = accept_length(tokens_b, steps_b) - accept_length(tokens_a, steps_a)
    se = math.hypot(_safe_se(tokens_a, steps_a), _safe_se(tokens_b, steps_b))
    if se == 0.0 or not math.isfinite(se):
        return diff, (diff, diff) if se == 0.0 else (-math.inf, math.inf), math.nan
    half = _NORMAL.inv_cdf(0.5 + level / 2.0) * se
    p_value = 2.0 * _NORMAL.cdf(-abs(diff) / se)
    return diff, (diff - half, diff + half), p_value


def _safe_se(tokens: Sequence[int], steps: Sequence[int]) -> float:
    return standard_error(tokens, steps) if len(tokens) >= 2 else math.inf


def _sd_from(per_prompt_sd_or_samples: float | Sequence[float] | tuple) -> float:
    """A float is taken as the per-prompt sd; a (tokens, steps) pair or per-prompt
    accept lengths are reduced to one."""
    import numpy as np

    if isinstance(per_prompt_sd_or_samples, int | float):
        return float(per_prompt_sd_or_samples)
    if isinstance(per_prompt_sd_or_samples, tuple) and len(per_prompt_sd_or_samples) == 2:
        return prompt_sd(*per_prompt_sd_or_samples)
    values = np.asarray(per_prompt_sd_or_samples, dtype=float)
    if values.size < 2:
        raise ValueError("need at least 2 per-prompt values for a spread")
    return float(values.std(ddof=1))


def min_detectable_drop(
    per_prompt_sd_or_samples: float | Sequence[float] | tuple,
    n_prompts: int,
    alpha: float = 0.05,
    beta: float = 0.2,
) -> float:
    """Smallest true drop the one-sided test detects with power 1 - beta at level alpha.

    (z_{1-alpha} + z_{1-beta}) * sd / sqrt(n): the form of TensorRT-LLM's accuracy tests.
    """
    if n_prompts < 1:
        raise ValueError("n_prompts must be >= 1")
    sd = _sd_from(per_prompt_sd_or_samples)
    return (_NORMAL.inv_cdf(1 - alpha) + _NORMAL.inv_cdf(1 - beta)) * sd / math.sqrt(n_prompts)


def prompts_needed(sd: float, drop: float, alpha: float = 0.05, beta: float = 0.2) -> int:
    """Prompts for the one-sided test to detect `drop` with power 1 - beta."""
    if drop <= 0:
        raise ValueError("drop must be positive")
    z = _NORMAL.inv_cdf(1 - alpha) + _NORMAL.inv_cdf(1 - beta)
    return math.ceil((z * sd / drop) ** 2)


@dataclass(frozen=True)
class PowerRow:
    n_prompts: int
    min_detectable_drop: float
    relative_drop: float | None  # as a fraction of the reference, if one is given


DEFAULT_PROMPT_COUNTS = (25, 50, 100, 200, 400, 800, 1319)


def power_table(
    sd: float,
    alpha: float = 0.05,
    beta: float = 0.2,
    n_values: Sequence[int] = DEFAULT_PROMPT_COUNTS,
    reference: float | None = None,
) -> list[PowerRow]:
    """Smallest detectable drop for each prompt count (the `harness power` table)."""
    rows = []
    for n in n_values:
        mdd = min_detectable_drop(sd, n, alpha, beta)
        rows.append(PowerRow(n, mdd, mdd / reference if reference else None))
    return rows


def confidence_sequence_radius(n: int, sd: float, alpha: float, target_n: int) -> float:
    """Half-width of an asymptotic confidence sequence for a mean, valid at every n at once.

    Robbins' normal-mixture boundary in the form of Waudby-Smith et al. (2021),
    "Time-uniform central limit theory and asymptotic confidence sequences", eq. (2):
    sqrt(2 (n s^2 r^2 + 1) / (n^2 r^2) * log(sqrt(n s^2 r^2 + 1) / alpha)), with the
    mixing parameter r chosen to make the boundary tightest at `target_n`. Two-sided at
    level alpha, hence conservative when used for one side.
    """
    if n < 1 or sd <= 0:
        return math.inf if sd > 0 or n < 1 else 0.0
    tightest = -2.0 * math.log(alpha) + math.log(-2.0 * math.log(alpha) + 1.0)
    a = tightest * n / target_n  # = n * sd^2 * r^2 with r^2 = tightest / (target_n * sd^2)
    return sd * math.sqrt(2.0 * (a + 1.0) / (n * a) * math.log(math.sqrt(a + 1.0) / alpha))


@dataclass(frozen=True)
class SequentialRule:
    """Stop a run as soon as its verdict against `floor` is settled.

    Works on the mean of X_i = tokens_i - floor * steps_i, which is > 0 exactly when the
    true accept length is above the floor (steps are positive), so no ratio linearisation
    is needed. An asymptotic confidence sequence (see `confidence_sequence_radius`) keeps
    its error rates however often it is looked at, so `decide` may be called after every
    request:
    - "fail" when the upper bound at level alpha is below 0 (a false alarm, failing a
      build that truly meets the floor, has probability <= alpha);
    - "pass" when the lower bound at level beta is above 0 (passing a build that is truly
      below has probability <= beta);
    - at `max_n` requests, the fixed protocol's verdict (point estimate vs floor);
    - otherwise None: keep going. Nothing is decided before `min_n` requests, because the
      sd estimate (and the CLT behind the boundary) needs some prompts.
    Feed requests in submission order (the completed prefix), not completion order:
    short requests finish first under concurrency and would bias the estimate.
    """

    floor: float
    alpha: float = 0.05
    beta: float = 0.2
    min_n: int = 30
    max_n: int | None = 200
    strict: bool = False  # True: pass needs accept length > floor (SGLang's `>`)

    @property
    def target_n(self) -> int:
        return max(self.min_n, (self.max_n or 200) // 2)

    def decide(self, tokens_so_far: Sequence[int], steps_so_far: Sequence[int]) -> Decision | None:

        n = len(tokens_so_far)
        if self.max_n is not None and n >= self.max_n:
            estimate = accept_length(tokens_so_far[: self.max_n], steps_so_far[: self.max_n])
            above = estimate > self.floor if self.strict else estimate >= self.floor
            return "pass" if above else "fail"
        if n < max(self.min_n, 2):
            return None
        t, s = _arrays(tokens_so_far, steps_so_far)
        excess = t - self.floor * s
        mean = float(excess.mean())
        sd = float(excess.std(ddof=1))
        if sd == 0.0:
            return "pass" if mean > 0 or (mean == 0 and not self.strict) else "fail"
        if mean + confidence_sequence_radius(n, sd, self.alpha, self.target_n) < 0:
            return "fail"
        if mean - confidence_sequence_radius(n, sd, self.beta, self.target_n) > 0:
            return "pass"
        return None

    def first_decision(
        self, tokens: Sequence[int], steps: Sequence[int]
    ) -> tuple[Decision | None, int]:
        """Replay requests in order: (verdict, requests used). Used by benchmarks."""
        for n in range(max(self.min_n, 2), len(tokens) + 1):
            verdict = self.decide(tokens[:n], steps[:n])
            if verdict is not None:
                return verdict, n
        return None, len(tokens)


def simulate_prompts(
    n: int,
    accept_length: float,
    prompt_sd: float = DEFAULT_PROMPT_SD,
    steps_range: tuple[int, int] = (20, 150),
    seed: int | np.random.Generator = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic per-request (tokens, steps) with known truth, for tests and benchmarks.

    Each prompt gets its own accept length a_i = 1 + (accept_length - 1) * Gamma(k, 1/k)
    (so mean accept_length, sd prompt_sd: the prompt-level variance of real runs), a
    verify-step count independent of a_i, and tokens = steps + Poisson(steps * (a_i - 1))
    (step-level noise). E[tokens] / E[steps] = accept_length exactly.
    """
    import numpy as np

    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if accept_length <= 1.0:
        raise ValueError("accept_length must exceed 1")
    shape = ((accept_length - 1.0) / prompt_sd) ** 2
    per_prompt = 1.0 + (accept_length - 1.0) * rng.gamma(shape, 1.0 / shape, size=n)
    steps = rng.integers(steps_range[0], steps_range[1] + 1, size=n)
    tokens = steps + rng.poisson(steps * (per_prompt - 1.0))
    return tokens.astype(np.int64), steps.astype(np.int64)


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


def paired_difference_test(
    tokens_a: Sequence[int],
    steps_a: Sequence[int],
    tokens_b: Sequence[int],
    steps_b: Sequence[int],
    level: float = 0.95,
) -> tuple[float, tuple[float, float], float]:
    """B minus A on the same prompts (row i of A and B is one prompt): (diff, CI, p-value).

    Delta method on the paired linearised contributions
    d_i = e^B_i / mean(s^B) - e^A_i / mean(s^A): prompt difficulty cancels, so the same
    prompt set detects smaller differences than two independent samples would.
    """
    ta, sa = _arrays(tokens_a, steps_a)
    tb, sb = _arrays(tokens_b, steps_b)
    if ta.size != tb.size:
        raise ValueError("paired samples need the same prompts on both sides")
    ra, rb = ta.sum() / sa.sum(), tb.sum() / sb.sum()
    contributions = (tb - rb * sb) / sb.mean() - (ta - ra * sa) / sa.mean()
    diff = float(rb - ra)
    if ta.size < 2:
        return diff, (-math.inf, math.inf), math.nan
    se = float(contributions.std(ddof=1) / math.sqrt(ta.size))
    if se == 0.0:
        return diff, (diff, diff), (1.0 if diff == 0 else 0.0)
    half = _NORMAL.inv_cdf(0.5 + level / 2.0) * se
    return diff, (diff - half, diff + half), 2.0 * _NORMAL.cdf(-abs(diff) / se)
