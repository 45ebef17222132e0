"""`harness --help` and `harness list` start-up against a bare `python -c pass` (issue 13).

Goal: <= 0.3 s on an idle machine, or <= 3 x `python -c pass` measured side by side in
the same run (this machine may be shared). Each command runs in a fresh interpreter,
interleaved with the bare one, `--repeat` times; the median wall time of each is printed
with the ratio to the bare interpreter and to 0.3 s. The harness package is byte-compiled
first, as `pip install` does (a sandbox with PYTHONDONTWRITEBYTECODE would otherwise
compile every module on every start). Run it from the checkout to measure (`python -m`
puts the current folder first on the path).
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_S = 0.3
GOAL_RATIO = 3.0
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "harness --help": ["-m", "harness", "--help"],
    "harness list": ["-m", "harness", "list"],
}


def _wall(args: list[str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    sys.path.insert(0, ".")  # the package `python -m harness` runs from here
    import harness

    compileall.compile_dir(Path(harness.__file__).parent, quiet=1)
    print(f"harness from {Path(harness.__file__).parent}")
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():
        _wall(command)  # warm the page cache and the bytecode
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            times[name].append(_wall(command))
    bare = statistics.median(times["python -c pass"])
    print(f"python -c pass: {bare * 1000:.0f} ms (median of {args.repeat})")
    for name in list(COMMANDS)[1:]:
        median = statistics.median(times[name])
        print(f"{name}: {median * 1000:.0f} ms = {median / bare:.2f} x python -c pass "
              f"({median / bare / GOAL_RATIO:.2f} x the {GOAL_RATIO:g} x goal), "
              f"{median / GOAL_S:.2f} x the {GOAL_S:g} s goal")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
