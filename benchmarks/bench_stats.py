"""scipy against the hand-written statistics it replaced (issue 37): accuracy over the
ranges the harness uses, time per call and at the harness's own call counts, and what
importing scipy costs.

Each hand-written piece the harness no longer has is kept below as it was, and measured
against what the harness calls now; where the harness kept its own (the bootstrap, the
normal law, a density), scipy's candidate is measured against it:
- Student-t quantile: the Cornish-Fisher expansion (Abramowitz and Stegun 26.7.5; was
  `stats.t_quantile`) and Simpson's rule with bisection (was
  `calibration.t_quantile_exact`) against scipy.special.stdtrit (now `stats.t_quantile`)
  and scipy.stats.t.ppf; df 1..10^6, p 0.5..0.9999 and the paired gate's spent levels.
  The truth: mpmath at 40 digits when it is installed (the reference extra brings it),
  else scipy.stats.t.ppf.
- normal cdf and quantile: the standard library's NormalDist (kept) against
  scipy.stats.norm and scipy.special.ndtr / ndtri.
- group-sequential boundaries (`spending`): the normal tail by np.vectorize(math.erfc)
  and the bisection (was) against scipy.special.ndtr and scipy.optimize.brentq (now); the
  density's formula (kept) against scipy.stats.norm.pdf.
- bootstrap CI: numpy (`stats.bootstrap_ci`, kept) against the candidate
  scipy.stats.bootstrap, percentile, paired over prompts, the same generator and seed, on
  synthetic rows with fixed seeds (results/ in the checkout holds baselines, no request
  rows): how far the intervals differ, time per call, every CI that `measure.summarise`
  computes for a Spec-Bench record (13 categories, 16 draft tokens), the first CI in a
  fresh interpreter, and the fault path: a real `harness run` against the SGLang test
  double whose server is killed mid-measurement (tests/run/fault_cases.py), timed from the
  fault to the exit with each bootstrap (the partial record and its CI are written in
  between; the bound is 5 s). Needs the sglang 0.5.23 wheel ($HARNESS_SGLANG_WHEELS, as
  `nox -s bench` sets it), else says it was not measured.
- import cost: fresh interpreters importing numpy, scipy.special, scipy.stats (bytecode
  written once to .cache/pycache first, as an installed package has it); and whether
  `harness --help` loads scipy.

Times are the best of `--rounds` rounds (the machine may be shared); each line prints the
ratio to the piece it is compared with. Run:
    python benchmarks/bench_stats.py [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DFS = (1, 2, 3, 4, 5, 7, 9, 10, 14, 19, 29, 49, 99, 149, 199, 499, 999, 1318, 10**4, 10**5,
       10**6)
LEVELS = (0.5, 0.55, 0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9999)


# ------------------------------------------------------------ the hand-written pieces, as were


def t_cornish_fisher(p: float, df: float) -> float:
    """Was `stats.t_quantile`: Cornish-Fisher in 1/df (A&S 26.7.5)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


def t_simpson(p: float, df: int) -> float:
    """Was `calibration.t_quantile_exact` (without its cache): the density integrated by
    Simpson's rule, inverted by bisection; closed forms at df 1 and 2."""
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    log_c = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2)
             - 0.5 * math.log(df * math.pi))

    def upper_tail(x: float) -> float:
        steps = 2000
        h = x / steps
        total = 0.0
        for i in range(steps + 1):
            u = i * h
            weight = 1 if i in (0, steps) else (4 if i % 2 else 2)
            total += weight * math.exp(log_c - (df + 1) / 2 * math.log1p(u * u / df))
        return 0.5 - total * h / 3

    low, high = 0.0, 1.0
    while upper_tail(high) > 1 - p:
        high *= 2
    for _ in range(60):
        middle = (low + high) / 2
        if upper_tail(middle) > 1 - p:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def sf_by_erfc(x: Any) -> Any:
    """Was `spending._sf`."""
    import numpy as np

    return 0.5 * np.vectorize(math.erfc, otypes=[float])(np.asarray(x) / math.sqrt(2.0))


def root_by_bisection(f: Callable[[float], float], low: float, high: float,
                      tol: float = 1e-10) -> float:
    """Was `spending._bisect`."""
    f_low = f(low)
    for _ in range(200):
        middle = (low + high) / 2.0
        if high - low < tol:
            break
        if (f(middle) > 0) == (f_low > 0):
            low, f_low = middle, f(middle)
        else:
            high = middle
    return (low + high) / 2.0


def bootstrap_by_scipy(tokens: Any, steps: Any, level: float = 0.95, n_boot: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """The candidate for `stats.bootstrap_ci`: scipy.stats.bootstrap, paired over prompts,
    percentile, the same generator and seed; replicates without a verify step left out."""
    import warnings

    import numpy as np
    from scipy.stats import DegenerateDataWarning, bootstrap, quantile

    def ratio(t: Any, s: Any, axis: int = -1) -> Any:
        drawn = s.sum(axis=axis)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(drawn > 0, t.sum(axis=axis) / drawn, np.nan)

    t, s = np.asarray(tokens, dtype=float), np.asarray(steps, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)
        result = bootstrap((t, s), ratio, n_resamples=n_boot, vectorized=True, paired=True,
                           confidence_level=level, method="percentile",
                           rng=np.random.default_rng(seed))  # fmt: skip
    low, high = result.confidence_interval
    if math.isnan(low) or math.isnan(high):
        tail = (1.0 - level) / 2.0
        low, high = quantile(result.bootstrap_distribution, [tail, 1.0 - tail],
                             nan_policy="omit")  # fmt: skip
    return float(low), float(high)


# ------------------------------------------------------------------------------ helpers


def per_call(fn: Callable[[], object], calls: int, rounds: int) -> float:
    """Seconds per call, the best of `rounds` rounds of `calls` calls."""
    best = math.inf
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - began) / calls)
    return best


def shown(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.1f} us"


def errors(values: list[float], truth: list[float]) -> tuple[float, float]:
    """(max abs error, max relative error; the relative one where the truth is not 0)."""
    absolute = max(abs(v - t) for v, t in zip(values, truth, strict=True))
    relative = max((abs(v - t) / abs(t) for v, t in zip(values, truth, strict=True) if t),
                   default=0.0)
    return absolute, relative


@contextlib.contextmanager
def patched(module: object, **names: object) -> Iterator[None]:
    saved = {name: getattr(module, name) for name in names}
    for name, value in names.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def spent_levels() -> list[float]:
    """1 - each look's nominal alpha of the paired gate's designs at 4 and 8 looks, alpha
    0.05 and 0.01 (the default, 4 looks at 0.05, tests its first look at 8.9e-5; 8 looks
    at 0.01, at 3.2e-13)."""
    from harness.metrics.spending import nominal_alphas

    levels = set()
    for looks in (4, 8):
        for alpha in (0.05, 0.01):
            fractions = [(k + 1) / looks for k in range(looks)]
            levels |= {1 - a for a in nominal_alphas(fractions, alpha) if a > 0}
    return sorted(levels)


# ------------------------------------------------------------------------- t quantile


def t_truth() -> tuple[Callable[[float, float], float], str]:
    try:
        import mpmath as mp
    except ImportError:
        from scipy.stats import t

        return (lambda p, df: float(t.ppf(p, df))), "scipy.stats.t.ppf (mpmath not installed)"
    from scipy.special import stdtrit

    mp.mp.dps = 40

    def cdf(x: Any, df: Any) -> Any:
        tail = mp.betainc(df / 2, mp.mpf(1) / 2, 0, df / (df + x * x), regularized=True) / 2
        return 1 - tail if x >= 0 else tail

    def quantile(p: float, df: float) -> float:
        if p == 0.5:
            return 0.0
        target, nu = mp.mpf(p), mp.mpf(df)
        start = mp.mpf(float(stdtrit(df, p)))
        return float(mp.findroot(lambda x: cdf(x, nu) - target, start))

    return quantile, "mpmath at 40 digits (betainc inverted by findroot)"


def bench_t(rounds: int, quick: bool) -> None:
    from scipy.special import stdtrit
    from scipy.stats import t as student

    from harness.metrics import stats

    truth_of, source = t_truth()
    levels = sorted(set(LEVELS) | set(spent_levels()))
    grid = [(p, df) for df in DFS for p in levels]
    truth = {(p, df): truth_of(p, df) for p, df in grid}
    print(f"\n## Student-t quantile: {len(grid)} points, df {DFS[0]}..{DFS[-1]:.0e}, "
          f"p {levels[0]} to 1 - {1 - levels[-1]:.2g}; truth: {source}")
    # the domains the harness asks about (docs/statistics.md)
    domains = {
        "whole grid": lambda p, df: True,
        "df >= 10 (Cornish-Fisher's stated range)": lambda p, df: df >= 10,
        "paired gate: df >= 1, p >= 0.95": lambda p, df: p >= 0.95,
        "sequential rule: df >= 19, p 0.9-0.999": lambda p, df: df >= 19 and .9 <= p <= .999,
        "calibration: df 1-19, p 0.9-0.99": lambda p, df: df <= 19 and .9 <= p <= .99,
    }
    methods: dict[str, Callable[[float, float], float]] = {
        "Cornish-Fisher (was stats)": t_cornish_fisher,
        "scipy.special.stdtrit (stats.t_quantile)": stats.t_quantile,
        "scipy.stats.t.ppf": lambda p, df: float(student.ppf(p, df)),
    }
    print(f"{'method':<44} {'domain':<42} {'max abs error':>14} {'max rel error':>14}")
    for name, method in methods.items():
        values = {point: method(*point) for point in grid}
        for label, inside in domains.items():
            points = [point for point in grid if inside(*point)]
            absolute, relative = errors([values[q] for q in points], [truth[q] for q in points])
            print(f"{name:<44} {label:<42} {absolute:>14.3g} {relative:>14.3g}")
    same = all(float(stdtrit(df, p)) == float(student.ppf(p, df)) for p, df in grid)
    print(f"scipy.special.stdtrit == scipy.stats.t.ppf at every point: {same}")
    # Simpson is slow (a few hundred ms a call): its own, smaller grid
    simpson_dfs = (3, 5, 10, 30, 1000) if quick else (3, 4, 5, 7, 9, 14, 19, 49, 999, 10**6)
    simpson_grid = [(p, df) for df in simpson_dfs for p in (0.6, 0.9, 0.95, 0.975, 0.99, 0.9999)]
    values = [t_simpson(p, df) for p, df in simpson_grid]
    absolute, relative = errors(values, [truth_of(p, df) for p, df in simpson_grid])
    print(f"{'Simpson + bisection (was calibration)':<44} "
          f"{f'{len(simpson_grid)} points, df 3..{simpson_dfs[-1]}':<42} "
          f"{absolute:>14.3g} {relative:>14.3g}")

    calls = 2000
    timings = {
        "Cornish-Fisher (was stats)": per_call(lambda: t_cornish_fisher(0.975, 49), calls,
                                                rounds),
        "scipy.special.stdtrit (stats.t_quantile)": per_call(
            lambda: stats.t_quantile(0.975, 49), calls, rounds),
        "scipy.stats.t.ppf": per_call(lambda: float(student.ppf(0.975, 49)), calls // 10,
                                      rounds),
        "Simpson + bisection (was calibration)": per_call(lambda: t_simpson(0.975, 49), 1,
                                                           rounds),
    }
    base = timings["Cornish-Fisher (was stats)"]
    print("time per call (p 0.975, df 49):")
    for name, seconds in timings.items():
        print(f"  {name:<44} {shown(seconds):>10} = {seconds / base:8.1f} x Cornish-Fisher")
    counted = t_calls_of_power()
    for suite, count in counted.items():
        line = ", ".join(f"{name.split(' (')[0]} {shown(count * seconds)}"
                         for name, seconds in timings.items())  # fmt: skip
        print(f"`harness power {suite}` asks for {count} t quantiles: {line}")


def t_calls_of_power() -> dict[str, int]:
    """How many t quantiles `harness power SUITE` asks for (the most of any command),
    counted on the shipped suites whose workload is found on this machine."""
    from harness.commands.power import power_report
    from harness.errors import BadInput
    from harness.metrics import stats, stopping
    from harness.suite.model import load_suite

    counted: dict[str, int] = {}
    original = stats.t_quantile
    count = [0]

    def counting(p: float, df: float) -> float:
        count[0] += 1
        return original(p, df)

    for suite in ("tiny_dflash_cpu", "gemma4_dflash_31b", "qwen3_8b_dflash_spec_bench"):
        count[0] = 0
        with (patched(stats, t_quantile=counting), patched(stopping, t_quantile=counting),
              tempfile.TemporaryDirectory() as empty):
            try:
                power_report(load_suite(suite), Path(empty))
            except BadInput as error:
                print(f"`harness power {suite}`: not counted ({str(error)[:80]}...)")
                continue
        counted[suite] = count[0]
    return counted


# ---------------------------------------------------------------------------- normal law


def bench_normal(rounds: int) -> None:
    from statistics import NormalDist

    import numpy as np
    from scipy.special import ndtr, ndtri
    from scipy.stats import norm

    normal = NormalDist()
    ps = np.concatenate([np.logspace(-12, -1, 60), np.linspace(0.1, 0.9, 81),
                         1 - np.logspace(-1, -12, 60)])
    zs = np.linspace(-8, 8, 321)
    quantiles = [normal.inv_cdf(float(p)) for p in ps]
    cdfs = [normal.cdf(float(z)) for z in zs]
    print("\n## Normal law: the standard library's NormalDist (kept) against scipy")
    for name, values, truth in (
            ("quantile, p 1e-12..1 - 1e-12: scipy.special.ndtri", list(ndtri(ps)), quantiles),
            ("quantile: scipy.stats.norm.ppf", list(norm.ppf(ps)), quantiles),
            ("cdf, z -8..8: scipy.special.ndtr", list(ndtr(zs)), cdfs)):
        absolute, relative = errors([float(v) for v in values], truth)
        print(f"  NormalDist vs {name:<52} max abs {absolute:.3g}, max rel {relative:.3g}")
    calls = 5000
    timings = {"NormalDist().inv_cdf": per_call(lambda: normal.inv_cdf(0.975), calls, rounds),
               "scipy.special.ndtri": per_call(lambda: float(ndtri(0.975)), calls, rounds),
               "scipy.stats.norm.ppf": per_call(lambda: float(norm.ppf(0.975)), calls // 20,
                                                rounds)}  # fmt: skip
    base = timings["NormalDist().inv_cdf"]
    print("  time per scalar quantile: " + ", ".join(
        f"{name} {shown(seconds)} ({seconds / base:.0f} x)" for name, seconds in timings.items()))


# ------------------------------------------------------------------ spending boundaries

DESIGNS = [(looks, alpha, kind) for looks in (2, 4, 8) for alpha in (0.025, 0.05)
           for kind in ("obrien_fleming", "pocock")]


def boundaries_of(design: tuple[int, float, str]) -> tuple[float, ...]:
    from harness.metrics import spending

    looks, alpha, kind = design
    fractions = tuple((k + 1) / looks for k in range(looks))
    return spending._boundaries.__wrapped__(fractions, alpha, kind)  # uncached


def bench_spending(rounds: int) -> None:
    import numpy as np
    from scipy.stats import norm

    from harness.metrics import spending

    def hand_root(f: Callable[[float], float], low: float, high: float) -> float:
        return root_by_bisection(f, low, high)

    variants: dict[str, dict[str, object]] = {
        "erfc + bisection (was)": {"_sf": sf_by_erfc, "_root": hand_root},
        "ndtr + brentq (now)": {},
        "ndtr + brentq + scipy.stats.norm.pdf": {"_pdf": norm.pdf},
    }
    results: dict[str, list[tuple[float, ...]]] = {}
    timings: dict[str, float] = {}
    for name, names in variants.items():
        with patched(spending, **names):
            results[name] = [boundaries_of(design) for design in DESIGNS]
            timings[name] = per_call(lambda: boundaries_of((4, 0.05, "obrien_fleming")), 1,
                                     rounds)  # fmt: skip
    print(f"\n## Lan-DeMets boundaries ({len(DESIGNS)} designs: 2, 4, 8 looks, alpha 0.025 "
          "and 0.05, both spending functions)")
    was = results["erfc + bisection (was)"]
    base = timings["erfc + bisection (was)"]
    for name, found in results.items():
        gap = max(abs(a - b) for old, new in zip(was, found, strict=True)
                  for a, b in zip(old, new, strict=True) if math.isfinite(a))
        print(f"  {name:<40} max |c - c(was)| {gap:.2g}; 4 looks in {shown(timings[name])} "
              f"= {timings[name] / base:.2f} x was")
    grid = np.linspace(-10, 10, 1201)
    kernel = grid[:, None] - grid[None, :]
    formula = per_call(lambda: spending._pdf(kernel), 1, rounds)
    scipy_pdf = per_call(lambda: norm.pdf(kernel), 1, rounds)
    gap = float(np.max(np.abs(spending._pdf(kernel) - norm.pdf(kernel))))
    print(f"  density on one look's 1201 x 1201 kernel: formula (kept) {shown(formula)}, "
          f"scipy.stats.norm.pdf {shown(scipy_pdf)} = {scipy_pdf / formula:.1f} x, "
          f"max |difference| {gap:.2g}")
    tail_hand = per_call(lambda: sf_by_erfc(grid), 20, rounds)
    tail_scipy = per_call(lambda: spending._sf(grid), 20, rounds)
    tail_stats = per_call(lambda: norm.sf(grid), 20, rounds)
    print(f"  normal tail on 1201 points (a root finder's step): erfc {shown(tail_hand)}, "
          f"scipy.special.ndtr {shown(tail_scipy)} = {tail_scipy / tail_hand:.2f} x, "
          f"scipy.stats.norm.sf {shown(tail_stats)} = {tail_stats / tail_hand:.2f} x")


# ------------------------------------------------------------------------------ bootstrap


def spec_bench_rows(seed: int = 0) -> list[dict[str, Any]]:
    """A Spec-Bench-sized run: 480 questions in 13 categories (5 of 80, 8 of 10), DFlash
    with 16 draft tokens (the correct drafts of a step: 0..15)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    categories = [*(f"large{k}" for k in range(5) for _ in range(80)),
                  *(f"small{k}" for k in range(8) for _ in range(10))]
    rows = []
    for index, category in enumerate(categories):
        steps = int(rng.integers(20, 150))
        mean = float(rng.gamma(4.0, 1.0))  # the question's mean correct drafts
        weights = np.exp(-np.arange(16) / max(mean, 0.3))
        histogram = rng.multinomial(steps, weights / weights.sum()).tolist()
        drafts = sum(k * n for k, n in enumerate(histogram))
        rows.append({"index": index, "question_index": index, "category": category,
                     "verify_steps": steps, "correct_drafts": drafts,
                     "completion_tokens": drafts + steps + 1, "accept_histogram": histogram,
                     "non_draft_tokens_per_step": 1})  # fmt: skip
    return rows


def record_cis(rows: list[dict[str, Any]]) -> None:
    """Every CI `measure.summarise` computes for a record."""
    from harness.metrics import breakdown, measure

    measure.confidence_interval(rows, "server_avg", 0)
    breakdown.per_position(rows, seed=0)
    breakdown.categories(rows, "server_avg", 0)


FIRST_CI = """
import sys, time
began = time.perf_counter()
sys.path.insert(0, {root!r}); sys.path.insert(0, {here!r})
from harness.analysis.simulate import simulate_prompts
from harness.metrics import stats
tokens, steps = simulate_prompts(40, 3.6, prompt_sd=1.29, seed=0)
if sys.argv[1] == "scipy":
    from bench_stats import bootstrap_by_scipy as ci
else:
    ci = stats.bootstrap_ci
ci(tokens, steps)
print(time.perf_counter() - began)
"""


def first_ci(which: str, repeat: int) -> float:
    """Median wall time of a fresh interpreter's first CI of 40 prompts (the faults
    tests' run), imports included."""
    code = FIRST_CI.format(root=str(ROOT), here=str(Path(__file__).parent))
    walls = [float(subprocess.run([sys.executable, "-c", code, which], env=bytecode_env(),
                                  capture_output=True, text=True, check=True).stdout)
             for _ in range(repeat + 1)][1:]  # fmt: skip
    return statistics.median(walls)


# Loaded by every Python process of a faulted `harness run` (PYTHONPATH): the same imports
# in both variants, and with "scipy" the records' CIs by scipy.stats.bootstrap.
SITECUSTOMIZE = """
import os, sys
sys.path.insert(0, {here!r})
from harness.metrics import stats
import bench_stats
if os.environ.get("BENCH_STATS_BOOTSTRAP") == "scipy":
    stats.bootstrap_ci = bench_stats.bootstrap_by_scipy
"""


def fault_to_exit(which: str, repeat: int) -> float | str:
    """Median seconds from kill -9 of the server mid-measurement to the harness's exit
    (tests/run/test_faults_lose_nothing.py's case: the record's partial figures, CI
    included, are written before the exit), or why it was not measured."""
    from harness.audit.wheels import cached_archive
    from tests.audit.conftest import wheels_dir
    from tests.run.fault_cases import run_case

    if cached_archive("0.5.23", wheels_dir()) is None:
        return f"not measured: no sglang 0.5.23 wheel in {wheels_dir()} (`nox -s bench` has it)"
    walls = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "sitecustomize.py").write_text(
                SITECUSTOMIZE.format(here=str(Path(__file__).parent)))
            saved = os.environ.copy()
            os.environ["PYTHONPATH"] = os.pathsep.join(
                filter(None, [tmp, saved.get("PYTHONPATH")]))
            os.environ["BENCH_STATS_BOOTSTRAP"] = which
            os.environ["HARNESS_SGLANG_WHEELS"] = str(wheels_dir())  # for the test double
            try:
                outcome = run_case("measurement", "kill -9 server", Path(tmp))
            finally:
                os.environ.clear()
                os.environ.update(saved)
        if outcome.exit_code != 3 or not outcome.run_json:
            return (f"not measured: exit {outcome.exit_code}, run.json "
                    f"{outcome.run_json} ({outcome.message})")
        walls.append(outcome.fault_to_exit_s)
    return statistics.median(walls)


def bench_bootstrap(rounds: int, quick: bool, repeat: int) -> None:
    from harness.analysis.simulate import simulate_prompts
    from harness.metrics import stats

    sizes = (2, 10, 60, 200) if quick else (2, 10, 30, 60, 200, 480, 1319)
    levels = (0.5, 0.6827, 0.9, 0.95, 0.99)
    gaps, widths, cases = [], [], 0
    for n in sizes:
        for case, (accept, sd) in enumerate(((5.0, 0.75), (3.6, 1.29))):
            tokens, steps = simulate_prompts(n, accept, prompt_sd=sd, seed=100 * n + case)
            if n >= 10:
                steps[:2] = 0  # two questions that ended at prefill
                tokens[:2] = 0
            for level in levels:
                for seed in (0, 1):
                    kept = stats.bootstrap_ci(tokens, steps, level, 2000, seed)
                    scipy = bootstrap_by_scipy(tokens, steps, level, 2000, seed)
                    gaps.append(max(abs(a - b) for a, b in zip(kept, scipy, strict=True)))
                    widths.append(kept[1] - kept[0])
                    cases += 1
    print(f"\n## Bootstrap CI: numpy (stats.bootstrap_ci, kept) against scipy.stats.bootstrap, "
          f"percentile, paired; 2000 replicates; {cases} intervals: n {sizes[0]}..{sizes[-1]}, "
          f"levels {levels[0]}..{levels[-1]}, seeds 0 and 1, two questions without a verify "
          "step")
    relative = max(g / w for g, w in zip(gaps, widths, strict=True) if w > 0)
    print(f"  max |bound(scipy) - bound(numpy)| {max(gaps):.3g} (at most {relative:.3g} of the "
          f"interval's width); identical in {sum(g == 0 for g in gaps)} of {cases}")
    for n in (200, 1319):
        tokens, steps = simulate_prompts(n, 5.0, prompt_sd=0.75, seed=n)
        kept = per_call(lambda: stats.bootstrap_ci(tokens, steps), 3, rounds)  # noqa: B023
        scipy = per_call(lambda: bootstrap_by_scipy(tokens, steps), 3, rounds)  # noqa: B023
        print(f"  one CI of {n} prompts: numpy {shown(kept)}, scipy {shown(scipy)} = "
              f"{scipy / kept:.2f} x")
    rows = spec_bench_rows()
    count = [0]
    original = stats.bootstrap_ci

    def counting(*args: Any, **kwargs: Any) -> tuple[float, float]:
        count[0] += 1
        return original(*args, **kwargs)

    with patched(stats, bootstrap_ci=counting):
        record_cis(rows)
    kept = per_call(lambda: record_cis(rows), 1, max(1, rounds // 2))
    with patched(stats, bootstrap_ci=bootstrap_by_scipy):
        scipy = per_call(lambda: record_cis(rows), 1, max(1, rounds // 2))
    print(f"  a Spec-Bench record ({len(rows)} questions, 13 categories, 15 positions): "
          f"{count[0]} CIs, numpy {shown(kept)}, scipy {shown(scipy)} = {scipy / kept:.2f} x")
    kept, scipy = first_ci("numpy", repeat), first_ci("scipy", repeat)
    print(f"  the first CI in a fresh interpreter (40 prompts, imports included): "
          f"numpy {shown(kept)}, scipy {shown(scipy)} = {scipy / kept:.2f} x")
    faulted = {which: fault_to_exit(which, max(1, repeat // 2)) for which in ("numpy", "scipy")}
    if isinstance(faulted["numpy"], float) and isinstance(faulted["scipy"], float):
        print(f"  `harness run` with its server killed mid-measurement (the partial record and "
              f"its CI written, then exit 3), fault to exit, bound 5 s: numpy "
              f"{shown(faulted['numpy'])}, scipy {shown(faulted['scipy'])} = "
              f"{faulted['scipy'] / faulted['numpy']:.2f} x")
    else:
        print(f"  `harness run` with its server killed mid-measurement: "
              f"{next(v for v in faulted.values() if isinstance(v, str))}")


# --------------------------------------------------------------------------- import cost

IMPORTS = {
    "python -c pass": "pass",
    "import numpy": "import numpy",
    "import numpy, scipy.special": "import numpy, scipy.special",
    "import numpy, scipy.special, scipy.optimize": "import numpy, scipy.special, scipy.optimize",
    "import numpy, scipy.stats": "import numpy, scipy.stats",
}


def bytecode_env() -> dict[str, str]:
    """The environment of a fresh interpreter that reads (and once writes) bytecode."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(ROOT / ".cache" / "pycache"))
    return env


def bench_imports(repeat: int) -> None:
    env = bytecode_env()

    def wall(code: str) -> float:
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        return time.perf_counter() - began

    for code in IMPORTS.values():
        wall(code)  # bytecode written once, page cache warm
    times: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(repeat):
        for name, code in IMPORTS.items():
            times[name].append(wall(code))
    medians = {name: statistics.median(values) for name, values in times.items()}
    numpy = medians["import numpy"]
    print(f"\n## Import cost (fresh interpreters, median of {repeat}, interleaved)")
    for name, seconds in medians.items():
        extra = f", {shown(seconds - numpy)} over numpy" if "scipy" in name else ""
        print(f"  {name:<46} {shown(seconds):>9}{extra}")
    probe = ("import runpy, sys; sys.argv = ['harness', '--help']\n"
             "try:\n    runpy.run_module('harness', run_name='__main__')\n"
             "except SystemExit:\n    pass\nprint('scipy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True, cwd=ROOT)  # fmt: skip
    print(f"  `harness --help` imports scipy: {done.stdout.strip().splitlines()[-1]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timing rounds (best kept)")
    parser.add_argument("--repeat", type=int, default=7, help="fresh interpreters per import")
    parser.add_argument("--quick", action="store_true", help="smaller grids, fewer rounds")
    args = parser.parse_args(argv)
    rounds = 2 if args.quick else args.rounds
    sys.path.insert(0, str(ROOT))
    began = time.perf_counter()
    from importlib.metadata import version

    print(f"scipy {version('scipy')}, numpy {version('numpy')}")
    bench_imports(3 if args.quick else args.repeat)
    bench_t(rounds, args.quick)
    bench_normal(rounds)
    bench_spending(rounds)
    bench_bootstrap(rounds, args.quick, 3 if args.quick else args.repeat)
    print(f"\n{time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
