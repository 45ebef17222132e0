"""What two engines side by side cost each other on a shared host, by OpenMP wait policy
(goal: side by side with OMP_WAIT_POLICY=PASSIVE, the noxfile's, each loop takes <= 1.5x
its time alone).

Run: `python benchmarks/bench_openmp_sharing.py [--steps N]`.
Each loop stands in for an engine's decode on CPU: a fixed number of steps, each a few
small matrix products on a torch OpenMP pool of one thread per core, then a short wait
(the server between steps). Timed alone, then two at once, under the host's default
policy (an engine's pool spins between steps) and under PASSIVE (it sleeps). Prints each
median wall time, the loops' CPU seconds and the ratios to alone and to the goal. Needs
torch (the reference extra).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

GOAL_RATIO = 1.5  # side by side, passive: each loop at most 1.5x its time alone
LOOP = """
import os, sys, time, torch
torch.set_num_threads(os.cpu_count() or 1)
a = torch.randn(256, 256)
for _ in range(int(sys.argv[1])):
    for _ in range(20):
        a = torch.tanh(a @ a)
    time.sleep(0.002)
"""


def run_loops(count: int, steps: int, policy: str | None) -> tuple[float, float]:
    """`count` loops at once: (the slowest one's wall seconds, their CPU seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    before = os.times()
    start = time.perf_counter()
    loops = [subprocess.Popen([sys.executable, "-c", LOOP, str(steps)], env=env)
             for _ in range(count)]
    codes = [loop.wait() for loop in loops]
    wall = time.perf_counter() - start
    after = os.times()
    if any(codes):
        raise SystemExit(f"a loop exited {codes}")
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("one core: no pool to share, nothing timed")
        return 0
    ratios = {}
    for name, policy in (("default", None), ("passive", "PASSIVE")):
        alone = [run_loops(1, args.steps, policy) for _ in range(args.repeat)]
        pair = [run_loops(2, args.steps, policy) for _ in range(args.repeat)]
        alone_wall = statistics.median(wall for wall, _ in alone)
        pair_wall = statistics.median(wall for wall, _ in pair)
        ratios[name] = pair_wall / alone_wall
        print(f"{name:8} alone {alone_wall:6.2f} s ({statistics.median(c for _, c in alone):.1f}"
              f" CPU-s); two side by side {pair_wall:6.2f} s "
              f"({statistics.median(c for _, c in pair):.1f} CPU-s): {ratios[name]:.2f}x alone")
    print(f"passive side by side: {ratios['passive']:.2f}x alone, goal <= {GOAL_RATIO}x "
          f"({ratios['passive'] / GOAL_RATIO:.2f} of the goal); the default's "
          f"{ratios['default']:.2f}x is {ratios['default'] / ratios['passive']:.2f}x passive's")
    return 0 if ratios["passive"] <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
