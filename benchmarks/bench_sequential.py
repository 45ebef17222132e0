"""Sequential stopping vs the fixed protocol, replayed at the suites' declared concurrency.

Issue 9's goal: the same verdict as the fixed protocol (point estimate vs floor over all
200 questions) with <= 50% of the generated tokens whenever the true accept length is
>= 0.3 from the floor, at concurrency 128.

Per-request (numerator, verify steps) rows come from `harness.analysis.simulate.simulate_prompts`
(prompt-level variance plus step-level noise) and, with --results, from recorded runs
(resampled, floor set 0.3 above/below the run's own figure). Each run is replayed in
submission order: a request's latency is its token count (one token per time unit; batch
effects ignored), at most `concurrency` in flight. "pipelined" is the driver's protocol
since issue 30 (continuous dispatch: every slot busy, a look once every request before it
has finished, what is in flight at the settle cancelled); "waves" the one before it (send
up to the next look, wait, decide). Prints tokens used (including wasted), wall time
relative to the fixed protocol, and agreement with the fixed verdict; last, issue 30's goal
on recorded rows: continuous dispatch at concurrency 128, 0.3 from the floor, saves >= 25%
of the fixed protocol's wall time, with a request's latency its token count and, as on a
GPU (one forward pass per verify step), its verify steps; beside it the bound no rule that
waits for a look's requests can beat (`simulate.first_look_wall`: every run settled at the
first look), which the slowest requests set. Without recorded runs under --results it records one
(`harness run tiny_dflash_cpu`, the reference engine, about 2 minutes) into
.cache/bench_sequential/ and reuses it after. Run:
    python benchmarks/bench_sequential.py [--reps 200] [--results results --suite NAME]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

FLOOR = 5.4
QUESTIONS = 200
CONCURRENCY = 128
# Latency models for recorded rows, (label, knee): knee None, a request takes one time unit
# per token; else per verify step, a step of k running requests taking max(1, k / knee)
# units (simulate.replay_batched). inf: a memory-bound engine, whose step time does not grow
# with its batch. 32 and 16: a compute-bound verify. DFlash verifies 16 tokens per request
# per step, so a batch of 128 is a 2048-token forward; by the roofline (31B in bf16 over
# two H100s: 31 GB of weights per GPU at 3.35 TB/s is 9.3 ms; 31 GFLOP per token per GPU
# at about 600 TFLOP/s is 0.83 ms per request) the step stops being memory-bound at about
# 11 requests. An estimate, not measured here (no GPU); vLLM's adaptive-verification docs
# describe the same saturation at large batches.
MODELS = (("a request's latency = its token count", None),
          ("a request's latency = its verify steps, step time independent of the batch",
           float("inf")),
          ("verify steps, step time growing with the batch above 32 running", 32.0),
          ("verify steps, step time growing with the batch above 16 running", 16.0))
OFFSETS = (-0.5, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.5)


def replay_case(
    rows: Callable[[object], tuple[list[int], list[int]]], floor: float, reps: int, seed: int,
    wave: int = 50, dispatch: str = "waves", concurrency: int = CONCURRENCY,
    latency: str = "tokens", knee: float | None = None, past_look: int | None = None,
) -> dict[str, float]:
    """knee None: a request's latency is fixed (its tokens or steps, `latency`); else the
    batched model (`simulate.replay_batched`: steps slow down above `knee` in flight) with
    requests past the next look sent while fewer than `past_look` run."""
    import numpy as np

    from harness.analysis import simulate
    from harness.metrics.stopping import SequentialRule

    rng = np.random.default_rng(seed)
    rule = SequentialRule(floor=floor, alpha=0.05, beta=0.2, max_n=QUESTIONS, wave=wave)
    replay = simulate.replay_waves if dispatch == "waves" else simulate.replay_pipelined
    tokens_used, wall, agree, used, bound = [], [], 0, [], []
    for _ in range(reps):
        tokens, steps = rows(rng)
        durations = tokens if latency == "tokens" else steps
        if knee is not None:
            fixed_wall = simulate.replay_batched(None, tokens, steps, CONCURRENCY, knee).wall
            result = simulate.replay_batched(rule, tokens, steps, concurrency, knee, past_look)
            bound.append(simulate.replay_batched(rule, tokens, steps, concurrency, knee,
                                                 past_look, first_look=True).wall / fixed_wall)
        else:
            fixed_wall = max(simulate.completion_times(durations, CONCURRENCY))
            bound.append(simulate.first_look_wall(rule, durations, concurrency))
            if dispatch == "waves":
                result = replay(rule, tokens, steps, concurrency)
            else:
                result = replay(rule, tokens, steps, concurrency, latencies=durations)
        tokens_used.append(result.tokens / sum(tokens))
        wall.append(result.wall / fixed_wall)
        agree += result.verdict == rule.fixed_verdict(tokens, steps)
        used.append(result.requests)
    return {"tokens": float(np.mean(tokens_used)),
            "tokens_p90": float(np.quantile(tokens_used, 0.9)),
            "wall": float(np.mean(wall)), "agree": agree / reps,
            "requests": float(np.mean(used)), "bound": float(np.mean(bound))}  # fmt: skip


def error_rates(sd: float, runs: int, seed: int) -> dict[str, float]:
    """At true == floor: P(early fail), P(early pass), P(fail) sequential and fixed."""
    import numpy as np

    from harness.analysis.simulate import simulate_prompts
    from harness.metrics.stopping import SequentialRule

    rng = np.random.default_rng(seed)
    rule = SequentialRule(floor=FLOOR, alpha=0.05, beta=0.2, max_n=QUESTIONS)
    counts = {"early fail": 0, "early pass": 0, "fail": 0, "fixed fail": 0}
    for _ in range(runs):
        tokens, steps = simulate_prompts(QUESTIONS, FLOOR, prompt_sd=sd, seed=rng)
        verdict, used = rule.first_decision(tokens, steps)
        if used < QUESTIONS:
            counts[f"early {verdict}"] += 1
        counts["fail"] += verdict == "fail"
        counts["fixed fail"] += rule.fixed_verdict(tokens, steps) == "fail"
    return {key: value / runs for key, value in counts.items()}


def synthetic(accept: float, sd: float) -> Callable[[object], tuple[list[int], list[int]]]:
    from harness.analysis.simulate import simulate_prompts

    def draw(rng: object) -> tuple[list[int], list[int]]:
        tokens, steps = simulate_prompts(QUESTIONS, accept, prompt_sd=sd, seed=rng)  # type: ignore[arg-type]
        return tokens.tolist(), steps.tolist()

    return draw


def print_row(label: str, r: dict[str, float]) -> None:
    print(f"{label:>28} {100 * r['tokens']:>7.1f}% {100 * r['tokens_p90']:>7.1f}% "
          f"{r['requests']:>8.0f} {r['wall']:>6.2f}x {100 * r['agree']:>7.1f}%")  # fmt: skip


HEADER = (f"{'':>28} {'tokens':>8} {'p90':>8} {'requests':>8} {'wall':>7} {'agree':>8}")


def recorded(results: Path, suite: str | None, metric: str) -> list[tuple[str, list, list]]:
    """(run id, numerators, steps) of recorded runs with at least 20 request rows."""
    from harness.metrics.definitions import metric_pairs
    from harness.results.readers import read_requests
    from harness.results.store import load_runs

    runs = load_runs(results, suite=suite, kind="run") if results.is_dir() else None
    found = []
    for path, run_id in ([] if runs is None or runs.empty else
                         zip(runs["path"], runs["run_id"], strict=True)):  # fmt: skip
        numerators, steps = metric_pairs(read_requests(Path(path)), metric)
        if len(numerators) >= 20:
            found.append((str(run_id), numerators, steps))
    return found


def record_tiny_run() -> Path | None:
    """Real rows to replay: one `harness run tiny_dflash_cpu` (reference engine, CPU) kept
    under .cache/bench_sequential/ and reused; None where the reference extra is missing."""
    import subprocess
    import sys

    from harness.builds import has_reference_dependencies

    results = Path(__file__).resolve().parents[1] / ".cache" / "bench_sequential"
    if any(results.glob("runs/tiny_dflash_cpu/*/run.json")):
        return results
    if not has_reference_dependencies(sys.executable):
        print("\nno recorded runs, and no reference extra to record one "
              "(pip install -e '.[reference]')")
        return None
    print(f"\nrecording one run of tiny_dflash_cpu into {results} (once)", flush=True)
    done = subprocess.run([sys.executable, "-m", "harness", "run", "tiny_dflash_cpu",
                           "--results", str(results), "--no-plot", "--no-progress"],
                          check=False)
    return results if done.returncode in (0, 1) else None


def main(argv: list[str] | None = None) -> int:
    from harness.metrics import stats

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="replayed runs per case")
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="replay recorded runs found here too (default: results)")
    parser.add_argument("--suite", help="only this suite's recorded runs")
    parser.add_argument("--metric", default="server_avg", choices=("server_avg", "per_request"))
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="without recorded runs, replay synthetic rows only (else one "
                             "tiny reference-engine run is recorded, once)")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    print(f"fixed protocol: {QUESTIONS} questions at concurrency {CONCURRENCY}, point estimate vs "
          f"floor {FLOOR}; sequential: looks every 50, alpha 0.05 (early fail), beta 0.2 "
          f"(early pass); {args.reps} replays per case. tokens: mean share of the fixed "
          "protocol's tokens (p90: 90th percentile); wall: mean time / fixed protocol's time; "
          "agree: same verdict as the fixed protocol.\nlatency model: a request takes as "
          "many time units as it makes tokens (one token per unit, batching ignored), at "
          f"most {CONCURRENCY} in flight; wall = the time the last request a protocol needs "
          "ends. Tokens and wall are separate costs: waiting for a whole wave leaves slots "
          "idle, so wall can exceed the fixed protocol's while tokens are saved. The rule "
          "here settles the accept-length floor only (a suite with accuracy, category or "
          "position floors keeps sending until each settles: harness.run.sequential).")  # fmt: skip
    worst = {}
    for sd in (0.75, 1.0, 1.29):
        print(f"\nwaves of 50 at concurrency {CONCURRENCY}, per-prompt sd {sd}")
        print(HEADER)
        for i, offset in enumerate(OFFSETS):
            r = replay_case(synthetic(FLOOR + offset, sd), FLOOR, args.reps, seed=i)
            if abs(offset) >= 0.3:
                share = r["tokens"] if r["agree"] >= 0.99 else 1.0
                worst[sd] = max(worst.get(sd, 0.0), share)
            print_row(f"true - floor {offset:+.1f}", r)
    runs = 5 * args.reps
    print(f"\nerror rates at true == floor, {runs} runs (bounds: early fail <= alpha 0.05, "
          "early pass <= beta 0.2)")
    print(f"{'sd':>6} {'early fail':>11} {'early pass':>11} {'P(fail) seq':>12} "
          f"{'P(fail) fixed':>14}")  # fmt: skip
    for sd in (0.75, 1.0, 1.29):
        e = error_rates(sd, runs, seed=17)
        print(f"{sd:>6} {100 * e['early fail']:>10.1f}% {100 * e['early pass']:>10.1f}% "
              f"{100 * e['fail']:>11.1f}% {100 * e['fixed fail']:>13.1f}%")  # fmt: skip
    print("\ndispatch and wave size at true - floor -0.3 / +0.3 (sd 0.75)")
    print(HEADER)
    for label, kwargs in (("waves of 50 (chosen)", {}),
                          ("waves of 25", {"wave": 25}),
                          ("waves of 100", {"wave": 100}),
                          ("pipelined, concurrency 128", {"dispatch": "pipelined"}),
                          ("pipelined, concurrency 50", {"dispatch": "pipelined",
                                                         "concurrency": 50})):  # fmt: skip
        for offset in (-0.3, 0.3):
            r = replay_case(synthetic(FLOOR + offset, 0.75), FLOOR, args.reps, seed=7, **kwargs)
            print_row(f"{label} {offset:+.1f}", r)
    runs = recorded(args.results, args.suite, args.metric)
    source = args.results
    if not runs and args.record:
        source = record_tiny_run()
        runs = recorded(source, "tiny_dflash_cpu", args.metric) if source else []
    if not runs:
        print(f"\nrecorded runs: none with >= 20 request rows under {args.results}; "
              "synthetic data only")
    savings = []
    for run_id, numerators, steps in runs:
        figure = stats.accept_length(numerators, steps)

        def draw(rng, n=numerators, s=steps):  # type: ignore[no-untyped-def]
            index = rng.integers(0, len(n), QUESTIONS)
            return [n[i] for i in index], [s[i] for i in index]

        for model, knee in MODELS:
            print(f"\nrecorded run {run_id} under {source} ({len(numerators)} rows, "
                  f"{args.metric} {figure:.3f}), resampled to {QUESTIONS}, concurrency "
                  f"{CONCURRENCY}, {model}")
            print(HEADER)
            latency = "tokens" if knee is None else "steps"
            cases = [("continuous (in flight 128)", "pipelined", None)]
            if latency == "tokens":
                cases.append(("waves of 50 (before)", "waves", None))
            if knee is not None and knee < CONCURRENCY:
                cases.append((f"look-first (in flight {knee:g})", "pipelined", int(knee)))
            elif knee is not None:  # what a wrong setting costs on a memory-bound engine
                cases.append(("look-first (in flight 16)", "pipelined", 16))
            for offset in (-0.3, 0.3):
                for label, dispatch, past_look in cases:
                    r = replay_case(draw, figure - offset, args.reps, seed=11,
                                    dispatch=dispatch, latency=latency, knee=knee,
                                    past_look=past_look)
                    print_row(f"{label} {offset:+.1f}", r)
                    if dispatch == "pipelined":
                        savings.append((run_id, model, label, offset, r))
    print()
    for run_id, model, label, offset, r in savings:
        saved = 1.0 - r["wall"]
        goal = "met" if saved >= 0.25 and r["agree"] >= 0.99 else "NOT met"
        print(f"recorded run {run_id}, {model}, true - floor {offset:+.1f}: {label} at "
              f"concurrency {CONCURRENCY} takes {r['wall']:.2f}x the fixed protocol's wall "
              f"time, {100 * saved:.0f}% saved (goal >= 25% saved, same verdict in >= 99%: "
              f"{goal}; agreement {100 * r['agree']:.1f}%). Bound: settling every run at "
              f"its first look would take {r['bound']:.2f}x"
              + (" (no rule that waits for a look's requests can meet the goal with this "
                 "model and dispatch)" if r["bound"] > 0.75 else ""))
    print()
    for sd, share in worst.items():
        goal = "met" if share <= 0.5 else "NOT met"
        print(f"per-prompt sd {sd}: largest mean token share at >= 0.3 from the floor "
              f"{100 * share:.1f}% (goal <= 50% with the fixed verdict, agreement >= 99%: "
              f"{goal})")
    print(f"{time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
