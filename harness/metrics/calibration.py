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

- floor: a one-sided prediction bound for the NEXT run of the same build (issue 27,
  case 6). The mean and the sd both come from the N runs, so the next run's figure
  minus the mean has sd sigma sqrt(1 + 1/N), and sigma's estimate has N - 1 degrees of
  freedom: floor = mean - t(1-alpha, N-1) * run_sd * sqrt(1 + 1/N). A healthy next run
  falls below it with probability alpha exactly (normal figures); the earlier mean -
  z * sd put 10% of healthy runs below a 5% floor at N = 3. When the within-run standard
  error is the larger spread (the exactly repeatable greedy case has run_sd = 0), it is
  estimated over the questions, not the runs: floor = mean - z(1-alpha) * within_se *
  sqrt(1 + 1/N), so the sampling error of the suite's questions is still kept;
- relative tolerance = (z_{1-alpha} + z_{1-beta}) * paired_sd / (sqrt(n) * mean),
  rounded up to 0.5% and at least 0.5%: the smallest tolerance at which a second launch
  of the same build is shown "not worse" with probability >= 1 - beta by the paired gate.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.metrics import stats
from harness.metrics.paired_gate import aa_false_alarm

FLOOR_RULE = ("floor = mean - t(1-alpha, N-1) * run-to-run sd * sqrt(1 + 1/N) (a prediction "
              "bound for the next run; z(1-alpha) * within-run se * sqrt(1 + 1/N) when "
              "that is larger)")
TOLERANCE_RULE = ("relative_drop = (z(1-alpha) + z(1-beta)) * paired sd / (sqrt(n) * mean), "
                  "rounded up to 0.5%, at least 0.5%")
TOLERANCE_STEP = 0.005


def summarise_repeats(runs: Sequence[tuple[Sequence[float], Sequence[float]]],
                      alpha: float = 0.05, beta: float = 0.2) -> dict[str, object]:
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
    floor = prediction_floor(figures, within_se, alpha)
    raw = (z_a + z_b) * paired_sd / (math.sqrt(n) * mean)
    tolerance = max(TOLERANCE_STEP, math.ceil(raw / TOLERANCE_STEP - 1e-9) * TOLERANCE_STEP)

    tolerated = round(tolerance, 4) * mean
    suggested_sd = math.ceil(paired_sd * 1000 - 1e-9) / 1000
    return {"n_runs": len(runs), "n_questions": n, "figures": figures, "mean": mean,
            # the [gate] block to declare: sized for the measured spread; inconclusive
            # "pass" keeps P(fail | B = A) <= alpha whatever the spread (suite/gate.py)
            "suggested_gate": {"relative_drop": round(tolerance, 4),
                               "paired_sd": suggested_sd, "inconclusive": "pass",
                               "alpha": alpha, "beta": beta},
            "p_fail_if_equal": {s: aa_false_alarm(paired_sd, tolerated, n, alpha, s)
                                for s in ("pass", "fail")},
            "min": min(figures), "max": max(figures), "run_sd": run_sd,
            "within_se": within_se, "paired_sd": paired_sd,
            "identical_answers": all(p == 0 for p in paired),
            "suggested_floor": math.floor(floor * 1000) / 1000, "floor_rule": FLOOR_RULE,
            "suggested_relative_drop": round(tolerance, 4), "tolerance_rule": TOLERANCE_RULE,
            "alpha": alpha, "beta": beta}


def prediction_floor(figures: Sequence[float], within_se: float, alpha: float) -> float:
    """The one-sided 1 - alpha prediction bound for the next run's figure (module doc)."""
    n = len(figures)
    mean, run_sd = statistics.fmean(figures), statistics.stdev(figures)
    inflate = math.sqrt(1.0 + 1.0 / n)
    by_runs = stats.t_quantile(1.0 - alpha, n - 1) * run_sd * inflate
    by_questions = stats.normal_quantile(1.0 - alpha) * within_se * inflate
    return mean - max(by_runs, by_questions)
