"""The bisect's statistics: the paired step rule, the endpoint test, the search."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.protocols.bisect import search
from harness.protocols.bisect.rule import StepRule, endpoint_difference, significant
from harness.protocols.bisect.simulate import simulate_builds

GOOD, BAD = 5.0, 4.6  # a 0.4 drop, GPU-like prompt spread 0.75


def classify(rule: StepRule, tokens: np.ndarray, steps: np.ndarray) -> tuple[str, int]:
    for look in rule.looks():
        verdict = rule.decide(tokens[:look], steps[:look])
        if verdict is not None:
            return verdict, look
    raise AssertionError("the last look always answers")


def rates(commit: float, reps: int = 400, n: int = 200, seed: int = 1, diverge: float = 1.0,
          alpha: float = 0.05) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = {"good": 0, "bad": 0, "undecided": 0}
    used = 0
    for _ in range(reps):
        good, step = simulate_builds(n, [GOOD, commit], seed=rng, diverge=diverge)
        rule = StepRule(tuple(good[0]), tuple(good[1]), BAD - GOOD, alpha, n, 50)
        verdict, look = classify(rule, *step)
        counts[verdict] += 1
        used += look
    return {**{k: v / reps for k, v in counts.items()}, "requests": used / reps}


def test_commits_like_an_endpoint_are_classified_within_the_error_bound() -> None:
    """No pairing at all (diverge 1, the hardest case), a 0.4 drop: errors <= alpha."""
    margin = 3 * math.sqrt(0.05 * 0.95 / 400)
    like_good, like_bad = rates(GOOD), rates(BAD)
    assert like_good["bad"] <= 0.05 + margin and like_bad["good"] <= 0.05 + margin
    assert like_good["good"] >= 0.8 and like_bad["bad"] >= 0.8
    assert like_good["requests"] < 150 and like_bad["requests"] < 150  # stops early


def test_pairing_makes_steps_short() -> None:
    """Paired answers (a reproducible engine): decided at the first look."""
    paired = rates(BAD, reps=100, diverge=0.0)
    assert paired["bad"] == 1.0 and paired["requests"] == 50


def test_the_sprt_statistic() -> None:
    """llr = Δ (D - Δ/2) / se^2 against log((1 - alpha) / alpha)."""
    good, commit = simulate_builds(100, [GOOD, BAD], seed=7, diverge=1.0)
    rule = StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.01, 100, 50)
    seen = rule.look(commit[0][:50], commit[1][:50])
    assert seen.llr == pytest.approx(-0.4 * (seen.difference + 0.2) / seen.se**2)
    assert seen.threshold == pytest.approx(math.log(99))
    expected = ("bad" if seen.llr >= seen.threshold else "good"
                if seen.llr <= -seen.threshold else None)
    assert rule.decide(commit[0][:50], commit[1][:50]) == expected


def test_direction_does_not_matter() -> None:
    """A rise is bisected like a drop: the classification follows the sign of the effect."""
    good, better = simulate_builds(200, [4.6, 5.0], seed=3, diverge=0.5)
    rule = StepRule(tuple(good[0]), tuple(good[1]), +0.4, 0.05, 200, 50)
    assert classify(rule, *better)[0] == "bad"  # like BAD, the changed build
    assert classify(rule, *good)[0] == "good"


def test_identical_results_settle_at_the_first_look() -> None:
    """A deterministic engine answers GOOD's prompts identically: se = 0, llr = -inf."""
    good, _ = simulate_builds(100, [GOOD, BAD], seed=4)
    rule = StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.05, 100, 20)
    seen = rule.look(good[0][:20], good[1][:20])
    assert seen.se == 0 and seen.llr == -math.inf
    assert rule.decide(good[0][:20], good[1][:20]) == "good"


def test_looks_thresholds_and_extension() -> None:
    good, _ = simulate_builds(400, [GOOD, BAD], seed=5)
    rule = StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.05, 200, 50)
    assert rule.looks() == [50, 100, 150, 200]
    extended = StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.05, 400, 50, after=200)
    assert extended.looks() == [250, 300, 350, 400]
    assert extended.decide(good[0][:200], good[1][:200]) is None  # looked at already
    assert StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.05, 70, 50).looks() == [50, 70]
    with pytest.raises(ValueError, match="GOOD has 400 prompts"):
        StepRule(tuple(good[0]), tuple(good[1]), -0.4, 0.05, 500, 50)
    with pytest.raises(ValueError, match="nonzero"):
        StepRule(tuple(good[0]), tuple(good[1]), 0.0, 0.05, 200, 50)


def test_endpoint_test() -> None:
    good, bad, same = simulate_builds(200, [GOOD, BAD, GOOD], seed=6, diverge=0.5)
    differ = endpoint_difference(good, bad, 0.05)
    assert significant(differ, 0.05) and differ.estimate == pytest.approx(-0.4, abs=0.15)
    assert not significant(endpoint_difference(good, same, 0.05), 0.05)


def test_search_halves_the_range_and_respects_skips() -> None:
    n, first_bad = 16, 10
    outcomes: dict[int, search.Outcome] = {}
    visited = []
    while (index := search.next_commit(n, outcomes)) is not None:
        visited.append(index)
        outcomes[index] = "bad" if index >= first_bad else "good"
    assert len(visited) == search.max_steps(n) == 4
    assert search.bounds(n, outcomes) == search.Range(9, 10)
    assert search.bounds(n, outcomes).found
    # every first bad position is found within ceil(log2 n) steps
    for n in (1, 2, 3, 7, 16, 33):
        for first_bad in range(n):
            outcomes = {}
            while (index := search.next_commit(n, outcomes)) is not None:
                outcomes[index] = "bad" if index >= first_bad else "good"
            assert len(outcomes) <= search.max_steps(n)
            assert search.bounds(n, outcomes) == search.Range(first_bad - 1, first_bad)
    # a skipped commit next to the change leaves two candidates, like git bisect
    outcomes = {}
    while (index := search.next_commit(16, outcomes)) is not None:
        outcomes[index] = "skip" if index == 9 else "bad" if index >= 10 else "good"
    where = search.bounds(16, outcomes)
    assert not where.found and where.candidates == [9, 10]
