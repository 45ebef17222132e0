"""Requests a bisect needs: sequential paired steps vs fixed 200-question steps.

Issue 15: each bisect step is a GPU run, so a step should stop as soon as it is decided.
This replays whole bisects on per-request data and counts the requests they spend:

- sequential (`harness bisect`): GOOD and BAD on all 200 prompts; each step looks every
  50 prompts (`harness.protocols.bisect.rule.StepRule`, alpha 0.01, the command's default) and
  stops when decided; an undecided step is extended to 400 prompts (GOOD too, once;
  later steps then plan 400 prompts at once); still undecided: skipped.
- seq-200: the same with --max-prompts 200 (no extension: undecided means skipped).
- fixed: GOOD and BAD on 200 prompts; every step answers all 200 and is classified by
  the side of the midpoint its paired difference falls on (no undecided, no early stop).

Per-request data is simulated (`harness.protocols.bisect.simulate.simulate_builds`: gemma-like
accept length 5.6, prompt sd 0.75, drops 0.2-1.0, a fraction `diverge` of each build's
answers taking their own path: 0 = bit-reproducible greedy, 1 = no pairing at all), or,
with --good-run/--bad-run, two recorded run folders of the same questions (prompts
resampled with replacement, paired by question; a commit like GOOD answers like the
GOOD run, one like BAD like the BAD run). Prints, per case: requests (mean, p90), steps,
P(found the first bad commit), the sequential/fixed requests ratio (goal: < 1), and an
estimate of GPU time on the gemma suite's protocol under stated assumptions (GPU_*: a
build and a launch per measurement, a fixed time per request; not measured here).
Run:  python benchmarks/bench_bisect.py [--reps 200] [--commits 16]
      python benchmarks/bench_bisect.py --good-run RUN_DIR --bad-run RUN_DIR
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPTS, MAX_PROMPTS, WAVE, ALPHA = 200, 400, 50, 0.01
GOOD_ACCEPT, PROMPT_SD = 5.6, 0.75
DROPS = (0.2, 0.35, 0.5, 1.0)
DIVERGE = (0.0, 0.5, 1.0)
# Assumptions for the GPU-time estimate (gemma4_dflash_31b, 2 x H100, TP 2), not
# measurements: installing SGLang's python package at a commit (dependencies cached) ~3
# min; loading 31B bf16 weights TP 2 and capturing CUDA graphs ~3 min; 200 5-shot
# questions (~200 answer tokens, 16 running requests) ~90 s, so 0.45 s a request.
GPU_BUILD_LAUNCH_MIN = 6.0
GPU_REQUEST_S = 0.45

Rows = tuple[Any, Any]  # (numerators, steps) of one build on the prompt pool
Builds = Callable[[int, Any], list[Rows]]  # (commits, rng) -> GOOD, GOOD again, commits..


def bisect_once(builds: list[Rows], first_bad: int, mode: str) -> dict[str, float]:
    """One bisect over len(builds) - 2 commits; builds[0] is GOOD, builds[1] GOOD measured
    again (the extension), builds[2 + i] commit i (the last is BAD)."""
    from harness.protocols.bisect import search
    from harness.protocols.bisect.rule import StepRule, endpoint_difference, significant

    n = len(builds) - 2
    good, bad = builds[0], builds[-1]
    head = (good[0][:PROMPTS], good[1][:PROMPTS])
    endpoint = endpoint_difference(head, (bad[0][:PROMPTS], bad[1][:PROMPTS]), ALPHA)
    requests = 2 * PROMPTS
    if not significant(endpoint, ALPHA):
        return {"requests": requests, "steps": 0, "runs": 2, "found": 0.0,
                "no_difference": 1.0}
    effect = endpoint.estimate
    outcomes: dict[int, search.Outcome] = {}
    extended = False
    runs = 2  # measurements besides the steps' first runs: endpoints, extensions
    while (index := search.next_commit(n, outcomes)) is not None:
        tokens, steps = builds[2 + index]
        if mode == "fixed":
            rule = StepRule(tuple(head[0]), tuple(head[1]), effect, ALPHA, PROMPTS, PROMPTS)
            look = rule.look(tokens[:PROMPTS], steps[:PROMPTS])
            outcomes[index] = "bad" if look.llr > 0 else "good"
            requests += PROMPTS
            continue
        again = builds[1]  # GOOD measured again on MAX_PROMPTS, at the first extension
        planned = MAX_PROMPTS if extended else PROMPTS
        reference = again if extended else head
        rule = StepRule(tuple(reference[0]), tuple(reference[1]), effect, ALPHA, planned, WAVE)
        verdict, used = _first(rule, tokens, steps)
        requests += used
        if verdict == "undecided" and not extended and mode == "sequential":
            requests += MAX_PROMPTS
            extended = True
            runs += 2  # GOOD again, then the commit again
            longer = StepRule(tuple(again[0]), tuple(again[1]), effect, ALPHA, MAX_PROMPTS,
                              WAVE, after=PROMPTS)
            verdict, used = _first(longer, tokens, steps)
            requests += used  # the extension run asks the first PROMPTS again
        outcomes[index] = verdict  # type: ignore[assignment]
    where = search.bounds(n, outcomes)
    return {"requests": requests, "steps": len(outcomes), "runs": runs,
            "found": float(where.found and where.hi == first_bad), "no_difference": 0.0}


def _first(rule: Any, tokens: Any, steps: Any) -> tuple[str, int]:
    for look in rule.looks():
        verdict = rule.decide(tokens[:look], steps[:look])
        if verdict is not None:
            return verdict, look
    raise AssertionError("the last look always answers")  # pragma: no cover


def simulated(drop: float, diverge: float) -> Callable[[int, int, Any], list[Rows]]:
    from harness.protocols.bisect.simulate import simulate_builds

    def make(commits: int, first_bad: int, rng: Any) -> list[Rows]:
        accepts = [GOOD_ACCEPT, GOOD_ACCEPT] + [
            GOOD_ACCEPT - drop if i >= first_bad else GOOD_ACCEPT for i in range(commits)]
        return simulate_builds(MAX_PROMPTS, accepts, PROMPT_SD, seed=rng, diverge=diverge)
    return make


def recorded(good_run: Path, bad_run: Path, metric: str) -> Callable[[int, int, Any], list[Rows]]:
    import numpy as np

    from harness.protocols.bisect.steps import read_reference

    good, bad = read_reference(good_run, metric), read_reference(bad_run, metric)
    shared = sorted(set(good.questions) & set(bad.questions))
    if len(shared) < 20:
        raise SystemExit(f"the runs share {len(shared)} questions; need at least 20")
    def by_question(ref: Any) -> dict[int, tuple[int, int]]:
        return {q: (t, s) for q, t, s in zip(ref.questions, ref.tokens, ref.steps, strict=True)}
    g, b = by_question(good), by_question(bad)

    def make(commits: int, first_bad: int, rng: Any) -> list[Rows]:
        pick = rng.choice(shared, size=MAX_PROMPTS, replace=True)
        rows = {side: (np.array([src[q][0] for q in pick]), np.array([src[q][1] for q in pick]))
                for side, src in (("good", g), ("bad", b))}
        return [rows["good"], rows["good"]] + [
            rows["bad"] if i >= first_bad else rows["good"] for i in range(commits)]
    return make


def run_case(make: Callable[[int, int, Any], list[Rows]], commits: int, reps: int,
             seed: int) -> dict[str, dict[str, float]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    totals: dict[str, list[dict[str, float]]] = {"sequential": [], "seq-200": [],
                                                 "fixed": []}
    for _ in range(reps):
        first_bad = int(rng.integers(0, commits))
        builds = make(commits, first_bad, rng)
        for mode in totals:
            totals[mode].append(bisect_once(builds, first_bad, mode))
    summary = {}
    for mode, runs in totals.items():
        requests = np.array([r["requests"] for r in runs])
        measurements = np.array([r["steps"] + r["runs"] for r in runs])
        summary[mode] = {"requests": float(requests.mean()),
                         "requests_p90": float(np.quantile(requests, 0.9)),
                         "steps": float(np.mean([r["steps"] for r in runs])),
                         "gpu_min": float(np.mean(measurements * GPU_BUILD_LAUNCH_MIN
                                                  + requests * GPU_REQUEST_S / 60)),
                         "found": float(np.mean([r["found"] for r in runs])),
                         "no_difference": float(np.mean([r["no_difference"] for r in runs]))}
    return summary


def error_rates(drop: float, diverge: float, reps: int, seed: int) -> dict[str, float]:
    """One step on a commit like GOOD and one like BAD, Δ estimated from the endpoints as
    in a real session: P(misclassified), P(undecided at PROMPTS), mean requests."""
    import numpy as np

    from harness.protocols.bisect.rule import StepRule, endpoint_difference, significant
    from harness.protocols.bisect.simulate import simulate_builds

    rng = np.random.default_rng(seed)
    wrong = undecided = used = tested = 0
    for _ in range(reps):
        good, bad, like_good, like_bad = simulate_builds(
            PROMPTS, [GOOD_ACCEPT, GOOD_ACCEPT - drop, GOOD_ACCEPT, GOOD_ACCEPT - drop],
            PROMPT_SD, seed=rng, diverge=diverge)
        endpoint = endpoint_difference(good, bad, ALPHA)
        if not significant(endpoint, ALPHA):
            continue
        rule = StepRule(tuple(good[0]), tuple(good[1]), endpoint.estimate, ALPHA, PROMPTS,
                        WAVE)
        for truth, rows in (("good", like_good), ("bad", like_bad)):
            verdict, n = _first(rule, *rows)
            tested += 1
            used += n
            undecided += verdict == "undecided"
            wrong += verdict not in (truth, "undecided")
    return {"wrong": wrong / max(tested, 1), "undecided": undecided / max(tested, 1),
            "requests": used / max(tested, 1), "tested": tested}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--commits", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--good-run", type=Path)
    parser.add_argument("--bad-run", type=Path)
    parser.add_argument("--metric", default="server_avg")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.good_run or args.bad_run:
        if not (args.good_run and args.bad_run):
            raise SystemExit("--good-run and --bad-run go together")
        cases = [("recorded GOOD/BAD runs",
                  recorded(args.good_run, args.bad_run, args.metric))]
    else:
        cases = [(f"drop {drop:g}, diverge {diverge:g}", simulated(drop, diverge))
                 for diverge in DIVERGE for drop in DROPS]
    print(f"GPU min: estimate, {GPU_BUILD_LAUNCH_MIN:g} min build + launch a measurement, "
          f"{GPU_REQUEST_S:g} s a request (assumptions, see GPU_* in this file)")
    print(f"bisect of {args.commits} commits, {args.reps} bisects a case; GOOD/BAD "
          f"{PROMPTS} prompts each; sequential looks every {WAVE}, alpha {ALPHA}, extension "
          f"to {MAX_PROMPTS}; fixed: {PROMPTS} a step")
    header = (f"{'case':<28} {'mode':<10} {'requests':>9} {'p90':>7} {'steps':>6} "
              f"{'found':>6} {'no diff':>8} {'GPU min':>8}")
    print(header)
    print("-" * len(header))
    for name, make in cases:
        summary = run_case(make, args.commits, args.reps, args.seed)
        for mode, row in summary.items():
            print(f"{name:<28} {mode:<10} {row['requests']:>9.0f} {row['requests_p90']:>7.0f} "
                  f"{row['steps']:>6.2f} {row['found']:>6.1%} {row['no_difference']:>8.1%} "
                  f"{row['gpu_min']:>8.0f}")
        for mode in ("sequential", "seq-200"):
            ratio = summary[mode]["requests"] / summary["fixed"]["requests"]
            minutes = summary[mode]["gpu_min"] / summary["fixed"]["gpu_min"]
            print(f"{'':<28} {mode}/fixed requests {ratio:.2f} (goal < 1), "
                  f"GPU time (est.) {minutes:.2f}")
    if not (args.good_run or args.bad_run):
        print(f"\nerror rates of one step (commits like GOOD and like BAD; alpha {ALPHA}, "
              f"Δ estimated from the endpoints; goal: wrong <= alpha)")
        print(f"{'case':<28} {'wrong':>7} {'undecided':>10} {'requests':>9} {'tests':>6}")
        for diverge in DIVERGE:
            for drop in DROPS:
                rates = error_rates(drop, diverge, args.reps * 5, args.seed + 1)
                print(f"{f'drop {drop:g}, diverge {diverge:g}':<28} {rates['wrong']:>7.2%} "
                      f"{rates['undecided']:>10.1%} {rates['requests']:>9.0f} "
                      f"{rates['tested']:>6}")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
