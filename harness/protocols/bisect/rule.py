"""The statistics of a bisect: is a commit like GOOD or like BAD?

The endpoints come first. GOOD and BAD each answer the same M prompts; the paired
difference Δ = R_BAD - R_GOOD (`stats.ratio_difference`, paired by question, in the
suite's metric) must be significant at level alpha (two-sided), else there is nothing
to bisect. Both endpoints use all M prompts: GOOD is every step's reference, and a
BAD stopped as soon as it looked different would overstate |Δ| (the winner's curse),
which places the threshold below.

A step asks its commit C the same prompts in the same order and compares it with
GOOD prompt by prompt. Under the bisect's assumption (one change: every commit is like
GOOD or like BAD) the classification is a test between two simple hypotheses about
D = R_C - R_GOOD: D = 0 ("good") and D = Δ ("bad"). Wald's sequential probability ratio
test is the test for that, with the fewest prompts on average. For a normal paired mean
with standard error se_n its log-likelihood ratio after n prompts is

    llr_n = Δ (D_n - Δ/2) / se_n^2

(D_n, se_n: the paired difference and its delta-method standard error on the first n
prompts, `stats.ratio_difference`). It is looked at only at fixed counts (every `wave`
prompts, as `stopping.SequentialRule` does):
- "bad" when llr_n >= log((1 - alpha) / alpha), "good" when llr_n <= -log((1 - alpha) /
  alpha);
- neither at the last look: "undecided" (the driver may extend the prompts, then passes
  the commit over like `git bisect skip`).

Error rates, per step:
- a commit like GOOD is called "bad", or one like BAD called "good", with probability at
  most about alpha (Wald's bounds, alpha / (1 - alpha) exactly for continuous
  monitoring of i.i.d. normal data; looking only every `wave` prompts makes the test
  more conservative, and the normal approximation needs n >= 20). Measured by
  simulation in benchmarks/bench_bisect.py ("error rates" table), far below alpha
  across effects and pairings. A bisect of s steps goes wrong with probability at most
  about s * alpha, which is why the command's default alpha is 0.01.
- a commit in between (a second, partial change) can go either way: the bound assumes
  the bisect's model. Every step's paired difference is recorded and plotted, so such
  a commit shows.
- Δ is taken as known: it is measured on all prompts of both endpoints and must be
  significant, so GOOD and BAD are several standard errors apart.
An extension (a second test of an undecided commit on more prompts) spends another
alpha: at most 2 alpha for that commit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.metrics import stats

StepVerdict = Literal["good", "bad", "undecided"]


@dataclass(frozen=True)
class PairedLook:
    """The paired comparison of a commit with GOOD on the first n prompts."""

    n: int
    difference: float  # R_C - R_GOOD
    se: float
    llr: float  # Δ (difference - Δ/2) / se^2: > 0 leans to BAD, < 0 to GOOD
    threshold: float  # log((1 - alpha) / alpha)


def endpoint_difference(good: tuple[Sequence[float], Sequence[float]],
                        bad: tuple[Sequence[float], Sequence[float]],
                        alpha: float) -> stats.Difference:
    """R_BAD - R_GOOD paired by prompt, with its 1 - alpha CI; significant when the
    two-sided p-value is below alpha."""
    return stats.ratio_difference(good[0], good[1], bad[0], bad[1], paired=True,
                                  level=1.0 - alpha)


def significant(difference: stats.Difference, alpha: float) -> bool:
    return not math.isnan(difference.p_value) and difference.p_value < alpha


@dataclass(frozen=True)
class StepRule:
    """Classify a commit against GOOD's per-prompt results (see the module docstring).

    `good_tokens`/`good_steps`: GOOD's numerators and verify steps, prompt by prompt in
    the order the step sends them. `effect`: Δ = R_BAD - R_GOOD (nonzero). Looks at every
    `wave` prompts and at `max_n`; `after` > 0 drops the looks at or before it (an
    extension does not look again at counts already looked at).
    """

    good_tokens: tuple[float, ...]
    good_steps: tuple[float, ...]
    effect: float
    alpha: float = 0.05
    max_n: int = 200
    wave: int = 50
    after: int = 0

    def __post_init__(self) -> None:
        if self.effect == 0 or not math.isfinite(self.effect):
            raise ValueError("the effect (BAD - GOOD) must be a nonzero number")
        if not 0.0 < self.alpha < 0.5:
            raise ValueError("alpha must be in (0, 0.5)")
        if self.wave < 20:
            raise ValueError("wave must be >= 20 prompts (the t approximation)")
        if len(self.good_tokens) < self.max_n or len(self.good_steps) < self.max_n:
            raise ValueError(f"GOOD has {len(self.good_tokens)} prompts; the step needs "
                             f"{self.max_n}")
        if not self.looks():
            raise ValueError(f"no look after {self.after} prompts up to {self.max_n}")

    def looks(self) -> list[int]:
        """Prompt counts at which `decide` may settle; the last is max_n."""
        planned = [*range(self.wave, self.max_n, self.wave), self.max_n]
        return [n for n in planned if n > self.after]

    @property
    def threshold(self) -> float:
        """Wald's boundary for symmetric error rates alpha."""
        return math.log((1.0 - self.alpha) / self.alpha)

    def look(self, tokens: Sequence[float], steps: Sequence[float]) -> PairedLook:
        """The paired statistic on the first len(tokens) prompts."""
        n = len(tokens)
        if n < 2:
            raise ValueError("need at least 2 prompts for a paired comparison")
        difference = stats.ratio_difference(self.good_tokens[:n], self.good_steps[:n],
                                            tokens, steps, paired=True)
        lean = self.effect * (difference.estimate - self.effect / 2)
        if difference.se > 0 and math.isfinite(difference.se):
            llr = lean / difference.se**2
        else:  # identical contributions (a deterministic engine): the side decides
            llr = math.copysign(math.inf, lean) if lean else 0.0
        return PairedLook(n, difference.estimate, difference.se, llr, self.threshold)

    def decide(self, tokens: Sequence[float], steps: Sequence[float]) -> StepVerdict | None:
        """"good"/"bad" when settled at a look, None at an earlier count or an unsettled
        look, "undecided" at max_n when not settled."""
        n = len(tokens)
        if n not in self.looks():
            return None
        seen = self.look(tokens, steps)
        if seen.llr >= seen.threshold:
            return "bad"
        if seen.llr <= -seen.threshold:
            return "good"
        return "undecided" if n >= self.max_n else None
