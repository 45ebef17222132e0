"""How long `harness audit CONFIG --sglang VERSION` takes with the wheel cached (goal <= 0.5 s).

Run: `python benchmarks/bench_audit.py [--wheels DIR] [--version V] [--repeat N]`.
Times the real CLI, `python -m harness audit ...`, in a fresh process each time, on a
Nemotron-shaped draft, next to `python -c pass` (the interpreter's own start-up):
- warm: the version's answer for this config is cached (the usual case: CI, preflight);
- cold: `--no-cache`, so the version's transformers environment builds the config again
  (that interpreter imports transformers: seconds, not part of the goal, shown for scale).
Also times `python -m harness --help`, the CLI's own start-up (harness/cli.py builds every
subcommand's parser), which the audit cannot avoid from inside its command.
Prints each median and its ratio to `python -c pass` and to the goal. Needs the wheel in
--wheels and its transformers environment (made on first use, then cached).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scratch import time_command  # noqa: E402 - beside this script

from tests.audit.conftest import nemotron_35_draft  # noqa: E402 - the tests' draft shape

GOAL_SECONDS = 0.5  # issue 12: one version, wheel cached, <= 0.5 s on an idle machine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_wheels = os.environ.get(
        "HARNESS_SGLANG_WHEELS", str(REPO_ROOT / ".cache" / "sglang-wheels")
    )
    parser.add_argument("--wheels", default=default_wheels, help="folder of sglang wheels")
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cold-repeat", type=int, default=1)
    args = parser.parse_args()

    wheel = next(iter(sorted(Path(args.wheels).glob(f"sglang-{args.version}-*.whl"))), None)
    if wheel is None:
        print(f"no sglang {args.version} wheel in {args.wheels}: nothing timed")
        return 0
    env = {**os.environ, "HARNESS_SGLANG_WHEELS": args.wheels}
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.json"
        config.write_text(json.dumps(nemotron_35_draft()))
        audit = [sys.executable, "-m", "harness", "audit", str(config), "--sglang", args.version]
        time_command(audit, 1, env)  # fills the answer cache (and makes the environment)
        baseline = statistics.median(time_command([sys.executable, "-c", "pass"], 5, env))
        start_up = statistics.median(
            time_command([sys.executable, "-m", "harness", "--help"], args.repeat, env))
        warm = time_command(audit, args.repeat, env)
        cold = time_command([*audit, "--no-cache"], args.cold_repeat, env)
    print(f"python -c pass: median {baseline:.3f} s")
    print(f"python -m harness --help (the CLI's start-up, every parser built): median "
          f"{start_up:.3f} s = {start_up / baseline:.1f} x python -c pass")
    for name, seconds in (("warm (answer cached)", warm), ("cold (--no-cache)", cold)):
        median = statistics.median(seconds)
        print(f"harness audit --sglang {args.version}, {name}: median {median:.3f} s over "
              f"{len(seconds)} runs = {median / baseline:.1f} x python -c pass, "
              f"{median / GOAL_SECONDS:.2f} x goal {GOAL_SECONDS} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
