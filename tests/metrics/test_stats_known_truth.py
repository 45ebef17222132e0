"""Statistics on synthetic data with known truth (fixed seeds, fast).

Every rate asserted here is the one docs/statistics.md states; the Monte Carlo bounds
allow about 3 binomial standard deviations.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis.simulate import (
    completion_times,
    replay_pipelined,
    replay_waves,
    simulate_prompts,
)
from harness.metrics import stats, stopping

TRUE = 5.0
N = 60
REPS = 400
FLOOR = 5.4


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


def test_numerators_follow_the_metric() -> None:
    v2 = {"completion_tokens": 40, "verify_steps": 10, "correct_drafts": 28}
    v1 = {"completion_tokens": 40, "verify_steps": 10}
    assert stats.numerator(v2, "server_avg") == 38  # correct drafts + one token per step
    assert stats.numerator(v1, "server_avg") == 39  # v1 fallback: prefill token left out
    assert stats.numerator(v2, "per_request") == 40
    with pytest.raises(ValueError, match="unknown metric"):
        stats.numerator(v2, "mean")  # type: ignore[arg-type]
    rows = [v2, v1, {"completion_tokens": 5, "verify_steps": 0}, {"verify_steps": 3}]
    assert stats.metric_pairs(rows, "server_avg") == ([38, 39], [10, 10])
    assert stats.metric_pairs(rows, "per_request") == ([40, 40], [10, 10])


def test_t_quantile_matches_tables() -> None:
    assert stats.t_quantile(0.975, 10) == pytest.approx(2.228, abs=0.003)
    assert stats.t_quantile(0.975, 30) == pytest.approx(2.042, abs=0.002)
    assert stats.t_quantile(0.99, 49) == pytest.approx(2.405, abs=0.002)


def test_bootstrap_is_reproducible_and_brackets_the_estimate() -> None:
    tokens, steps = simulate_prompts(N, TRUE, seed=3)
    low, high = stats.bootstrap_ci(tokens, steps)
    assert low < stats.accept_length(tokens, steps) < high
    assert stats.bootstrap_ci(tokens, steps) == (low, high)


def test_bootstrap_coverage_near_nominal() -> None:
    rng = np.random.default_rng(20)
    covered = 0
    for _ in range(REPS):
        tokens, steps = simulate_prompts(N, TRUE, seed=rng)
        low, high = stats.bootstrap_ci(tokens, steps, n_boot=400, seed=int(rng.integers(1e9)))
        covered += low <= TRUE <= high
    # 95% nominal; benchmarks/bench_bootstrap.py measures 0.94 at n = 60 with 2000 replicates
    assert 0.90 <= covered / REPS <= 0.98, covered / REPS


def test_delta_method_se_matches_bootstrap_spread() -> None:
    tokens, steps = simulate_prompts(200, TRUE, seed=5)
    low, high = stats.bootstrap_ci(tokens, steps, level=0.6827)
    assert stats.standard_error(tokens, steps) == pytest.approx((high - low) / 2, rel=0.15)
    assert stats.standard_error(tokens[:1], steps[:1]) == math.inf


def test_wald_is_the_normal_interval_and_p_values() -> None:
    d = stats.wald(-0.2, 0.1, level=0.95)
    assert d.ci == pytest.approx((-0.2 - 1.95996 * 0.1, -0.2 + 1.95996 * 0.1), abs=1e-5)
    assert d.p_value == pytest.approx(0.0455, abs=1e-4)
    assert d.p_drop == pytest.approx(0.02275, abs=1e-5)
    assert stats.wald(0.2, 0.1).p_drop == pytest.approx(1 - 0.02275, abs=1e-5)
    unknown = stats.wald(0.3, math.inf)
    assert unknown.ci is None and math.isnan(unknown.p_value) and math.isnan(unknown.p_drop)
    exact = stats.wald(0.0, 0.0)
    assert exact.ci == (0.0, 0.0) and exact.p_value == 1.0


def test_paired_difference_finds_no_difference_on_identical_sides() -> None:
    tokens, steps = simulate_prompts(50, TRUE, seed=2)
    d = stats.ratio_difference(tokens, steps, tokens, steps, paired=True)
    assert d.estimate == 0 and d.ci == (0.0, 0.0) and d.p_value == 1.0
    assert d.method.startswith("paired")


def test_independent_difference_false_alarm_rate_near_level() -> None:
    rng = np.random.default_rng(25)
    alarms = 0
    for _ in range(1000):
        a, b = simulate_prompts(N, TRUE, seed=rng), simulate_prompts(N, TRUE, seed=rng)
        alarms += stats.ratio_difference(*a, *b, paired=False).p_value < 0.05
    assert 0.03 <= alarms / 1000 <= 0.075, alarms


def test_paired_difference_detects_what_independent_misses() -> None:
    rng = np.random.default_rng(26)
    tokens, steps = simulate_prompts(100, TRUE, prompt_sd=1.2, seed=rng)
    lowered = np.maximum(steps, np.round(tokens * 0.97)).astype(int)  # 3% fewer tokens per prompt
    paired = stats.ratio_difference(tokens, steps, lowered, steps, paired=True)
    independent = stats.ratio_difference(tokens, steps, lowered, steps, paired=False)
    assert paired.estimate == independent.estimate < 0
    assert paired.p_drop < 1e-6 < 0.05 < independent.p_drop


def test_difference_to_a_fixed_figure_keeps_b_minus_a() -> None:
    tokens, steps = simulate_prompts(80, TRUE, seed=7)
    ratio = stats.accept_length(tokens, steps)
    as_b = stats.difference_to_figure(tokens, steps, 4.0, run_is_b=True)
    as_a = stats.difference_to_figure(tokens, steps, 4.0, run_is_b=False)
    assert as_b.estimate == pytest.approx(ratio - 4.0) and as_a.estimate == -as_b.estimate
    assert as_b.se == as_a.se == pytest.approx(stats.standard_error(tokens, steps))
    assert as_a.p_drop < 1e-6 < as_b.p_drop


def test_power_table_is_the_gate_characteristic() -> None:
    row = stats.power_table(0.8, 0.05, 0.2, n_values=(200,))[0]
    se = 0.8 / math.sqrt(200)
    assert row.se == pytest.approx(se)
    assert row.fail_margin == pytest.approx(1.6449 * se, rel=1e-4)
    assert row.caught_drop == pytest.approx(0.8416 * se, rel=1e-4)
    assert row.min_detectable_drop == pytest.approx(2.486 * se, rel=1e-3)
    assert stats.gate_fail_probability(row.fail_margin, 0.8, 200) == pytest.approx(0.05)
    assert stats.gate_fail_probability(-row.caught_drop, 0.8, 200) == pytest.approx(0.8)
    assert stats.prompts_for_margin(0.8, row.fail_margin, 0.05) in (200, 201)


def _population_sd(accept: float, sd: float) -> float:
    return stats.prompt_sd(*simulate_prompts(20000, accept, prompt_sd=sd, seed=99))


def test_fixed_gate_fails_half_the_builds_at_the_floor_and_alpha_at_the_margin() -> None:
    # The gate is "point estimate vs floor": at the floor it is a coin toss; the margin
    # `fail_margin` above the floor brings false fails down to alpha.
    rng = np.random.default_rng(27)
    at_floor = [stats.accept_length(*simulate_prompts(200, FLOOR, seed=rng)) < FLOOR
                for _ in range(1000)]  # fmt: skip
    assert 0.45 <= np.mean(at_floor) <= 0.56, np.mean(at_floor)
    margin = stats.fail_margin(_population_sd(FLOOR, 0.75), 200, 0.05)
    above = [stats.accept_length(*simulate_prompts(200, FLOOR + margin, seed=rng)) < FLOOR
             for _ in range(1000)]  # fmt: skip
    assert 0.03 <= np.mean(above) <= 0.075, np.mean(above)


def test_rule_looks_and_refuses_other_counts() -> None:
    rule = stopping.SequentialRule(floor=FLOOR, max_n=200)
    assert rule.looks() == rule.looks(200) == [50, 100, 150, 200]
    assert stopping.SequentialRule(floor=FLOOR, max_n=120).looks() == [50, 100, 120]
    assert stopping.SequentialRule(floor=FLOOR, max_n=40).looks() == [40]
    with pytest.raises(ValueError, match="planned for 200"):
        rule.looks(100)
    tokens, steps = simulate_prompts(200, FLOOR + 2.0, seed=1)  # far above the floor
    assert rule.decide(tokens[:50], steps[:50]) == "pass"
    assert rule.decide(tokens[:60], steps[:60]) is None  # not a look: never a verdict
    with pytest.raises(ValueError):
        stopping.SequentialRule(floor=FLOOR, wave=5)


def test_last_look_is_the_fixed_verdict_strict_or_not() -> None:
    steps = [10] * 200
    at_floor = [54] * 200  # exactly 5.4
    just_below = [54] * 199 + [53]
    assert stopping.SequentialRule(floor=FLOOR).decide(at_floor, steps) == "pass"
    assert stopping.SequentialRule(floor=FLOOR, strict=True).decide(at_floor, steps) == "fail"
    assert stopping.SequentialRule(floor=FLOOR).decide(just_below, steps) == "fail"
    # no spread and exactly at the floor: no early verdict, the last look decides
    assert stopping.SequentialRule(floor=FLOOR).decide(at_floor[:50], steps[:50]) is None


def _replays(offset: float, reps: int, seed: int, sd: float = 0.75) -> list[tuple[str, str, float]]:
    """(sequential verdict, fixed verdict, fraction of tokens) at concurrency 128."""
    rng = np.random.default_rng(seed)
    rule = stopping.SequentialRule(floor=FLOOR, alpha=0.05, beta=0.2, max_n=200)
    out = []
    for _ in range(reps):
        tokens, steps = simulate_prompts(200, FLOOR + offset, prompt_sd=sd, seed=rng)
        replay = replay_waves(rule, list(tokens), list(steps), concurrency=128)
        out.append((replay.verdict, rule.fixed_verdict(tokens, steps),
                    replay.tokens / tokens.sum()))  # fmt: skip
    return out


def test_early_error_rates_at_the_floor_are_within_alpha_and_beta() -> None:
    # true value exactly at the floor: an early fail is a false fail (bound alpha 0.05),
    # an early pass a false pass (bound beta 0.2); the rest goes to the fixed gate
    rng = np.random.default_rng(24)
    rule = stopping.SequentialRule(floor=FLOOR, alpha=0.05, beta=0.2, max_n=200)
    early = {"fail": 0, "pass": 0}
    fails = 0
    for _ in range(1000):
        tokens, steps = simulate_prompts(200, FLOOR, prompt_sd=1.0, seed=rng)
        verdict, used = rule.first_decision(tokens, steps)
        if used < 200:
            early[verdict] += 1
        fails += verdict == "fail"
    assert early["fail"] / 1000 <= 0.065, early
    assert early["pass"] / 1000 <= 0.2, early
    # and the honest overall rate at the floor: half the runs fail, as the fixed gate does
    assert 0.42 <= fails / 1000 <= 0.58, fails


@pytest.mark.parametrize("offset", [-0.3, 0.3])
def test_same_verdict_with_half_the_tokens_at_03_from_the_floor(offset: float) -> None:
    runs = _replays(offset, 150, seed=23 if offset < 0 else 28)
    agree = np.mean([seq == fixed for seq, fixed, _ in runs])
    tokens = np.mean([fraction for *_, fraction in runs])
    assert agree >= 0.98, agree
    assert tokens <= 0.5, tokens
    assert all(seq == ("pass" if offset > 0 else "fail") for seq, _, _ in runs)


def test_operating_characteristic_is_consistent() -> None:
    rule = stopping.SequentialRule(floor=FLOOR, max_n=200)
    p_far, n_far = rule.operating_characteristic(-0.5, 0.75, reps=2000)
    p_at, n_at = rule.operating_characteristic(0.0, 0.75, reps=2000)
    p_up, _ = rule.operating_characteristic(0.1, 0.75, reps=2000)
    assert p_far > 0.99 and n_far < 60
    assert 0.44 <= p_at <= 0.56 and n_at > 150
    assert p_up == pytest.approx(stats.gate_fail_probability(0.1, 0.75, 200), abs=0.02)


def test_completion_times_respect_concurrency() -> None:
    assert completion_times([3, 1, 1, 1], concurrency=2) == [3, 1, 2, 3]
    assert completion_times([3, 1], concurrency=8, start=10) == [13, 11]


def test_waves_waste_no_tokens_while_pipelining_does() -> None:
    rule = stopping.SequentialRule(floor=2.0, max_n=200)
    tokens, steps = simulate_prompts(200, 4.0, seed=8)  # far above: settles at the first look
    waves = replay_waves(rule, list(tokens), list(steps), concurrency=128)
    piped = replay_pipelined(rule, list(tokens), list(steps), concurrency=128)
    assert waves.verdict == piped.verdict == "pass" and waves.requests == piped.requests == 50
    assert waves.tokens == tokens[:50].sum()
    assert piped.tokens > waves.tokens  # requests 51..128 ran in flight and are thrown away


def test_pipelined_latencies_and_the_first_look_bound() -> None:
    from harness.analysis.simulate import first_look_wall

    rule = stopping.SequentialRule(floor=2.0, max_n=200)
    tokens, steps = simulate_prompts(200, 4.0, seed=8)
    by_tokens = replay_pipelined(rule, list(tokens), list(steps), concurrency=128)
    same = replay_pipelined(rule, list(tokens), list(steps), 128, latencies=list(tokens))
    assert by_tokens == same  # the default latency is the token count
    by_steps = replay_pipelined(rule, list(tokens), list(steps), 128, latencies=list(steps))
    assert by_steps.wall == max(completion_times(list(steps), 128)[:50])
    assert by_steps.tokens <= tokens.sum()
    # one slow request among the first look's: no look-based rule can end before it does
    slow = [10.0] * 200
    slow[3] = 100.0
    assert first_look_wall(rule, slow, 128) == 1.0
    assert first_look_wall(rule, [10.0] * 200, 128) == 0.5  # two rounds, the first look in one


def test_batched_replay_is_the_driver_on_an_engine_whose_steps_slow_with_its_batch() -> None:
    """simulate.replay_batched: knee = inf is replay_pipelined with latency = steps; knee 1
    (every step shared by the batch) makes the fixed protocol's wall time the total work;
    sending past the look only up to the knee (the driver's workload.sequential_in_flight)
    lets the first look finish in the time of its own work."""
    from harness.analysis.simulate import replay_batched

    rule = stopping.SequentialRule(floor=2.0, max_n=200)
    tokens, steps = (list(x) for x in simulate_prompts(200, 4.0, seed=8))
    piped = replay_pipelined(rule, tokens, steps, 128, latencies=steps)
    for past_look in (None, 128):
        batched = replay_batched(rule, tokens, steps, 128, past_look=past_look)
        assert (batched.verdict, batched.requests, batched.wall) == (
            piped.verdict, piped.requests, piped.wall)
        assert batched.tokens == pytest.approx(piped.tokens)
    fixed = replay_batched(None, tokens, steps, 128)
    assert fixed.wall == max(completion_times(steps, 128)) and fixed.requests == 200
    assert replay_batched(None, tokens, steps, 128, knee=1.0).wall == pytest.approx(sum(steps))
    # knee 1: continuous dispatch shares the engine with 78 requests the rule cancels;
    # look-first (nothing past the look while one runs) gives the look the whole engine
    shared = replay_batched(rule, tokens, steps, 128, knee=1.0)
    first = replay_batched(rule, tokens, steps, 128, knee=1.0, past_look=1)
    assert shared.verdict == first.verdict == "pass" and shared.requests == first.requests == 50
    assert first.wall == pytest.approx(sum(steps[:50]))
    assert shared.wall > 2 * first.wall
    assert first.tokens == pytest.approx(sum(tokens[:50])) and shared.tokens > first.tokens
    # the first-look bound: whatever the rows, settle at the first look
    near = stopping.SequentialRule(floor=4.0, max_n=200)  # at the floor: no early settle
    assert replay_batched(near, tokens, steps, 128).requests > 50
    bound = replay_batched(near, tokens, steps, 128, first_look=True)
    assert bound.requests == 50 and bound.wall == max(completion_times(steps, 128)[:50])


def test_power_spread_uses_the_metric_numerators(results) -> None:  # type: ignore[no-untyped-def]
    from harness.commands.power import recorded_spread
    from harness.results.readers import read_requests
    from tests.results.records import make_run

    run = make_run(results, 5.5, n=50, suite="gemma4_dflash_31b", floor=5.4)
    rows = read_requests(run)
    tokens = [r.completion_tokens for r in rows]
    steps = [r.verify_steps for r in rows]
    server, used = recorded_spread(results, "gemma4_dflash_31b", "server_avg", 5)
    per_request, _ = recorded_spread(results, "gemma4_dflash_31b", "per_request", 5)
    assert len(used) == 1
    # these rows carry no correct_drafts (v1): server_avg falls back to completion - 1
    assert server == pytest.approx(stats.prompt_sd([t - 1 for t in tokens], steps))
    assert per_request == pytest.approx(stats.prompt_sd(tokens, steps))
    assert server != pytest.approx(per_request)
