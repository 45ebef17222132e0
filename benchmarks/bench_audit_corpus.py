"""How long `harness audit --corpus tests/audit/corpus --sglang VERSION` takes: warm (every
answer cached: the usual case, CI and a user's second look) and cold (`--no-cache`: every
draft's config built and resolved again by the release's own code).

Run: `python benchmarks/bench_audit_corpus.py [--version V] [--repeat N]`. Each timing is
the real CLI in a fresh process, next to `python -c pass`. The one-time costs that come
before a cold audit are not in it and are printed as what they are: the wheel's download
(`nox -s tests` fetches it; about 130 MB) and the release's transformers environment
(made once under the harness cache: 1-2 minutes and about 260 MB on 2 cores, needing the
package index once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from scratch import time_command

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = REPO_ROOT / "tests" / "audit" / "corpus"
GOAL_SECONDS = 10.0  # a warm audit of the whole corpus on one release: seconds


def timed(argv: list[str], repeat: int, env: dict[str, str]) -> list[float]:
    return time_command(argv, repeat, env, ok=(0, 1))  # 1: the corpus has flagged clauses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.23")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    drafts = sum(1 for p in CORPUS.iterdir() if (p / "config.json").is_file())
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as scratch:
        env = {**os.environ, "HARNESS_AUDIT_RESULTS": str(Path(scratch) / "results")}
        audit = [sys.executable, "-m", "harness", "audit", "--corpus", str(CORPUS),
                 "--sglang", args.version]
        cold = timed([*audit, "--no-cache"], 1, env)[0]  # also fills the cache for warm
        warm = statistics.median(timed(audit, args.repeat, env))
        bare = statistics.median(timed([sys.executable, "-c", "pass"], args.repeat, env))
    print(f"python -c pass: median {bare:.3f} s")
    print(f"harness audit --corpus ({drafts} drafts) --sglang {args.version}, warm (answers "
          f"cached): median {warm:.3f} s over {args.repeat} runs = {warm / bare:.1f} x python "
          f"-c pass, {warm / GOAL_SECONDS:.2f} x goal {GOAL_SECONDS:.0f} s")
    print(f"harness audit --corpus ({drafts} drafts) --sglang {args.version}, cold (--no-cache"
          f", environment and wheel already there): {cold:.3f} s = {cold / bare:.1f} x python "
          "-c pass")
    print("not timed here (once per machine): the wheel's download, about 130 MB; the "
          "release's transformers environment, 1-2 minutes and about 260 MB on 2 cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
