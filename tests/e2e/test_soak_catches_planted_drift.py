"""`harness soak` on the CPU reference engine, end to end: a 20 s soak in 5 s windows passes
its drift gate on the engine as shipped (greedy and exactly repeatable: every repeat of a
question accepts alike, so the drift is 0), and fails it, naming the drift, when the
engine's planted drift (`REFERENCE_DRAFT_NOISE_DRIFT`, the draft noise rising with serving
time) makes acceptance fall; each soak's windows are read back through the one door."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from harness.results.readers import read_requests, read_soak
from harness.results.soaks import SOAK_FILE
from harness.suite.model import SUITES_DIR
from reference_engine.noise_drift import DRIFT_ENV

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e

TINY = SUITES_DIR / "tiny_dflash_cpu.toml"
SOAK = ["--duration", "20s", "--window", "5s", "--questions", "4", "--max-drift", "0.05",
        "--no-progress"]


def _soak(suite: Path | str, results: Path) -> subprocess.CompletedProcess[str]:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    return subprocess.run([sys.executable, "-m", "harness", "soak", str(suite), *SOAK,
                           "--results", str(results)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=1200)


def test_no_drift_passes_and_a_planted_drift_fails(tmp_path: Path) -> None:
    steady = _soak("tiny_dflash_cpu", tmp_path / "steady")
    assert steady.returncode == 0, steady.stdout + steady.stderr
    [folder] = [p.parent for p in (tmp_path / "steady" / "soak").glob(f"*/*/{SOAK_FILE}")]
    record = read_soak(folder)
    assert record.status == "pass" and record.metric == "server_avg"
    assert "no prefix cache" in record.prefix_cache  # said, and the soak still ran
    assert [w.index for w in record.windows] == [0, 1, 2, 3]
    assert all(w.accept_length is not None and w.n_requests > 0 for w in record.windows)
    assert "server_avg" in record.window_definition
    assert record.drift is not None and record.drift.status == "pass"
    assert record.drift.result is not None and record.drift.result["decision"] == "within"
    assert abs(float(record.drift.result["drift"])) < 1e-9  # greedy: repeats identical
    rows = read_requests(tmp_path / "steady" / record.run_dir)
    assert len(rows) == sum(w.n_requests for w in record.windows)
    assert all(row.finished_s is not None for row in rows)
    assert "drift gate PASS" in steady.stdout and (folder / "soak.png").stat().st_size > 10_000

    drifting = tmp_path / "tiny_drifting.toml"
    drifting.write_text(TINY.read_text().replace(
        'kind = "reference"', f'kind = "reference"\nenv = {{ {DRIFT_ENV} = "0.03" }}', 1))
    fell = _soak(drifting, tmp_path / "drift")
    assert fell.returncode == 1, fell.stdout + fell.stderr
    assert "drift gate FAIL" in fell.stdout and "fell by more than the tolerance" in fell.stdout
    [folder] = [p.parent for p in (tmp_path / "drift" / "soak").glob(f"*/*/{SOAK_FILE}")]
    record = read_soak(folder)
    assert record.status == "fail" and record.drift is not None
    assert record.drift.status == "fail" and record.drift.result is not None
    assert float(record.drift.result["drift_ci"][1]) < -0.05  # type: ignore[index]
    first, last = record.windows[0].accept_length, record.windows[-1].accept_length
    assert first is not None and last is not None and last < first
