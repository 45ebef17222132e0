"""The trend by question against the trend by each night's CI, on nights that asked the
same questions (`harness.analysis.trend`, docs/statistics.md "Trend by question").

Histories come from `harness.analysis.simulate.simulate_nights`: 100 questions asked every
night by an engine that is not bit-reproducible (per question and night an engine sd of
0.35, with acceptance's Poisson noise a per-question B - A sd near the calibrated 0.55;
a whole-night host shift of sd 0.02 or 0.03). Both detectors are the harness's own
(`detect_steps`, alpha 0.01, `open_drop`): by question with the night-to-night noise from
the runs (`harness.metrics.night_noise`), by CI with each night's delta-method standard
error over questions (what its bootstrap CI gives). Prints:
- the A/A false-alarm rate per history (goal: at most 1%);
- the smallest drop found with 80% power over 3 + 3 nights, with the default min shift
  (0.1) and without it (the statistics alone), for each detector (goal: by question
  finds a smaller one);
- the issue's history (4 nights at 3.8465, 3 at 3.6870, each build answering identically
  every night): found as a drop at the first night of the new build by question, not by CI.
Exit 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from harness.analysis.simulate import simulate_nights
from harness.analysis.trend import TrendParams, detect_by_question, detect_steps, open_drop
from harness.metrics import stats
from harness.metrics.night_noise import night_noise

QUESTIONS = 100
DROPS = [round(0.02 * k, 2) for k in range(1, 31)]


def by_question(tokens: np.ndarray, steps: np.ndarray, params: TrendParams) -> list:
    found, _ = detect_by_question(night_noise(tokens, steps), params)
    return found


def by_ci(tokens: np.ndarray, steps: np.ndarray, params: TrendParams) -> list:
    figures = [stats.accept_length(t, s) for t, s in zip(tokens, steps, strict=True)]
    errors = [stats.standard_error(t, s) for t, s in zip(tokens, steps, strict=True)]
    found, _ = detect_steps(figures, errors, params)
    return found


DETECTORS = {"by question": by_question, "by CI over questions": by_ci}


def alarm_rate(detect, histories: int, params: TrendParams, **kwargs) -> float:
    alarms = 0
    for seed in range(histories):
        tokens, steps = simulate_nights(seed, **kwargs)
        alarms += open_drop(detect(tokens, steps, params), params.min_shift) is not None
    return alarms / histories


def smallest_found(detect, histories: int, params: TrendParams) -> float | None:
    """The smallest drop (0.02 grid) whose alarm, located at night 3, comes with >= 80%."""
    for drop in DROPS:
        found = 0
        for seed in range(histories):
            tokens, steps = simulate_nights(10_000 + seed, nights=6, drop=drop, at=3)
            step = open_drop(detect(tokens, steps, params), params.min_shift)
            found += step is not None and step.index == 3
        if found / histories >= 0.8:
            return drop
    return None


def issue_history() -> dict[str, int | None]:
    """4 nights at 3.8465 then 3 at 3.6870, identical answers per build (100 questions)."""
    rng = np.random.default_rng(51)
    steps = rng.integers(80, 121, QUESTIONS)
    night = []
    for level in (3.8465, 3.6870):
        share = rng.gamma(8.0, 1 / 8.0, QUESTIONS)
        extra = np.floor(share / share @ steps * (level - 1) * steps.sum() * steps)
        extra[0] += round((level - 1) * steps.sum()) - extra.sum()  # the figure exactly
        night.append(steps + extra)
    tokens = np.array([night[0]] * 4 + [night[1]] * 3)
    counts = np.array([steps] * 7)
    out = {}
    for name, detect in DETECTORS.items():
        step = open_drop(detect(tokens, counts, TrendParams()), 0.1)
        out[name] = None if step is None else step.index
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=2000, help="A/A histories per case")
    parser.add_argument("--power-histories", type=int, default=300)
    args = parser.parse_args(argv)
    began = time.perf_counter()
    missed = []
    print(f"A/A: {args.histories} histories per case, {QUESTIONS} questions, engine sd 0.35")
    for nights, host in ((6, 0.02), (6, 0.03), (12, 0.02), (30, 0.02)):
        rate = alarm_rate(by_question, args.histories, TrendParams(), nights=nights,
                          host_sd=host)
        print(f"  by question, {nights:>2} nights, host sd {host}: false alarms "
              f"{100 * rate:.2f}% per history (goal <= 1%, ratio {rate / 0.01:.2f})")
        if rate > 0.01:
            missed.append(f"A/A {nights} nights host {host}")
    print(f"smallest drop found with 80% power over 3 + 3 nights ({args.power_histories} "
          "histories a drop):")
    smallest = {}
    for shift in (0.1, 0.0):
        for name, detect in DETECTORS.items():
            found = smallest_found(detect, args.power_histories, TrendParams(min_shift=shift))
            smallest[name, shift] = found
            shown = "none up to 0.60" if found is None else f"{found:.2f}"
            print(f"  {name:<22} min shift {shift}: {shown}")
    for shift in (0.1, 0.0):
        ours, theirs = smallest["by question", shift], smallest["by CI over questions", shift]
        if ours is None or (theirs is not None and ours >= theirs):
            missed.append(f"power at min shift {shift}")
    located = issue_history()
    print(f"4 nights at 3.8465 then 3 at 3.6870: drop located at night {located} "
          "(goal: by question at 4)")
    if located["by question"] != 4:
        missed.append("the issue's history")
    print(f"{time.perf_counter() - began:.1f} s")
    if missed:
        print("missed: " + "; ".join(missed), file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
