"""Sequential stopping vs the fixed 200-question protocol (issue 4's goal: the same verdict
with <= 50% of the requests when the true accept length is >= 0.3 from the floor).

Per-request data is synthesised like real rows: (tokens, steps) pairs with prompt-level
variance (harness.stats.simulate_prompts: each prompt its own accept length, sd
DEFAULT_PROMPT_SD, plus step-level noise). For each true accept length the fixed protocol
judges all 200 requests (point estimate vs floor); the sequential rule sees them in
submission order and stops when settled. Prints, per distance from the floor, the mean
fraction of requests used and how often both reach the same verdict.
"""

from __future__ import annotations

import argparse
import time

FLOOR = 5.4
QUESTIONS = 200


def simulate(offset: float, reps: int, sd: float, seed: int) -> tuple[float, float, float]:
    """(mean fraction of requests used, agreement with the fixed verdict, wrong verdicts)."""
    import numpy as np

    from harness import stats

    rng = np.random.default_rng(seed)
    rule = stats.SequentialRule(floor=FLOOR, alpha=0.05, beta=0.2, min_n=30, max_n=QUESTIONS)
    used, agree, wrong = [], 0, 0
    truth = "pass" if offset >= 0 else "fail"
    for _ in range(reps):
        tokens, steps = stats.simulate_prompts(QUESTIONS, FLOOR + offset, prompt_sd=sd, seed=rng)
        fixed = "pass" if stats.accept_length(tokens, steps) >= FLOOR else "fail"
        verdict, n = rule.first_decision(tokens, steps)
        used.append(n / QUESTIONS)
        agree += verdict == fixed
        wrong += verdict != truth
    return float(np.mean(used)), agree / reps, wrong / reps


def main(argv: list[str] | None = None) -> int:
    from harness.stats import DEFAULT_PROMPT_SD

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200, help="simulated runs per case")
    parser.add_argument("--sd", type=float, default=DEFAULT_PROMPT_SD,
                        help="per-prompt sd of accept length")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    print(f"floor {FLOOR}, fixed protocol {QUESTIONS} questions, per-prompt sd {args.sd}, "
          f"{args.reps} runs per case; alpha 0.05 (false fail), beta 0.2 (false pass)")
    print(f"{'true - floor':>12} {'requests used':>14} {'same verdict':>13} {'wrong':>7}")
    worst = 0.0
    for i, offset in enumerate((-0.5, -0.3, 0.3, 0.5, 1.0)):
        fraction, agreement, wrong = simulate(offset, args.reps, args.sd, seed=i)
        worst = max(worst, fraction)
        print(f"{offset:>+12.1f} {100 * fraction:>13.1f}% {100 * agreement:>12.1f}% "
              f"{100 * wrong:>6.1f}%")
    goal = "met" if worst <= 0.5 else "NOT met"
    print(f"largest fraction of requests used at >= 0.3 from the floor: {100 * worst:.1f}% "
          f"(goal <= 50%: {goal}); {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
