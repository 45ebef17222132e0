"""Load 100,000 run records and draw a suite's history plot; goal <= 3 s (issue 4).

Records are synthesised once into a folder (reused on later calls with --dir), written
with the real record layout (results/runs/<suite>/<run>/run.json, schema 1), then:
- cold: load with no loader cache (every run.json parsed), draw the history plot;
- warm: load again (the cache written by the cold load is reused), draw the plot.
The warm figure is the one the goal is about: nightly use appends a few runs to a store
that was loaded before. Prints seconds and the ratio to the goal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

GOAL_S = 3.0
SUITE = "gemma4_dflash_31b"


def _template() -> dict:
    from harness.record import (
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

    from harness.record import RUN_FILE, run_dir_name

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
        (run_dir / RUN_FILE).write_text(json.dumps(base, indent=2))


def load_and_plot(root: Path, use_cache: bool) -> tuple[float, int]:
    from harness.plots import plot_history
    from harness.store import load_runs

    began = time.perf_counter()
    runs = load_runs(root, use_cache=use_cache)
    plot_history(root, SUITE, runs=runs)
    return time.perf_counter() - began, len(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, help="keep the synthesised records here (reused)")
    args = parser.parse_args(argv)
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-store-"))
    try:
        if not (root / "runs" / SUITE).is_dir():
            began = time.perf_counter()
            synthesise(root, args.runs)
            print(f"synthesised {args.runs} run records in {time.perf_counter() - began:.1f} s")
        shutil.rmtree(root / ".cache", ignore_errors=True)
        cold, n = load_and_plot(root, use_cache=True)  # parses every file, writes the cache
        warm, _ = load_and_plot(root, use_cache=True)
        print(f"load {n} run records + history plot, cold (no cache): {cold:.2f} s "
              f"({cold / GOAL_S:.2f} x the {GOAL_S:g} s goal)")  # fmt: skip
        print(f"load {n} run records + history plot, warm (cache):    {warm:.2f} s "
              f"({warm / GOAL_S:.2f} x the {GOAL_S:g} s goal)")  # fmt: skip
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
