"""Floors and tolerances from repeated runs of one build (`harness calibrate`).

N runs of the same build on the same host (greedy entries: N launches, which shows the
engine's nondeterminism across batch compositions; sampled entries: N sets of
per-request seeds) give, per series:

- the run-to-run spread: the sd of the N figures (`run_sd`), beside the within-run
  standard error (`within_se`, delta method over questions, mean over runs);
- the paired spread between repeats: the per-question sd of run j - run i (consecutive
  repeats, `stats.ratio_difference(paired=True)`), which is the noise the paired gate
  sees between two launches of the same build.

Suggestions, each with its rule named in the record:

- floor = mean - z_{1-alpha} * max(run_sd, within_se): a healthy build's figure falls
  below it with probability about alpha, whichever of the two spreads dominates (zero
  run-to-run spread, the exactly repeatable greedy case, still keeps the sampling error
  of the suite's questions);
- relative tolerance = (z_{1-alpha} + z_{1-beta}) * paired_sd / (sqrt(n) * mean),
  rounded up to 0.5% and at least 0.5%: the smallest tolerance at which a second launch
  of the same build is shown "not worse" with probability >= 1 - beta by the paired gate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from harness.metrics import stats

FLOOR_RULE = "floor = mean - z(1-alpha) * max(run-to-run sd, within-run se)"
TOLERANCE_RULE = ("relative_drop = (z(1-alpha) + z(1-beta)) * paired sd / (sqrt(n) * mean), "
                  "rounded up to 0.5%, at least 0.5%")
TOLERANCE_STEP = 0.005


def summarise_repeats(runs: Sequence[tuple[Sequence[float], Sequence[float]]],
                      alpha: float = 0.05, beta: float = 0.2) -> dict[str, Any]:
    """Spread and suggestions from the per-question (numerators, steps) of N >= 2 runs of
    one series, each run's questions in the same order."""
    if len(runs) < 2:
        raise ValueError("a calibration needs at least 2 runs")
    n = len(runs[0][0])
    if any(len(tokens) != n for tokens, _ in runs) or n < 2:
        raise ValueError("every run needs the same questions (at least 2)")
    figures = [stats.accept_length(tokens, steps) for tokens, steps in runs]
    within = [stats.standard_error(tokens, steps) for tokens, steps in runs]
    mean = statistics.fmean(figures)
    run_sd = statistics.stdev(figures)
    within_se = statistics.fmean(within)
    paired = [stats.ratio_difference(*runs[i], *runs[i + 1], paired=True).se * math.sqrt(n)
              for i in range(len(runs) - 1)]
    paired_sd = math.sqrt(statistics.fmean([sd**2 for sd in paired]))
    z_a, z_b = stats.normal_quantile(1 - alpha), stats.normal_quantile(1 - beta)
    floor = mean - z_a * max(run_sd, within_se)
    raw = (z_a + z_b) * paired_sd / (math.sqrt(n) * mean)
    tolerance = max(TOLERANCE_STEP, math.ceil(raw / TOLERANCE_STEP - 1e-9) * TOLERANCE_STEP)
    return {"n_runs": len(runs), "n_questions": n, "figures": figures, "mean": mean,
            "min": min(figures), "max": max(figures), "run_sd": run_sd,
            "within_se": within_se, "paired_sd": paired_sd,
            "identical_answers": all(p == 0 for p in paired),
            "suggested_floor": math.floor(floor * 1000) / 1000, "floor_rule": FLOOR_RULE,
            "suggested_relative_drop": round(tolerance, 4), "tolerance_rule": TOLERANCE_RULE,
            "alpha": alpha, "beta": beta}
