"""Fault injection, as a table: every fault at every stage of a run (tests/run/fault_cases.py).

Columns: exit code, requests finished by the server before the fault, rows kept in
requests.jsonl, whether run.json was written (and the stage it records), processes left
behind, and the time from fault to exit against its bound (a dead server 5 s, a hang the
progress watchdog + 5 s). The same cases are asserted by tests/run/test_faults_lose_nothing.py.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.builds.repos import make_slow_sglang_repo  # noqa: E402
from tests.run.fault_cases import WATCHDOG_S, cases, run_case  # noqa: E402


def main() -> int:
    header = (f"{'stage':<12} {'fault':<16} {'exit':>4} {'finished':>8} {'kept':>5} "
              f"{'run.json':<22} {'orphans':>7} {'to exit':>8} {'bound':>6}")
    print("fault injection on `harness run` against the SGLang test double")
    print(header)
    print("-" * len(header))
    worst = 0.0
    for stage, fault in cases():
        with tempfile.TemporaryDirectory() as tmp:
            repo = make_slow_sglang_repo(Path(tmp) / "sglang") if stage == "preparation" \
                else None
            out = run_case(stage, fault, Path(tmp), repo)
        bound = WATCHDOG_S + 5.0 if fault == "SIGSTOP server" else 5.0
        worst = max(worst, out.fault_to_exit_s / bound)
        record = f"yes ({out.recorded_stage}, {out.verdict})" if out.run_json else "no"
        print(f"{stage:<12} {fault:<16} {out.exit_code:>4} {out.finished_at_fault:>8} "
              f"{out.rows_kept:>5} {record:<22} {len(out.orphans):>7} "
              f"{out.fault_to_exit_s:>7.2f}s {bound:>5.0f}s")
    print(f"worst time to exit / its bound: {worst:.2f}")
    return 0 if worst <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
