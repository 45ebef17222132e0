"""`harness export` on a run of the CPU reference engine (`harness run tiny_dflash_cpu`,
every stage for real): AIPerf's own record model and metric registry read every line, one
per request row, and the summary's figures are the record's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from harness.results.readers import read_requests, read_run
from tests.analysis.test_exports_keys_are_the_tools_own import (
    AIPERF_UNITS,
    CORE,
    HERE,
    VLLM_PINNED,
    aiperf_python,
)

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e


def harness_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=dict(os.environ), timeout=1800, check=False)


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")
    results = tmp_path_factory.mktemp("export_reference") / "results"
    done = harness_cli("run", "tiny_dflash_cpu", "--results", str(results), "--no-progress",
                       "--no-plot")
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a verdict, pass or fail
    (record,) = results.glob("runs/*/*/run.json")
    return record.parent


def test_reference_run_exports(reference_run: Path) -> None:
    record = read_run(reference_run)
    rows = read_requests(reference_run, record, strict=True)
    measurement = record.measurement
    assert measurement is not None and measurement.latency is not None
    for fmt in ("aiperf", "vllm-bench"):
        done = harness_cli("export", str(reference_run), "--format", fmt)
        assert done.returncode == 0, done.stderr
    summary = json.loads((reference_run / "vllm_bench_serve.json").read_text())
    assert CORE <= set(summary) - {"harness"} <= VLLM_PINNED
    assert summary["completed"] == len(rows) == measurement.n_requests
    assert summary["output_throughput"] == measurement.latency.output_tok_s
    assert summary["mean_ttft_ms"] == pytest.approx(measurement.latency.ttft_s.mean * 1000)
    acceptance = summary["harness"]["acceptance"]
    assert acceptance[measurement.metric]["pooled_over_verify_steps"] == \
        measurement.accept_length
    assert summary["spec_decode_acceptance_length"] == pytest.approx(
        measurement.accept_length_server_avg)
    jsonl = reference_run / "profile_export.jsonl"
    assert len(jsonl.read_text().splitlines()) == len(rows)
    checked = subprocess.run([aiperf_python(), str(HERE / "aiperf_check.py"), str(jsonl)],
                             capture_output=True, text=True, timeout=300, check=False)
    assert checked.returncode == 0, checked.stderr[-2000:]
    found = json.loads(checked.stdout.splitlines()[-1])
    assert found["problems"] == [] and found["lines"] == len(rows)
    assert set(found["tags"]) <= set(AIPERF_UNITS)
