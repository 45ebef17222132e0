"""Coverage of 95% intervals for accept length at small prompt counts: the harness's
percentile bootstrap (`stats.bootstrap_ci`, equal to scipy.stats.bootstrap's percentile
interval, paired) vs scipy's BCa interval of the same bootstrap vs the delta method.

Runs of n prompts with known truth come from `harness.analysis.simulate.simulate_prompts`; each
interval is computed on each run and we count how often it holds the truth (and how often
the truth lies above / below it). 2000 bootstrap replicates for both bootstraps. Run:
    python benchmarks/bench_bootstrap.py [--reps 200]
"""

from __future__ import annotations

import argparse
import time

CASES = ((5.0, 0.75), (3.6, 1.29))  # (accept length, per-prompt sd): GSM8K-like, tiny-suite-like
SIZES = (10, 20, 30, 60, 120)


def delta_interval(tokens, steps):  # type: ignore[no-untyped-def]
    from harness.metrics import stats

    d = stats.wald(stats.accept_length(tokens, steps), stats.standard_error(tokens, steps))
    return d.ci


def bca_interval(seed: int):  # type: ignore[no-untyped-def]
    import numpy as np
    from scipy.stats import bootstrap

    rng = np.random.default_rng(seed)

    def interval(tokens, steps):  # type: ignore[no-untyped-def]
        result = bootstrap((tokens, steps), lambda t, s, axis=-1: t.sum(axis) / s.sum(axis),
                           paired=True, vectorized=True, method="BCa", n_resamples=2000,
                           confidence_level=0.95, rng=rng)  # fmt: skip
        return result.confidence_interval.low, result.confidence_interval.high

    return interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="simulated runs per cell")
    args = parser.parse_args(argv)
    import numpy as np

    from harness.analysis.simulate import simulate_prompts
    from harness.metrics import stats

    methods = {"percentile (harness)": lambda t, s: stats.bootstrap_ci(t, s, seed=1),
               "delta method": delta_interval, "BCa (scipy)": bca_interval(1)}  # fmt: skip
    began = time.perf_counter()
    print(f"95% intervals, {args.reps} runs per cell; coverage (truth below / above the interval)")
    print(f"{'truth, sd':>10} {'n':>4} " + " ".join(f"{m:>30}" for m in methods))
    for accept, sd in CASES:
        for n in SIZES:
            rng = np.random.default_rng(n)
            runs = [simulate_prompts(n, accept, prompt_sd=sd, seed=rng) for _ in range(args.reps)]
            cells = []
            for method in methods.values():
                low = high = 0
                for tokens, steps in runs:
                    ci = method(tokens, steps)
                    low += accept < ci[0]
                    high += accept > ci[1]
                cover = 1 - (low + high) / args.reps
                cells.append(f"{100 * cover:5.1f}% ({100 * low / args.reps:4.1f} / "
                             f"{100 * high / args.reps:4.1f})")  # fmt: skip
            print(f"{accept:>5}, {sd:<4} {n:>4} " + " ".join(f"{c:>30}" for c in cells),
                  flush=True)  # fmt: skip
    print(f"{time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
