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
  every night): found as a drop at the first night of the new build by question, not by CI;
- the A/A false-alarm rate per history with the night-to-night noise of the real SGLang
  0.5.23 on CPU (`SGLANG_CPU`, measured on launched nights of `tiny_ngram_sglang_cpu`):
  bit-reproducible but for a few questions' accept lengths (goal: at most 1% with the
  default min shift), at that share of changed answers and at 4 and 16 times it.
`--measure RUN_DIR ...` prints those measures for other nights of one build on the same
questions (run folders, oldest first). Exit 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from harness.analysis.sides import Side, add_record
from harness.analysis.simulate import simulate_nights
from harness.analysis.trend import TrendParams, detect_by_question, detect_steps, open_drop
from harness.metrics import stats
from harness.metrics.night_noise import AnswerChanges, answer_changes, night_noise
from harness.results.readers import BadRecord, read_run

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

# The real SGLang 0.5.23 on CPU, measured (`--measure` over the run folders): NIGHTS_MEASURED
# launched nights (`harness run tiny_ngram_sglang_cpu --sglang sglang==0.5.23`, one build,
# 20 GSM8K questions, greedy, concurrency 4; docs/statistics.md "Trend by question").
# Every night's texts were identical, but on NIGHTS_CHANGED of them a share CHANGED of the
# questions' accept lengths moved, by CHANGE_RMS (root mean square): NGRAM's drafts come
# from a corpus the requests in flight share, so they move with timing.
NIGHTS_MEASURED = 7
NIGHTS_CHANGED = 1
CHANGED = 2 / 20
CHANGE_RMS = 0.340
SGLANG_CPU = {"questions": 20, "accept_length": 1.80, "prompt_sd": 0.88, "host_sd": 0.0}


def fresh_answer_sd(change_rms: float, accept_length: float) -> float:
    """The engine sd that makes a simulated changed answer (a fresh draw against the usual
    one: engine and Poisson noise on each) move by `change_rms`."""
    low, high = 20, 150  # simulate_prompts' verify steps per question
    poisson = (accept_length - 1.0) * float(np.mean(1.0 / np.arange(low, high + 1)))
    return float(np.sqrt(max(0.0, change_rms**2 / 2 - poisson)))


def measure(folders: list[Path]) -> AnswerChanges:
    """The measures above for run folders of one build on the same questions."""
    sides = []
    for folder in folders:
        side = Side(name=str(folder))
        add_record(side, folder, read_run(folder))
        side.use_metric("server_avg")
        sides.append(side)
    shared = sorted(set.intersection(*(set(side.questions) for side in sides)))
    pairs = [side.restricted(shared) for side in sides]
    tokens, steps = [t for t, _ in pairs], [s for _, s in pairs]
    found = answer_changes(tokens, steps)
    noise = night_noise(tokens, steps)
    print(f"{len(sides)} nights, {len(shared)} questions every night asked: figures "
          + " ".join(f"{figure:.4f}" for figure in noise.figures))
    print(f"  nights with a changed answer {found.nights_changed} of {found.nights}; on them "
          f"{100 * found.share_on_changed_nights:.1f}% of the answers changed "
          f"({found.changed} of {found.cells} question-nights, {found.questions_changed} "
          f"questions), change rms {found.change_rms:.3f}; sd between questions "
          f"{found.question_sd:.3f}; engine sd per night (night_noise) {noise.engine_se:.4f}")
    return found


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
    parser.add_argument("--measure", nargs="+", type=Path, metavar="RUN_DIR",
                        help="print the night-to-night measures of these run folders, only")
    args = parser.parse_args(argv)
    if args.measure:
        try:
            measure(args.measure)
        except (BadRecord, ValueError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        return 0
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
    engine_sd = fresh_answer_sd(CHANGE_RMS, SGLANG_CPU["accept_length"])
    measured = NIGHTS_CHANGED / NIGHTS_MEASURED
    print(f"A/A with the real SGLang 0.5.23 on CPU's noise ({NIGHTS_MEASURED} launched nights "
          f"of tiny_ngram_sglang_cpu: {NIGHTS_CHANGED} with {100 * CHANGED:.0f}% of the "
          f"answers changed, by rms {CHANGE_RMS:.3f}; {args.histories} histories per case, "
          "by question):")
    # as measured, then every night deviating, then half the answers of every night; the
    # default min shift is the goal, the statistic alone (min shift 0) is shown beside
    noises = [(measured, CHANGED), (1.0, CHANGED), (1.0, 0.5)]
    cases = [(odd, share, nights, 0.1) for odd, share in noises for nights in (6, 30)]
    for odd, share, nights, shift in [*cases, (measured, CHANGED, 6, 0.0),
                                      (measured, CHANGED, 30, 0.0)]:
        rate = alarm_rate(by_question, args.histories, TrendParams(min_shift=shift),
                          nights=nights, engine_sd=engine_sd, changed=share,
                          changed_nights=odd, **SGLANG_CPU)
        goal = shift > 0
        print(f"  {100 * odd:>3.0f}% of nights deviating on {100 * share:>2.0f}% of answers, "
              f"{nights:>2} nights, min shift {shift}: false alarms {100 * rate:.2f}% per "
              "history" + (f" (goal <= 1%, ratio {rate / 0.01:.2f})" if goal
                           else " (the statistic alone)"))
        if goal and rate > 0.01:
            missed.append(f"A/A SGLang CPU {odd:.0%} nights {share:.0%} answers, {nights}")
    print(f"{time.perf_counter() - began:.1f} s")
    if missed:
        print("missed: " + "; ".join(missed), file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
