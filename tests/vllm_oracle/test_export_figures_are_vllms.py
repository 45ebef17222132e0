"""`harness export --format vllm-bench`: the summary's figures are the ones vLLM's own
`calculate_metrics` (vllm/benchmarks/serve.py, what `vllm bench serve` saves) makes of the
same requests' timings: means, standard deviations and rates. (Medians and percentiles are
the record's, numpy's inverted_cdf, where vLLM interpolates; docs/exports.md says so.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli import main
from harness.metrics.latency import request_figures
from harness.results.readers import read_requests, read_run
from tests.vllm_oracle.vllm_code import run_vllm

CALCULATE = r"""
import json, sys
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncOutput
from vllm.benchmarks.serve import calculate_metrics
requests, duration = json.loads(sys.argv[1])
outputs = [RequestFuncOutput(success=True, latency=r["latency"], output_tokens=r["tokens"],
                             ttft=r["ttft"], itl=r["itl"], prompt_len=r["prompt"])
           for r in requests]
metrics, _ = calculate_metrics([], outputs, duration, None, [99.0], {})
print(json.dumps({key: getattr(metrics, key) for key in (
    "completed", "total_output", "request_throughput", "output_throughput",
    "mean_ttft_ms", "std_ttft_ms", "mean_tpot_ms", "std_tpot_ms", "mean_itl_ms",
    "std_itl_ms", "mean_e2el_ms", "std_e2el_ms")}))
"""


def test_summary_figures_equal_vllms(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    assert main(["export", str(run), "--format", "vllm-bench"]) == 0
    summary = json.loads((run / "vllm_bench_serve.json").read_text())
    record = read_run(run)
    rows = read_requests(run, record, strict=True)
    timed = []
    for row in rows:
        figures = request_figures(row)
        assert figures.ttft is not None
        timed.append({"latency": figures.e2e, "tokens": row.completion_tokens,
                      "ttft": figures.ttft, "itl": figures.gaps,
                      "prompt": row.prompt_tokens or 0})
    vllm = run_vllm(CALCULATE, json.dumps([timed, summary["duration"]]))
    assert vllm["completed"] == summary["completed"] == len(rows)
    assert vllm["total_output"] == summary["total_output_tokens"]
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "std_ttft_ms",
                "mean_tpot_ms", "std_tpot_ms", "mean_itl_ms", "std_itl_ms", "mean_e2el_ms",
                "std_e2el_ms"):
        assert summary[key] == pytest.approx(vllm[key], rel=1e-9), key
