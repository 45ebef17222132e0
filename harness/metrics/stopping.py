"""Sequential stopping: the rule that ends a run at a planned look once its verdict
against a floor is settled (`SequentialRule`), on the skew-corrected t statistic of the
per-prompt excess over the floor (`skew_corrected_z`). Ratio and interval statistics are
`harness.metrics.stats`'; docs/statistics.md derives the error rates.

numpy is imported lazily, as in `stats`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.metrics.floor_checks import meets
from harness.metrics.stats import Decision, accept_length, request_arrays, t_quantile

if TYPE_CHECKING:
    import numpy as np


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
        statistic: np.ndarray = np.where(sd > 0, z, np.sign(mean) * np.inf)
        return statistic


def in_flight_limit(sent: int, next_look: int | None, concurrency: int,
                    past_look: int | None) -> int:
    """How many requests may run when prompt `sent` (0-based) goes out: `concurrency`,
    but past the next look (`sent >= next_look`) at most `past_look` (the suite's
    workload.sequential_in_flight; None: every slot). The driver's dispatch
    (`harness.run.dispatch`) and its replay (`harness.analysis.simulate.replay_batched`)
    both ask here."""
    if past_look is None or next_look is None or sent < next_look:
        return concurrency
    return min(past_look, concurrency)


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
        return "pass" if meets(accept_length(tokens, steps), self.floor, self.strict) else "fail"

    def decide(self, tokens: Sequence[float], steps: Sequence[float]) -> Decision | None:
        n = len(tokens)
        if n >= self.max_n:
            return self.fixed_verdict(tokens[: self.max_n], steps[: self.max_n])
        if n not in self.looks():
            return None  # not a planned look: the error rates hold only at the looks
        t, s = request_arrays(tokens, steps)
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
        final_pass = meets(mean, 0.0, self.strict)  # elementwise: the fixed gate per run
        verdict[verdict == 0] = np.where(final_pass, 1, -1)[verdict == 0]
        return float(np.mean(verdict < 0)), float(used.mean())
