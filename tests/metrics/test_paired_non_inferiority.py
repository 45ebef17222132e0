"""The paired non-inferiority test: its decisions, its zero-variance cases, its error
rates on synthetic pairs with known truth, and the sequential paired rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.simulate import simulate_prompts
from harness.metrics import paired_gate as gate
from harness.metrics import stats

RELATIVE = gate.Tolerance(0.02, relative=True, metric="server_avg")
ABSOLUTE = gate.Tolerance(0.1, relative=False, metric="server_avg")


def pair(n: int, shift: float, noise: float, seed: int = 0, mean: float = 4.0
         ) -> tuple[tuple[list[float], list[float]], tuple[list[float], list[float]]]:
    """A's questions and B's: B's numerators moved by `shift` accept-length units per
    verify step, plus per-question noise of sd `noise` (accept-length units)."""
    tokens, steps = simulate_prompts(n, mean, 1.2, seed=seed)
    rng = np.random.default_rng(seed + 1)
    moved = tokens + steps * (shift + rng.normal(0.0, noise, n))
    return (list(tokens), list(steps)), (list(moved), list(steps))


def test_identical_answers_pass_with_certainty_in_both_tolerances() -> None:
    a, _ = pair(100, 0.0, 0.0)
    for tolerance in (RELATIVE, ABSOLUTE):
        result = gate.paired_test(a, a, tolerance)
        assert result.decision == "not_worse"
        assert result.margin_se == 0.0 and result.difference == 0.0
        assert result.lower == pytest.approx(result.tolerated_drop)
    # and with only two questions: zero spread decides by the sign, no division by zero
    few = ([10.0, 20.0], [4.0, 6.0])
    assert gate.paired_test(few, few, RELATIVE).decision == "not_worse"


def test_zero_variance_drop_beyond_the_tolerance_fails_with_certainty() -> None:
    a = ([40.0, 80.0, 60.0], [10.0, 20.0, 15.0])  # 4.0 on every question
    b = ([38.0, 76.0, 57.0], [10.0, 20.0, 15.0])  # 3.8: -5%, the same on every question
    result = gate.paired_test(a, b, RELATIVE)
    assert result.decision == "worse" and result.margin_se == 0.0
    assert result.relative_change == pytest.approx(-0.05)


def test_near_zero_variance_pair_does_not_fail_on_a_drop_below_the_tolerance() -> None:
    a, b = pair(100, -0.04, 0.002)  # -1% at 4.0, tolerance 2% = 0.08
    result = gate.paired_test(a, b, RELATIVE)
    assert result.decision == "not_worse", result
    assert 0 < result.margin_se < 0.001


def test_a_clear_drop_beyond_the_tolerance_is_worse_and_a_noisy_one_inconclusive() -> None:
    a, b = pair(100, -0.3, 0.2)
    assert gate.paired_test(a, b, RELATIVE).decision == "worse"
    a, b = pair(30, -0.08, 1.5)  # at the tolerance, noisy: neither shown
    result = gate.paired_test(a, b, RELATIVE)
    assert result.decision == "inconclusive"
    assert gate.status_of(result.decision, "fail") == "fail"
    assert gate.status_of(result.decision, "pass") == "pass"


def test_absolute_tolerance_is_in_accept_length_units() -> None:
    a, b = pair(200, -0.05, 0.05)
    assert gate.paired_test(a, b, ABSOLUTE).decision == "not_worse"  # 0.05 < 0.1
    a, b = pair(200, -0.2, 0.05)
    result = gate.paired_test(a, b, ABSOLUTE)
    assert result.decision == "worse" and result.tolerated_drop == 0.1


def test_the_paired_se_is_the_one_compare_uses() -> None:
    a, b = pair(80, -0.1, 0.3)
    result = gate.paired_test(a, b, RELATIVE)
    d = stats.ratio_difference(*a, *b, paired=True)
    assert result.margin_se == pytest.approx(d.se)
    assert result.difference == pytest.approx(d.estimate)


@pytest.mark.parametrize("bad", [
    lambda: gate.Tolerance(0.0, True, "server_avg"),
    lambda: gate.Tolerance(1.0, True, "server_avg"),
    lambda: gate.paired_test(([1.0], [1.0]), ([1.0], [1.0]), RELATIVE),
    lambda: gate.paired_test(([1.0, 2.0], [1.0, 1.0]), ([1.0], [1.0]), RELATIVE),
    lambda: gate.paired_test(([1.0, 2.0], [1.0, 1.0]), ([1.0, 2.0], [1.0, 1.0]), RELATIVE,
                             alpha=0.6),
])
def test_bad_arguments_are_refused(bad) -> None:
    with pytest.raises(ValueError):
        bad()


def test_false_pass_rate_at_the_tolerance_is_at_most_alpha() -> None:
    """B exactly at A minus the tolerance: 'not worse' at most alpha of the time (400 pairs)."""
    passes = 0
    for seed in range(400):
        a, b = pair(100, -0.08, 0.5, seed=seed)  # R_A = 4.0: tolerance 0.08
        passes += gate.paired_test(a, b, RELATIVE).decision == "not_worse"
    assert passes / 400 <= 0.08  # alpha 0.05, binomial sd 1.1 points


def test_power_formula_matches_simulation_for_equal_builds() -> None:
    hits = sum(gate.paired_test(*pair(100, 0.0, 0.5, seed=s), RELATIVE).decision
               == "not_worse" for s in range(300))
    predicted, _ = gate.pass_probabilities(0.08, 0.5, 100, 0.05)
    assert abs(hits / 300 - predicted) < 0.08
    n = gate.questions_for_power(0.5, 0.08, 0.05, 0.2)
    assert gate.pass_probabilities(0.08, 0.5, n, 0.05)[0] >= 0.78
    assert gate.pass_probabilities(0.08, 0.0, 2, 0.05) == (1.0, 0.0)


def test_paired_rule_settles_early_only_when_shown_and_always_at_the_end() -> None:
    rule = gate.PairedRule(RELATIVE, alpha=0.05, max_n=200, wave=50)
    assert rule.looks() == [50, 100, 150, 200]
    levels = rule.nominal_alphas()  # O'Brien-Fleming type: little early, near alpha last
    assert levels[0] < 0.001 and 0.04 < levels[-1] < 0.05 and levels == sorted(levels)
    a, b = pair(200, 0.0, 0.0)
    first = rule.decide((a[0][:50], a[1][:50]), (b[0][:50], b[1][:50]))
    assert first is not None and first.decision == "not_worse"  # identical: at once
    assert rule.decide((a[0][:60], a[1][:60]), (b[0][:60], b[1][:60])) is None  # no look
    a, b = pair(200, -0.08, 1.0)
    early = rule.decide((a[0][:50], a[1][:50]), (b[0][:50], b[1][:50]))
    assert early is None  # at the tolerance, noisy: not settled early
    last = rule.decide(a, b)
    assert last is not None and last.n == 200 and last.alpha == pytest.approx(levels[-1])


def test_describe_names_definition_tolerance_and_decision() -> None:
    a, b = pair(100, -0.3, 0.2)
    result = gate.paired_test(a, b, RELATIVE)
    line = gate.describe(result, "fail")
    assert "server_avg" in line and "2.0% of A" in line and "worse than A" in line
    assert math.isfinite(result.margin_sd)
