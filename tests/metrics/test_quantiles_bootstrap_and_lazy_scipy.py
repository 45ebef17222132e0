"""The t distribution and the spending boundaries' normal tail and root come from scipy,
the bootstrap stays numpy's (docs/statistics.md, "Which library computes what"); the
expected values here do not come from scipy: printed t and spending tables, closed forms,
the normal limit, the bootstrap's definition written out with numpy's generator. The
bootstrap is also checked against scipy.stats.bootstrap, which it must equal.

Accuracy and time of each piece against the alternative: `python benchmarks/bench_stats.py`.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.metrics import calibration, paired_gate, spending, stats

# Student-t quantiles to 3 decimals as printed in the tables (NIST/SEMATECH e-Handbook of
# Statistical Methods, 1.3.6.7.2, "Critical values of the Student's t distribution"):
# {df: (t_0.90, t_0.95, t_0.975, t_0.99, t_0.995, t_0.999)}.
LEVELS = (0.90, 0.95, 0.975, 0.99, 0.995, 0.999)
TABLE = {10: (1.372, 1.812, 2.228, 2.764, 3.169, 4.144),
         30: (1.310, 1.697, 2.042, 2.457, 2.750, 3.385),
         100: (1.290, 1.660, 1.984, 2.364, 2.626, 3.174),
         math.inf: (1.282, 1.645, 1.960, 2.326, 2.576, 3.090)}  # fmt: skip

# The closed forms (Hill 1970): df 1 is the Cauchy law (tan(pi (p - 1/2)), written as
# cot(pi (1 - p)), which keeps its digits near p = 1), df 2 and 4 invert algebraically.
CLOSED_FORMS = {
    1: lambda p: 1 / math.tan(math.pi * (1 - p)),
    2: lambda p: (2 * p - 1) / math.sqrt(2 * p * (1 - p)),
    4: lambda p: math.copysign(
        2 * math.sqrt(math.cos(math.acos(math.sqrt(4 * p * (1 - p))) / 3)
                      / math.sqrt(4 * p * (1 - p)) - 1), p - 0.5),
}  # fmt: skip


@pytest.mark.parametrize("df", sorted(TABLE))
def test_t_quantile_matches_the_printed_table(df: float) -> None:
    for p, printed in zip(LEVELS, TABLE[df], strict=True):
        assert stats.t_quantile(p, df) == pytest.approx(printed, abs=0.0005 + 1e-9)


def test_t_quantile_known_values_at_one_degree_of_freedom_and_the_limit() -> None:
    assert stats.t_quantile(0.975, 1) == pytest.approx(12.7062, abs=5e-5)
    assert stats.t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=5e-6)
    assert stats.t_quantile(0.975, 10**6) == pytest.approx(1.95996, abs=1e-5)
    assert stats.t_quantile(0.5, 3) == 0.0


@pytest.mark.parametrize("df", sorted(CLOSED_FORMS))
@pytest.mark.parametrize("p", [0.5001, 0.6, 0.9, 0.95, 0.975, 0.999, 0.9999, 1 - 8.9e-5,
                               1 - 3e-8])
def test_t_quantile_matches_the_closed_forms_at_small_df(df: int, p: float) -> None:
    """The degrees of freedom the paired gate (2 questions: df 1) and a calibration of
    3 or 5 runs use, and the levels of the gate's spent alpha (its default design tests
    the first look at 8.9e-5, more looks far lower)."""
    assert stats.t_quantile(p, df) == pytest.approx(CLOSED_FORMS[df](p), rel=1e-10)


@given(p=st.floats(0.5, 0.9999), df=st.integers(10**5, 10**9))
def test_t_quantile_at_large_df_is_the_normal_one_plus_its_first_correction(
    p: float, df: int
) -> None:
    """t_p = z + (z^3 + z) / (4 df) + O(1/df^2) (Abramowitz and Stegun 26.7.5)."""
    z = NormalDist().inv_cdf(p)
    assert stats.t_quantile(p, df) == pytest.approx(z + (z**3 + z) / (4 * df), abs=1e-8)


@given(p=st.floats(0.5, 0.9999), df=st.integers(1, 10**6))
def test_t_quantile_is_above_the_normal_one_and_falls_with_df(p: float, df: int) -> None:
    t = stats.t_quantile(p, df)
    assert t >= NormalDist().inv_cdf(p) - 1e-12
    assert stats.t_quantile(p, df + 1) <= t + 1e-12


@pytest.mark.parametrize("p, df", [(0.0, 5), (1.0, 5), (1.5, 5), (math.nan, 5), (0.9, 0),
                                   (0.9, -3), (0.9, math.nan)])
def test_t_quantile_refuses_what_has_no_quantile(p: float, df: float) -> None:
    with pytest.raises(ValueError):
        stats.t_quantile(p, df)


def test_the_paired_gates_interval_on_two_questions_uses_t_with_one_df() -> None:
    """Two questions: df 1, so the one-sided 95% bound is 6.3138 standard errors away
    (tan(0.45 pi)); the normal-based 1.645 would call far too much settled."""
    a = ([40.0, 50.0], [10.0, 10.0])
    b = ([41.0, 47.0], [10.0, 10.0])
    result = paired_gate.paired_test(a, b, paired_gate.Tolerance(0.05, True, "server_avg"))
    low, high = result.difference_ci or (math.nan, math.nan)
    assert (high - low) / (2 * result.margin_se) == pytest.approx(6.313752, abs=5e-6)
    assert result.upper - result.margin == pytest.approx(6.313752 * result.margin_se)


def test_calibration_floor_uses_t_with_n_minus_1_df() -> None:
    """Three runs 1, 2, 3 (mean 2, sd 1): floor = 2 - t_{0.95, 2} sqrt(4/3), t = 2.919986."""
    floor = calibration.prediction_floor([1.0, 2.0, 3.0], within_se=0.0, alpha=0.05)
    assert floor == pytest.approx(2 - 2.919986 * math.sqrt(4 / 3), abs=1e-5)


def test_spent_boundaries_match_the_published_lan_demets_tables() -> None:
    """One-sided 0.025, equally spaced looks, as tabulated for Lan-DeMets spending (e.g.
    R's gsDesign and ldbounds): O'Brien-Fleming type 4.333 / 2.963 / 2.359 / 2.014 at four
    looks, 2.963 / 1.969 at two; Pocock type 2.157 / 2.201 at two; one look: z_{0.975}."""
    quarters = spending.boundaries([0.25, 0.5, 0.75, 1.0], 0.025)
    assert quarters == pytest.approx([4.333, 2.963, 2.359, 2.014], abs=5e-4)
    assert spending.boundaries([0.5, 1.0], 0.025) == pytest.approx([2.963, 1.969], abs=5e-4)
    assert spending.boundaries([0.5, 1.0], 0.025, "pocock") == pytest.approx([2.157, 2.201],
                                                                              abs=5e-4)
    assert spending.boundaries([1.0], 0.025) == pytest.approx([1.959964], abs=1e-6)


# ------------------------------------------------------------------------- the bootstrap


def by_definition(tokens: list[float], steps: list[float], level: float, n_boot: int,
                  seed: int) -> tuple[float, float]:
    """The harness's bootstrap, written out: n prompts drawn with replacement by numpy's
    generator seeded with `seed` (one row of indices per replicate), each replicate's ratio
    of sums, the replicates without a verify step left out, the percentile interval."""
    t, s = np.asarray(tokens, float), np.asarray(steps, float)
    index = np.random.default_rng(seed).integers(0, t.size, size=(n_boot, t.size))
    drawn_steps = s[index].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = t[index].sum(axis=1) / drawn_steps
    ratios = ratios[drawn_steps > 0]
    tail = (1 - level) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


@pytest.mark.parametrize("n", [2, 7, 60, 200])
@pytest.mark.parametrize("level", [0.5, 0.6827, 0.95, 0.99])
def test_bootstrap_is_the_prompt_percentile_bootstrap_of_the_ratio(n: int, level: float) -> None:
    """The recorded seed gives the recorded interval, whatever computes it."""
    from harness.analysis.simulate import simulate_prompts

    tokens, steps = simulate_prompts(n, 4.2, prompt_sd=1.0, seed=n)
    for seed in (0, 3):
        expected = by_definition(tokens, steps, level, 500, seed)
        got = stats.bootstrap_ci(tokens, steps, level=level, n_boot=500, seed=seed)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("n", [2, 30, 200])
def test_bootstrap_is_scipys_percentile_bootstrap_with_the_same_generator(n: int) -> None:
    """scipy.stats.bootstrap(paired=True, method="percentile") on the ratio of sums, fed
    numpy's generator with the same seed, draws the same replicates: the same interval
    (kept in numpy for speed and start-up, `stats.bootstrap_ci`'s docstring)."""
    from scipy.stats import bootstrap

    from harness.analysis.simulate import simulate_prompts

    tokens, steps = simulate_prompts(n, 5.0, prompt_sd=0.75, seed=n)
    for level, seed in ((0.95, 0), (0.6827, 4)):
        result = bootstrap((tokens.astype(float), steps.astype(float)),
                           lambda t, s, axis=-1: t.sum(axis=axis) / s.sum(axis=axis),
                           n_resamples=1000, vectorized=True, paired=True,
                           confidence_level=level, method="percentile",
                           rng=np.random.default_rng(seed))  # fmt: skip
        expected = (result.confidence_interval.low, result.confidence_interval.high)
        got = stats.bootstrap_ci(tokens, steps, level=level, n_boot=1000, seed=seed)
        assert got == pytest.approx(expected, rel=1e-12)


def test_bootstrap_is_reproducible_with_its_seed_and_moves_with_another() -> None:
    from harness.analysis.simulate import simulate_prompts

    tokens, steps = simulate_prompts(40, 3.6, prompt_sd=1.29, seed=11)
    first = stats.bootstrap_ci(tokens, steps, seed=7)
    assert stats.bootstrap_ci(list(tokens), list(steps), seed=7) == first
    assert stats.bootstrap_ci(tokens, steps, seed=8) != first
    low, high = first
    assert low < stats.accept_length(tokens, steps) < high


def test_bootstrap_leaves_out_replicates_without_a_verify_step() -> None:
    """A question that ended at prefill (0 steps, numerator 0) is a prompt like the others;
    a replicate that drew only such questions has no ratio and is left out, silently."""
    tokens, steps = [0, 7, 0, 9, 5], [0, 3, 0, 4, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = stats.bootstrap_ci(tokens, steps, level=0.9, n_boot=400, seed=2)
    assert all(math.isfinite(bound) for bound in got)
    assert got == pytest.approx(by_definition(tokens, steps, 0.9, 400, 2), rel=1e-12)


def test_bootstrap_of_equal_ratios_is_that_ratio() -> None:
    low, high = stats.bootstrap_ci([3, 6, 9], [1, 2, 3])
    assert low == pytest.approx(3.0) and high == pytest.approx(3.0)
    assert stats.bootstrap_ci([8], [2]) == (4.0, 4.0)


# --------------------------------------------------------------------- start-up stays light

PROBE = """
import runpy, sys
sys.argv = ["harness", *sys.argv[1:]]
try:
    runpy.run_module("harness", run_name="__main__")
except SystemExit:
    pass
print("SCIPY" if "scipy" in sys.modules else "NO-SCIPY")
"""


@pytest.mark.parametrize("argv", [("--help",), ("power", "--help"), ("calibrate", "--help"),
                                  ("compare", "--help")])
def test_help_does_not_import_scipy(argv: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                          text=True, check=True)  # fmt: skip
    assert done.stdout.strip().splitlines()[-1] == "NO-SCIPY"


def test_a_runs_figures_and_cis_need_no_scipy_stats() -> None:
    """A faulted run records its partial figures, CIs included, and must exit within 5 s
    (tests/run/test_faults_lose_nothing.py): recording them does not import scipy.stats
    (seconds on a loaded machine; `python benchmarks/bench_stats.py` times the fault path
    with scipy's bootstrap)."""
    probe = """
import sys
from harness.metrics import breakdown, measure
rows = [{"index": i, "question_index": i, "category": "ab"[i % 2], "verify_steps": 10 + i,
         "correct_drafts": 2 * i, "completion_tokens": 3 * i + 11,
         "accept_histogram": [10 - i % 3, i % 3, 0, i]} for i in range(12)]
assert measure.confidence_interval(rows, "server_avg", 0)
assert breakdown.per_position(rows, seed=0)[1] and breakdown.categories(rows, "server_avg", 0)
print("scipy.stats" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "False"


def test_the_statistics_modules_import_without_scipy() -> None:
    """Commands import these at their top: scipy loads only when a figure is computed."""
    probe = ("import sys; import harness.metrics.stats, harness.metrics.stopping, "
             "harness.metrics.paired_gate, harness.metrics.calibration, "
             "harness.metrics.spending, harness.metrics.measure, harness.metrics.breakdown; "
             "print('scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)  # fmt: skip
    assert done.stdout.strip() == "False"
