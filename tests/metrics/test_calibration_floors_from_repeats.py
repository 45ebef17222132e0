"""Calibration statistics and the seeds of the repeats."""

from __future__ import annotations

import pytest

from harness.analysis.simulate import simulate_prompts
from harness.metrics.calibration import summarise_repeats
from harness.protocols.calibrate import SEED_STRIDE, calibration_lines, with_seeds
from harness.suite.model import load_suite
from tests.fixtures.suites_and_host import loaded_from_text
from tests.tiny_variants import tiny_variant


def test_identical_repeats_have_no_spread_and_keep_the_sampling_error_in_the_floor() -> None:
    tokens, steps = simulate_prompts(100, 3.8, 1.2, seed=1)
    run = (list(tokens), list(steps))
    s = summarise_repeats([run, run, run])
    assert s["run_sd"] == 0 and s["paired_sd"] == 0 and s["identical_answers"]
    assert s["suggested_floor"] < s["mean"] - 1.6 * s["within_se"]
    assert s["suggested_relative_drop"] == 0.005
    assert "t(1-alpha, N-1)" in s["floor_rule"] and "paired sd" in s["tolerance_rule"]


def test_noisy_repeats_widen_floor_and_tolerance() -> None:
    runs = [tuple(map(list, simulate_prompts(100, 3.8, 1.2, seed=s))) for s in range(4)]
    s = summarise_repeats(runs)
    assert s["run_sd"] > 0 and s["paired_sd"] > 0 and not s["identical_answers"]
    assert s["suggested_relative_drop"] > 0.005
    with pytest.raises(ValueError):
        summarise_repeats(runs[:1])


def test_repeats_move_only_sampled_workloads_seeds() -> None:
    text = tiny_variant("cal") + """
[[workloads]]
name = "t06"
kind = "gsm8k"
questions = 10
temperature = 0.6
sampling_seed = 7
[workloads.floors]
accept_length = 1.2
"""
    loaded = loaded_from_text(text, "cal.toml")
    assert with_seeds(loaded, 0) is loaded
    second = with_seeds(loaded, 2)
    assert second.suite.workload.sampling_seed is None  # greedy: the same prompts again
    assert second.suite.workloads[0].sampling_seed == 7 + 2 * SEED_STRIDE
    assert second.sha256 != loaded.sha256


def test_show_says_where_floors_came_from(tmp_path) -> None:
    lines = calibration_lines(load_suite("tiny_dflash_cpu"), tmp_path)
    assert lines[0].startswith("floors and tolerance: external")
    lines = calibration_lines(load_suite("gemma4_dflash_31b"), tmp_path)
    assert any("external" in line for line in lines)


def test_suggested_floor_is_a_prediction_bound_for_the_next_run() -> None:
    """Case 6: N = 3 healthy runs, then a fourth: it falls below the suggested floor with
    probability alpha (t with N - 1 degrees of freedom, sqrt(1 + 1/N)); the earlier
    mean - z sd put about 10% of healthy next runs below a 5% floor."""
    import numpy as np

    from harness.metrics.calibration import prediction_floor
    from harness.metrics.stats import t_quantile

    assert t_quantile(0.95, 2) == pytest.approx(2.919986, abs=1e-6)
    assert t_quantile(0.95, 4) == pytest.approx(2.131847, abs=1e-6)
    assert t_quantile(0.975, 9) == pytest.approx(2.262157, abs=1e-6)
    rng = np.random.default_rng(5)
    draws = rng.normal(5.0, 0.05, (20_000, 4))
    below = sum(row[3] < prediction_floor(list(row[:3]), 0.0001, 0.05) for row in draws)
    assert below / 20_000 == pytest.approx(0.05, abs=0.006)  # binomial sd 0.0015
    old = sum(row[3] < row[:3].mean() - 1.6449 * row[:3].std(ddof=1) for row in draws)
    assert old / 20_000 > 0.09  # what the landed rule did
