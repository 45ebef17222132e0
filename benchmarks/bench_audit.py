"""How long one `harness audit` takes on CPU (issue 5 asks for <= 2 s).

Run: `python benchmarks/bench_audit.py [--wheels DIR] [--repeat N] [--max-seconds S]`.
Times the whole audit of a gemma-4-shaped draft config, in a fresh process each time so
that imports count: the three behaviours alone, then with each cached SGLang wheel's own
resolver read from the archive and evaluated. With --max-seconds, exits 1 when the slowest
run exceeds it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 2.0  # issue 5: an audit takes <= 2 s on CPU
GEMMA4_SHAPED = {
    "architectures": ["DFlashDraftModel"],
    "num_hidden_layers": 5,
    "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
    "sliding_window": 2048,
}
# The audit command alone, as `harness audit` runs it (other subcommands are not timed).
AUDIT_ONLY = (
    "import sys; from harness import cli; "
    "cli.COMMANDS = {'audit': 'harness.commands.audit:AuditCommand'}; "
    "sys.exit(cli.main(sys.argv[1:]))"
)


def time_audit(argv: list[str], repeat: int) -> list[float]:
    """Wall seconds of `harness audit ARGV`, each in a new Python process."""
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", AUDIT_ONLY, "audit", *argv],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            check=False,
        )
        seconds.append(time.perf_counter() - start)
        if result.returncode not in (0, 1):
            raise SystemExit(f"harness audit {' '.join(argv)} failed:\n{result.stderr}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_wheels = os.environ.get(
        "HARNESS_SGLANG_WHEELS", str(REPO_ROOT / ".cache" / "sglang-wheels")
    )
    parser.add_argument("--wheels", default=default_wheels, help="folder of sglang wheels")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "config.json"
        config.write_text(json.dumps(GEMMA4_SHAPED))
        cases: dict[str, list[str]] = {"behaviours only": [str(config)]}
        for wheel in sorted(Path(args.wheels).glob("sglang-*.whl")):
            cases[wheel.name.split("-")[1] + " wheel"] = [str(config), "--sglang", str(wheel)]
        slowest = 0.0
        for name, argv in cases.items():
            seconds = time_audit([*argv, "--json"], args.repeat)
            slowest = max(slowest, *seconds)
            print(
                f"audit {name:<16} median {statistics.median(seconds):.3f} s  "
                f"max {max(seconds):.3f} s  ({args.repeat} runs, fresh process each)"
            )
        print(
            f"audit slowest {slowest:.3f} s = {slowest / GOAL_SECONDS:.2f} x goal {GOAL_SECONDS} s"
        )
        if len(cases) == 1:
            print(f"no sglang wheels in {args.wheels}: only the behaviours were timed")
    if args.max_seconds is not None and slowest > args.max_seconds:
        print(f"slowest audit {slowest:.3f} s exceeds {args.max_seconds} s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
