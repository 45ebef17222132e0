"""The paired relative gate: is build B not worse than reference build A, within a tolerance?

Both builds answer the same questions; each question is one (numerator, verify steps)
pair per side (`breakdown.question_pairs`), in the definition of the floors. The gate is
a one-sided non-inferiority test on the margin

    M = (R_B - R_A) + delta,   delta = r R_A (relative tolerance r) or d (absolute)

which is > 0 exactly when B is above A minus the tolerance. M's standard error is the
paired delta-method one (`stats.ratio_difference(paired=True)`): per question the
linearised contributions of both sides are differenced, so question difficulty cancels.
A relative delta is taken at the measured R_A (plug-in): its own uncertainty is r times
A's standard error, 2% of it at r = 0.02, and leaving it out is what makes identical
answers a certain pass. With n questions and the one-sided level alpha (t quantile,
n - 1 degrees of freedom):

- "not worse" (pass): the lower bound M - t se > 0: P(pass | B worse by exactly the
  tolerance) <= alpha (the false-pass rate);
- "worse" (fail): the upper bound M + t se < 0: B is significantly worse than A by more
  than the tolerance;
- "inconclusive": neither; judged by the gate's `inconclusive` setting ("fail" by
  default: the new build has to show it is not worse; "pass" lets it through) and
  always reported as inconclusive.

A pair with zero spread (identical greedy builds give identical answers) has se = 0: the
sign of M decides with certainty (identical answers: M = d or r R_A > 0, a pass); a
near-zero spread with a drop smaller than the tolerance has a lower bound above 0: a
pass. Sequential looks (`PairedRule`) spend alpha over the looks (Lan-DeMets,
`harness.metrics.spending`): every look together keeps the stated alpha. See
docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from harness.metrics import spending as alpha_spending
from harness.metrics import stats

if TYPE_CHECKING:
    from harness.suite.gate import Gate

Decision = Literal["not_worse", "worse", "inconclusive"]
MIN_QUESTIONS = 2


@dataclass(frozen=True)
class Tolerance:
    """The tolerated drop of B below A: a share of A (relative) or accept-length units."""

    drop: float
    relative: bool
    metric: str

    def __post_init__(self) -> None:
        if not self.drop > 0 or not math.isfinite(self.drop):
            raise ValueError(f"the tolerated drop must be positive, got {self.drop}")
        if self.relative and self.drop >= 1:
            raise ValueError(f"a relative drop must be below 1, got {self.drop}")

    def threshold(self, reference: float) -> float:
        """The tolerated drop in accept-length units for a reference figure."""
        return self.drop * reference if self.relative else self.drop

    def describe(self) -> str:
        shown = f"{self.drop:.1%} of A" if self.relative else f"{self.drop:g} absolute"
        return f"{shown} ({self.metric})"


@dataclass(frozen=True)
class PairedResult:
    """The gate's finding on n paired questions."""

    decision: Decision
    n: int
    a: float  # R_A on the paired questions
    b: float  # R_B
    difference: float  # R_B - R_A
    difference_ci: tuple[float, float] | None  # two-sided, level 1 - 2 alpha
    relative_change: float  # (R_B - R_A) / R_A
    tolerated_drop: float  # in accept-length units at this R_A
    margin: float  # M = R_B - R_A + tolerated drop: > 0 means above the tolerance
    margin_se: float
    margin_sd: float  # per-question sd of the margin's contributions (harness power)
    lower: float  # one-sided 1 - alpha bounds of M
    upper: float
    alpha: float
    level: float  # of difference_ci
    tolerance: str  # Tolerance.describe()

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def paired_test(a: tuple[Sequence[float], Sequence[float]],
                b: tuple[Sequence[float], Sequence[float]], tolerance: Tolerance,
                alpha: float = 0.05) -> PairedResult:
    """The non-inferiority test of B against A; row i of both sides is one question."""
    tokens_a, steps_a = a
    tokens_b, steps_b = b
    n = len(tokens_a)
    if n != len(tokens_b):
        raise ValueError("paired samples need the same questions on both sides")
    if n < MIN_QUESTIONS:
        raise ValueError(f"need at least {MIN_QUESTIONS} paired questions, got {n}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    ra = stats.accept_length(tokens_a, steps_a)
    rb = stats.accept_length(tokens_b, steps_b)
    difference = rb - ra
    tolerated = tolerance.threshold(ra)
    margin = difference + tolerated
    paired = stats.ratio_difference(tokens_a, steps_a, tokens_b, steps_b, paired=True)
    margin_se = paired.se
    margin_sd = margin_se * math.sqrt(n)
    t = stats.t_quantile(1.0 - alpha, max(n - 1, 1))
    lower, upper = margin - t * margin_se, margin + t * margin_se
    if lower > 0:  # se = 0 (identical answers) decides by the sign alone
        decision: Decision = "not_worse"
    elif upper < 0:
        decision = "worse"
    else:
        decision = "inconclusive"
    level = 1.0 - 2.0 * alpha
    return PairedResult(
        decision=decision, n=n, a=ra, b=rb, difference=difference,
        difference_ci=(difference - t * margin_se, difference + t * margin_se),
        relative_change=difference / ra if ra else math.nan,
        tolerated_drop=tolerated, margin=margin, margin_se=margin_se,
        margin_sd=margin_sd, lower=lower, upper=upper, alpha=alpha, level=level,
        tolerance=tolerance.describe())


def status_of(decision: Decision, inconclusive: str) -> str:
    """pass / fail: an inconclusive finding is judged as the gate's setting says."""
    return stats.judged(decision, "not_worse", "worse", inconclusive)


def describe(result: PairedResult, status: str) -> str:
    """One line for the verdict's reasons."""
    ci = result.difference_ci
    shown = (f"paired vs A on {result.n} questions: B - A = {result.difference:+.4f} "
             f"({result.relative_change:+.2%}; {result.level:.0%} CI "
             f"{ci[0]:+.3f}..{ci[1]:+.3f})" if ci else "")
    tolerated = f"tolerated drop {result.tolerated_drop:.4f} = {result.tolerance}"
    words = {"not_worse": "B is shown not worse than A beyond the tolerance",
             "worse": "B is worse than A by more than the tolerance",
             "inconclusive": f"inconclusive (judged {status.upper()} by the gate's "
                             "`inconclusive` setting)"}
    return (f"{shown}, {tolerated}: {words[result.decision]} "
            f"(one-sided alpha {result.alpha:g})")


# ------------------------------------------------------------------------ power


def pass_probabilities(true_margin: float, sd: float, n: int, alpha: float
                       ) -> tuple[float, float]:
    """(P(not worse), P(worse)) for a true margin M and per-question margin sd, normal
    approximation with the t threshold the test uses."""
    t = stats.t_quantile(1.0 - alpha, max(n - 1, 1))
    if sd <= 0:
        return float(true_margin > 0), float(true_margin < 0)
    z = true_margin * math.sqrt(n) / sd
    return stats.normal_cdf(z - t), stats.normal_cdf(-z - t)


def questions_for_power(sd: float, tolerated: float, alpha: float, beta: float) -> int:
    """Questions for P(not worse | equal builds) >= 1 - beta: ((z_a + z_b) sd / drop)^2."""
    if sd <= 0:
        return MIN_QUESTIONS
    z = stats.normal_quantile(1 - alpha) + stats.normal_quantile(1 - beta)
    return max(MIN_QUESTIONS, math.ceil((z * sd / tolerated) ** 2))


# ------------------------------------------------------------------- sequential


@dataclass(frozen=True)
class PairedRule:
    """Sequential stopping on the paired test, with its alpha spent, not reused: looks
    every `wave` questions and at `max_n` (information fraction n / max_n); look k tests
    at the nominal level of the Lan-DeMets group-sequential boundary c_k
    (`harness.metrics.spending`, O'Brien-Fleming type by default), on both sides (not
    worse: M's t statistic above c_k; worse: below -c_k; each boundary non-binding). So
    P(a "not worse" at any look | B worse by exactly the tolerance) <= alpha and P(a
    "worse" at any look | B exactly at the tolerance) <= alpha, over all looks together.
    An early look settles when it is not inconclusive; the last look decides, and may be
    inconclusive (judged by the gate's `inconclusive` setting)."""

    tolerance: Tolerance
    alpha: float = 0.05
    max_n: int = 200
    wave: int = 50
    spending: str = "obrien_fleming"

    def looks(self) -> list[int]:
        return [*range(self.wave, self.max_n, self.wave), self.max_n]

    def nominal_alphas(self) -> list[float]:
        """The one-sided level each look tests at (the last close to alpha)."""
        return alpha_spending.nominal_alphas([n / self.max_n for n in self.looks()],
                                             self.alpha, self.spending)

    def decide(self, a: tuple[Sequence[float], Sequence[float]],
               b: tuple[Sequence[float], Sequence[float]]) -> PairedResult | None:
        """The result when settled at this count (always at max_n), else None."""
        n = len(b[0])
        looks = self.looks()
        if n >= self.max_n:
            return paired_test(a, b, self.tolerance, self.nominal_alphas()[-1])
        if n not in looks or n < MIN_QUESTIONS:
            return None
        level = self.nominal_alphas()[looks.index(n)]
        if level <= 0.0:  # nothing spent at this look
            return None
        result = paired_test(a, b, self.tolerance, level)
        return None if result.decision == "inconclusive" else result


DEFAULT_PAIRED_SD = 0.75  # assumed per-question sd of B - A without recorded pairs


def aa_false_alarm(sd: float, tolerated: float, n: int, alpha: float, inconclusive: str
                   ) -> float:
    """P(the gate fails | B = A): "worse", plus "inconclusive" when it is judged fail."""
    not_worse, worse = pass_probabilities(tolerated, sd, n, alpha)
    return worse + (max(0.0, 1.0 - not_worse - worse) if inconclusive == "fail" else 0.0)


def questions_needed(sd: float, tolerated: float, alpha: float, beta: float,
                     inconclusive: str) -> int:
    """The questions a gate needs at its spread. Both settings need the power count
    (`questions_for_power`: P(not worse | B = A) >= 1 - beta, equally P(worse | B = A -
    twice the tolerance) >= 1 - beta); "fail" also needs P(fail | B = A) <= 2 alpha:
    ((z(1 - alpha) + z(1 - 2 alpha)) sd / tolerance)^2."""
    needed = questions_for_power(sd, tolerated, alpha, beta)
    if inconclusive == "fail" and sd > 0:
        z = stats.normal_quantile(1 - alpha) + stats.normal_quantile(1 - 2 * alpha)
        needed = max(needed, math.ceil((z * sd / tolerated) ** 2))
    return needed


def sizing(gate: Gate, tolerated: float, n: int, sd: float | None = None,
           sd_source: str = "[gate] paired_sd") -> dict[str, object]:
    """Is the gate sized for its question count? `sd`: the paired spread (default: the
    gate's declared `paired_sd`). The run prints `message` before it measures anything."""
    sd = gate.paired_sd if sd is None else sd
    if sd is None:
        warn = (" With inconclusive = \"fail\" its A/A false-alarm rate is unknown and can be"
                " most runs on an engine that is not bit-reproducible."
                if gate.inconclusive == "fail" else "")
        return {"sized": False, "sd": None, "underpowered": None,
                "message": "gate not sized: [gate] declares no paired_sd (run `harness "
                           f"calibrate` and declare its paired_sd).{warn}"}
    needed = questions_needed(sd, tolerated, gate.alpha, gate.beta, gate.inconclusive)
    false_alarm = aa_false_alarm(sd, tolerated, n, gate.alpha, gate.inconclusive)
    out = {"sized": True, "sd": sd, "sd_source": sd_source, "questions_needed": needed,
           "questions": n, "underpowered": n < needed, "p_fail_if_equal": false_alarm}
    if n < needed:
        out["message"] = (f"underpowered: {needed} questions needed, the suite plans {n} "
                          f"(paired sd {sd:g} from {sd_source}, tolerated drop "
                          f"{tolerated:.4f}); P(gate fails | B = A) = {false_alarm:.3f} "
                          f"with inconclusive = {gate.inconclusive!r}")
    else:
        out["message"] = (f"gate sized: {n} questions >= {needed} needed (paired sd {sd:g} "
                          f"from {sd_source}); P(gate fails | B = A) = {false_alarm:.3f}")
    return out
RELATIVE_CHANGES = (0.0, -0.5, -1.0, -1.5, -2.0, -3.0)  # in units of the tolerance


def operating_characteristic(reference: float, tolerance: Tolerance, sd: float, n: int,
                             alpha: float, inconclusive: str) -> list[dict[str, float]]:
    """P(not worse), P(worse), P(inconclusive) and P(the gate fails) for B's true change
    at 0, -0.5, ... -3 tolerances from A (`harness power`)."""
    out = []
    tolerated = tolerance.threshold(reference)
    for k in RELATIVE_CHANGES:
        change = k * tolerated
        not_worse, worse = pass_probabilities(change + tolerated, sd, n, alpha)
        open_ = max(0.0, 1.0 - not_worse - worse)
        fails = worse + (open_ if inconclusive == "fail" else 0.0)
        out.append({"tolerances": k, "b_minus_a": change,
                    "relative_change": change / reference, "p_not_worse": not_worse,
                    "p_worse": worse, "p_inconclusive": open_, "p_gate_fails": fails})
    return out
