"""Statistics on synthetic data with known truth (fixed seeds, fast)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness import stats

TRUE = 5.0
N = 60
REPS = 400


def test_accept_length_is_a_ratio_of_sums() -> None:
    assert stats.accept_length([10, 30], [5, 5]) == 4.0
    assert stats.accept_length([10, 30], [1, 9]) == 4.0  # not the mean of ratios (7.0)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        stats.accept_length([], [])
    with pytest.raises(ValueError):
        stats.accept_length([1, 2], [0, 0])
    with pytest.raises(ValueError):
        stats.accept_length([1, 2], [1])


def test_bootstrap_is_reproducible_and_brackets_the_estimate() -> None:
    tokens, steps = stats.simulate_prompts(N, TRUE, seed=3)
    low, high = stats.bootstrap_ci(tokens, steps)
    assert low < stats.accept_length(tokens, steps) < high
    assert stats.bootstrap_ci(tokens, steps) == (low, high)


def test_bootstrap_coverage_near_nominal() -> None:
    rng = np.random.default_rng(20)
    covered = 0
    for _ in range(REPS):
        tokens, steps = stats.simulate_prompts(N, TRUE, seed=rng)
        low, high = stats.bootstrap_ci(tokens, steps, n_boot=400, seed=int(rng.integers(1e9)))
        covered += low <= TRUE <= high
    rate = covered / REPS
    # 95% nominal; binomial sd at 400 reps is 1.1 points, percentile bootstrap at n=60
    # runs slightly liberal: accept 0.90 to 0.99
    assert 0.90 <= rate <= 0.99, rate


def test_delta_method_se_matches_bootstrap_spread() -> None:
    tokens, steps = stats.simulate_prompts(200, TRUE, seed=5)
    low, high = stats.bootstrap_ci(tokens, steps, level=0.6827)
    assert stats.standard_error(tokens, steps) == pytest.approx((high - low) / 2, rel=0.15)


def test_one_sided_false_alarm_rate_near_alpha() -> None:
    rng = np.random.default_rng(21)
    alarms = sum(
        stats.one_sided_test(*stats.simulate_prompts(N, TRUE, seed=rng), TRUE, 0.05).drop_detected
        for _ in range(1000)
    )
    # alpha 0.05; binomial sd at 1000 reps is 0.7 points
    assert 0.025 <= alarms / 1000 <= 0.08, alarms


def test_one_sided_power_matches_min_detectable_drop() -> None:
    sd = stats.DEFAULT_PROMPT_SD
    drop = stats.min_detectable_drop(sd, N, alpha=0.05, beta=0.2)
    rng = np.random.default_rng(22)
    hits = sum(
        stats.one_sided_test(
            *stats.simulate_prompts(N, TRUE - drop, prompt_sd=sd, seed=rng), TRUE
        ).drop_detected
        for _ in range(REPS)
    )
    # the per-prompt sd in accept-length units is close to, not exactly, prompt_sd
    assert 0.65 <= hits / REPS <= 0.95, hits / REPS


def test_power_helpers_agree() -> None:
    drop = stats.min_detectable_drop(0.8, 200, 0.05, 0.2)
    assert drop == pytest.approx(2.486 * 0.8 / math.sqrt(200), rel=1e-3)
    assert stats.prompts_needed(0.8, drop, 0.05, 0.2) in (200, 201)
    rows = stats.power_table(0.8, n_values=(50, 200), reference=5.0)
    assert [r.n_prompts for r in rows] == [50, 200]
    assert rows[0].min_detectable_drop == pytest.approx(2 * rows[1].min_detectable_drop)
    assert rows[1].relative_drop == pytest.approx(drop / 5.0)
    tokens, steps = stats.simulate_prompts(100, TRUE, seed=1)
    assert stats.min_detectable_drop((tokens, steps), 100) > 0


def test_per_position_acceptance_from_histogram() -> None:
    assert stats.per_position_acceptance([1, 1, 2]) == [0.75, 0.5]
    assert stats.per_position_acceptance([]) == []


def test_paired_difference_finds_no_difference_on_identical_sides() -> None:
    tokens, steps = stats.simulate_prompts(50, TRUE, seed=2)
    diff, (low, high), p_value = stats.paired_difference_test(tokens, steps, tokens, steps)
    assert diff == 0 and low == high == 0 and p_value == 1.0


@pytest.mark.parametrize("offset", [-0.4, 0.4])
def test_sequential_rule_reaches_the_true_verdict_early(offset: float) -> None:
    rule = stats.SequentialRule(floor=TRUE, min_n=30, max_n=200)
    rng = np.random.default_rng(23)
    wrong, used = 0, []
    for _ in range(100):
        tokens, steps = stats.simulate_prompts(200, TRUE + offset, seed=rng)
        verdict, n = rule.first_decision(tokens, steps)
        wrong += verdict != ("pass" if offset > 0 else "fail")
        used.append(n)
    assert wrong <= 2
    assert np.mean(used) <= 100


def test_sequential_false_fail_rate_at_the_floor_within_alpha() -> None:
    # true accept length exactly at the floor: "fail" before max_n is a false alarm
    rule = stats.SequentialRule(floor=TRUE, alpha=0.05, min_n=30, max_n=None)
    rng = np.random.default_rng(24)
    early_fails = 0
    for _ in range(200):
        tokens, steps = stats.simulate_prompts(200, TRUE, seed=rng)
        verdict, _ = rule.first_decision(tokens, steps)
        early_fails += verdict == "fail"
    assert early_fails / 200 <= 0.08


def test_sequential_rule_waits_for_min_n_and_ends_at_max_n() -> None:
    rule = stats.SequentialRule(floor=2.0, min_n=30, max_n=40)
    tokens, steps = stats.simulate_prompts(40, 2.05, seed=4)
    assert rule.decide(tokens[:10], steps[:10]) is None
    assert rule.decide(tokens, steps) in ("pass", "fail")
