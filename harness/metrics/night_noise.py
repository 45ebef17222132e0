"""Night-to-night noise of a history whose nights asked the same questions.

When every night asks the same questions (one prompt set, one data hash), which questions
were drawn is common to every night and cancels in a difference between nights; what
varies from night to night is the engine (batch composition, kernels that are not
bit-reproducible) and the host. Each night's CI over questions measures the first, so a
detector fed those CIs (`harness.analysis.trend`'s default) is blind to a step much
smaller than a CI's half-width that every question shows.

Here the engine's share is measured as the paired gate measures B - A
(`stats.ratio_difference(paired=True)`, one home with `harness.metrics.paired_gate`):
for two successive nights on the same questions, the per-question linearised
contributions are differenced, and the square of that difference's standard error is
var(R_i) + var(R_j) from the engine alone. The median over successive pairs, halved, is
one night's engine variance: a median, so the one pair that straddles a build change
(every question answered differently) does not inflate it. A host-level shift common to
every question of a night is left to the detector's excess variance
(`trend.excess_variance`), which adds what the successive differences show beyond this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.metrics import stats


@dataclass(frozen=True)
class NightNoise:
    """Each night's figure on the shared questions and its engine standard error."""

    figures: tuple[float, ...]  # R_i per night, on the questions every night asked
    engine_se: float  # sd of one night's R_i from the engine alone (by question)
    pair_se: tuple[float, ...]  # se of R_{i+1} - R_i, paired by question, per successive pair
    questions: int


def night_noise(tokens: Sequence[Sequence[float]], steps: Sequence[Sequence[float]]
                ) -> NightNoise:
    """Nights (oldest first), each its per-question numerators and verify steps in one
    question order (row i of every night is the same question)."""
    if len(tokens) != len(steps) or len(tokens) < 2:
        raise ValueError("need at least two nights, each with numerators and steps")
    n = len(tokens[0])
    if n < 2 or any(len(t) != n or len(s) != n for t, s in zip(tokens, steps, strict=True)):
        raise ValueError("every night must give the same questions, at least two")
    figures = tuple(stats.accept_length(t, s) for t, s in zip(tokens, steps, strict=True))
    pair_se = tuple(
        stats.ratio_difference(tokens[i], steps[i], tokens[i + 1], steps[i + 1],
                               paired=True).se
        for i in range(len(tokens) - 1))
    variances = sorted(se * se for se in pair_se)
    middle = len(variances) // 2
    median = (variances[middle] if len(variances) % 2
              else (variances[middle - 1] + variances[middle]) / 2)
    return NightNoise(figures, math.sqrt(median / 2), pair_se, n)


@dataclass(frozen=True)
class AnswerChanges:
    """How far one build's nights are from bit-reproducible, question by question: an
    answer is a question's (numerator, verify steps) on a night, its usual answer the one
    given on most nights (the earliest of equally common ones)."""

    nights: int
    nights_changed: int  # nights with at least one answer otherwise than usual
    cells: int  # question-nights
    changed: int  # question-nights answered otherwise than usual
    questions_changed: int  # questions answered otherwise on at least one night
    change_rms: float  # root mean square of a changed answer's accept-length change (0: none)
    question_sd: float  # sd between the questions' usual accept lengths

    @property
    def share(self) -> float:
        return self.changed / self.cells

    @property
    def share_on_changed_nights(self) -> float:
        """The share of a deviating night's answers that deviate (0: no such night)."""
        return self.changed / (self.nights_changed * self.cells // self.nights) \
            if self.nights_changed else 0.0


def answer_changes(tokens: Sequence[Sequence[float]], steps: Sequence[Sequence[float]]
                   ) -> AnswerChanges:
    """Nights (rows) of one build in one question order, as `night_noise` takes them."""
    if len(tokens) != len(steps) or len(tokens) < 2:
        raise ValueError("need at least two nights, each with numerators and steps")
    questions = len(tokens[0])
    changes: list[float] = []
    usual_levels: list[float] = []
    touched = 0
    odd_nights: set[int] = set()
    for q in range(questions):
        answers = [(float(night_tokens[q]), float(night_steps[q]))
                   for night_tokens, night_steps in zip(tokens, steps, strict=True)]
        usual = max(answers, key=answers.count)  # max keeps the first of equal counts
        usual_levels.append(usual[0] / usual[1])
        moved = [a / s - usual[0] / usual[1] for a, s in answers if (a, s) != usual]
        odd_nights |= {night for night, answer in enumerate(answers) if answer != usual}
        touched += bool(moved)
        changes += moved
    rms = math.sqrt(sum(c * c for c in changes) / len(changes)) if changes else 0.0
    mean = sum(usual_levels) / questions
    spread = math.sqrt(sum((v - mean) ** 2 for v in usual_levels) / max(1, questions - 1))
    return AnswerChanges(len(tokens), len(odd_nights), questions * len(tokens), len(changes),
                         touched, rms, spread)
