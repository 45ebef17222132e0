"""Load 100,000 run records and draw a suite's history plot; goal <= 3 s cold (issue 13).

Records are synthesised once into a folder (reused with --dir) in the real layout
(results/runs/<suite>/<run>/run.json, schema 1), each indexed as the record writer does
(`runs_index.note_written`, which `writer.write_run` calls). Then, each in a fresh
interpreter (imports of pandas and matplotlib included, no loader state from an earlier
call), timed from the parent:
- cold: load every record and draw the history plot, with the suite index as the
  writer left it (snapshot + log, no load ever ran: the goal);
- rebuild: the same with the index deleted (a store written by an older harness, or
  an index thrown away): every run.json parsed and validated, the index rewritten.
Prints wall and CPU seconds (CPU says more on a shared machine) and the ratio to the
goal. `--before PATH` times a checkout of the previous loader (e.g. a `git worktree` of
the last commit before the index) the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scratch import kept_or_scratch

GOAL_S = 3.0
SUITE = "gemma4_dflash_31b"
CHILD = """
import sys
from pathlib import Path
from harness.analysis.plots import plot_history
from harness.results.store import load_runs
runs = load_runs(sys.argv[1])
plot_history(Path(sys.argv[1]), sys.argv[2], runs=runs, out=Path(sys.argv[3]))
print(len(runs))
"""


def _template() -> dict:
    from harness.results.record import (
        BuildInfo,
        Measurement,
        Provenance,
        RunRecord,
        SuiteInfo,
        Verdict,
    )

    document = {
        "name": SUITE,
        "engine": {"kind": "sglang"},
        "topology": {"gpus": 2, "tp_size": 2},
        "workload": {"kind": "gsm8k", "questions": 200},
        "floors": {"accept_length": 5.4},
        "baselines": [
            {"label": "pre-fix", "accept_length": 5.27, "source": "PR"},
            {"label": "post-fix", "accept_length": 5.62, "source": "PR"},
        ],
    }
    record = RunRecord(
        run_id="00000000",
        started_at=datetime(2025, 1, 1, tzinfo=UTC),
        suite=SuiteInfo(name=SUITE, sha256="0" * 64, document=document),
        build=BuildInfo(engine="sglang", spec="sglang==0.5.23", version="0.5.23"),
        provenance=Provenance(
            harness_version="0.1.0", python="3.11.9", platform="linux", hostname="gpu-node"
        ),
        measurement=Measurement(
            accept_length=5.6,
            accept_length_ci=(5.5, 5.7),
            n_requests=200,
            completion_tokens=50000,
            verify_steps=8900,
            accuracy=0.9,
        ),
        verdict=Verdict(status="pass"),
    )
    return record.model_dump(mode="json")


def synthesise(root: Path, n_runs: int, seed: int = 0) -> None:
    import numpy as np

    from harness.results.index import note_written
    from harness.results.layout import RUN_FILE, run_dir_name

    rng = np.random.default_rng(seed)
    base = _template()
    start = datetime(2020, 1, 1, tzinfo=UTC)
    folder = root / "runs" / SUITE
    folder.mkdir(parents=True, exist_ok=True)
    values = 5.55 + 0.08 * rng.standard_normal(n_runs)
    for i in range(n_runs):
        started = start + timedelta(hours=i)
        run_id = f"{i:08x}"
        base["run_id"] = run_id
        base["started_at"] = started.isoformat().replace("+00:00", "Z")
        m = base["measurement"]
        m["accept_length"] = float(values[i])
        m["accept_length_ci"] = [float(values[i] - 0.1), float(values[i] + 0.1)]
        base["verdict"]["status"] = "pass" if values[i] >= 5.4 else "fail"
        run_dir = folder / run_dir_name(started, run_id)
        run_dir.mkdir()
        text = json.dumps(base, indent=2)
        (run_dir / RUN_FILE).write_text(text)
        note_written(run_dir / RUN_FILE, text)  # what writer.write_run does after run.json


def timed_child(code_root: Path, root: Path) -> tuple[float, float, int]:
    """Wall and CPU (user + system) time of a fresh interpreter that loads every record
    and draws the history. CPU time says more than wall time on a shared machine."""
    env = dict(os.environ, PYTHONPATH=str(code_root))
    out = root / "plots" / "bench-history.png"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-P", "-c", CHILD, str(root), SUITE, str(out)],
                          env=env, cwd=code_root, capture_output=True, text=True,
                          check=True)  # fmt: skip
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, int(done.stdout.split()[-1])


def _line(what: str, wall: float, cpu: float, n: int) -> str:
    return (f"load {n} run records + history plot, {what}: {wall:.2f} s wall "
            f"({wall / GOAL_S:.2f} x the {GOAL_S:g} s goal), {cpu:.2f} s CPU "
            f"({cpu / GOAL_S:.2f} x)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, help="keep the synthesised records here (reused)")
    parser.add_argument("--repeat", type=int, default=3, help="cold loads to take the median of")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT",
                        help="also time this checkout's loader (cold: no loader cache)")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parents[1]
    with kept_or_scratch(args.dir, "bench-store-") as root:
        suite = root / "runs" / SUITE
        if not (root / "runs" / SUITE).is_dir():
            began = time.perf_counter()
            synthesise(root, args.runs)
            print(f"synthesised {args.runs} run records in {time.perf_counter() - began:.1f} s")
        kept = {path: path.read_bytes() for path in suite.glob(".index*")}

        def restore() -> None:  # each measurement starts from the index the writer left
            for path in suite.glob(".index*"):
                path.unlink()
            for path, data in kept.items():
                path.write_bytes(data)

        samples = []
        for _ in range(args.repeat):
            samples.append(timed_child(here, root))
            restore()
        wall, cpu, n = (statistics.median(values) for values in zip(*samples, strict=True))
        print(_line(f"cold, index as the writer left it (median of {args.repeat})", wall,
                    cpu, int(n)))  # fmt: skip
        for path in kept:
            path.unlink()
        wall, cpu, n = timed_child(here, root)
        print(_line("index missing (rebuilt from every run.json)", wall, cpu, n))
        restore()
        if args.before:
            shutil.rmtree(root / ".cache", ignore_errors=True)
            wall, cpu, n = timed_child(args.before, root)
            print(_line(f"before ({args.before}), cold: no loader cache", wall, cpu, n))
            wall, cpu, n = timed_child(args.before, root)
            print(_line(f"before ({args.before}), warm: its cache from the call above",
                        wall, cpu, n))  # fmt: skip
            shutil.rmtree(root / ".cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
