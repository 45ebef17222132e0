"""The exports carry the tools' own names: the keys `vllm bench serve --save-result`
writes, read from the installed vLLM's source where the project's vLLM environment exists,
and AIPerf's record model and metric registry, run in AIPerf's own environment.

Where the tools are not installed the names are pinned as found in their source:
- vLLM 0.32.0, vllm/benchmarks/serve.py: `result` of `benchmark` (lines 1280-1302), the
  `spec_decode_*` keys (1352-1363), `process_one_metric`'s `mean_/median_/std_/p<N>_
  <metric>_ms` (1394-1405) for ttft, tpot, itl (1407-1409) and e2el (1410), and
  `main`'s `result_json` (2254-2287);
- AIPerf 0.13.0, aiperf/common/models/record_models.py: `MetricRecordInfo` (1714-1741),
  `MetricRecordMetadata` (165-299: required session_num, request_start_ns,
  request_end_ns, worker_id, record_processor_id, benchmark_phase), `MetricValue` (158-162);
  the tags and display units in aiperf/metrics/types/: ttft_metric.py:18-22,
  inter_token_latency_metric.py:36-40, inter_chunk_latency_metric.py:31-35,
  request_latency_metric.py:19-23, output_sequence_length_metric.py:24-27,
  input_sequence_length_metric.py:20-23, spec_decode_metrics.py:96-100, 172-176, 189-193.
"""

from __future__ import annotations

import ast
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.files import cache_root

VLLM_PINNED = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
    "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
    "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
    "max_concurrent_requests", "rtfx", "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length", "spec_decode_num_drafts", "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens", "spec_decode_per_position_acceptance_rates",
    *(f"{stat}_{metric}_ms" for stat in ("mean", "median", "std", "p50", "p90", "p99")
      for metric in ("ttft", "tpot", "itl", "e2el")),
}
# what a user's reader of the summary looks up first (the brief of issue 40)
CORE = {"request_throughput", "output_throughput", "completed", "num_prompts", "duration",
        *(f"{stat}_{metric}_ms" for stat in ("mean", "median", "p99")
          for metric in ("ttft", "tpot", "itl", "e2el")),
        "spec_decode_acceptance_length", "spec_decode_num_drafts"}
AIPERF_METADATA_REQUIRED = {"session_num", "request_start_ns", "request_end_ns", "worker_id",
                            "record_processor_id", "benchmark_phase"}
AIPERF_METADATA = AIPERF_METADATA_REQUIRED | {"x_request_id", "conversation_id", "turn_index"}
AIPERF_UNITS = {"time_to_first_token": "ms", "inter_token_latency": "ms",
                "inter_chunk_latency": "ms", "request_latency": "ms",
                "output_sequence_length": "tokens", "input_sequence_length": "tokens",
                "spec_decode_acceptance_length": "ratio", "spec_decode_steps": "count",
                "spec_decode_accepted_draft_tokens": "tokens"}
AIPERF_VERSION = "0.13.0"
HERE = Path(__file__).resolve().parent


def installed_vllm_serve() -> Path | None:
    found = sorted((cache_root() / "envs").glob(
        "vllm-*/lib/python*/site-packages/vllm/benchmarks/serve.py"))
    return found[-1] if found else None


def vllm_saved_keys(source: str) -> set[str]:
    """Every key vLLM's serve.py stores in `result` / `result_json`: the literal ones, and
    `process_one_metric`'s f-string keys for each metric it is called with (percentiles
    50, 90, 99)."""
    tree = ast.parse(source)
    keys: set[str] = set()
    templates: list[str] = []
    metrics: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                isinstance(t, ast.Name) and t.id == "result" for t in node.targets):
            keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in ("result", "result_json") and isinstance(node.ctx, ast.Store):
            if isinstance(node.slice, ast.Constant):
                keys.add(node.slice.value)
            elif isinstance(node.slice, ast.JoinedStr):
                templates.append("".join(part.value if isinstance(part, ast.Constant) else "{}"
                                         for part in node.slice.values))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "process_one_metric" and isinstance(node.args[0], ast.Constant):
            metrics.add(node.args[0].value)
    for template in templates:
        for metric in metrics:
            if template.count("{}") == 1:
                keys.add(template.format(metric))
            else:
                keys |= {template.format(p, metric) for p in ("50", "90", "99")}
    return keys


def summary_keys(run: Path) -> set[str]:
    assert main(["export", str(run), "--format", "vllm-bench"]) == 0
    return set(json.loads((run / "vllm_bench_serve.json").read_text())) - {"harness"}


def test_summary_keys_are_vllms_pinned(run_copy: Callable[[], Path]) -> None:
    keys = summary_keys(run_copy())
    assert keys <= VLLM_PINNED, keys - VLLM_PINNED
    assert keys >= CORE, CORE - keys


def aiperf_lines(run: Path) -> list[dict[str, Any]]:
    assert main(["export", str(run), "--format", "aiperf"]) == 0
    return [json.loads(line) for line in (run / "profile_export.jsonl").read_text().splitlines()]


def test_aiperf_lines_have_aiperfs_pinned_fields(run_copy: Callable[[], Path]) -> None:
    for line in aiperf_lines(run_copy()):
        assert {"metadata", "metrics"} <= set(line)
        assert AIPERF_METADATA_REQUIRED <= set(line["metadata"]) <= AIPERF_METADATA
        assert line["metadata"]["benchmark_phase"] == "profiling"
        for tag, value in line["metrics"].items():
            assert set(value) == {"value", "unit"} and value["unit"] == AIPERF_UNITS[tag], tag


def aiperf_python() -> str:
    """AIPerf's environment under the cache, made once (`harness.builds.envs`)."""
    from harness.builds.envs import ensure_env

    env = cache_root() / "envs" / f"aiperf-{AIPERF_VERSION}"
    try:
        return ensure_env(env, f"AIPerf {AIPERF_VERSION}",
                          lambda _: [f"aiperf=={AIPERF_VERSION}"],
                          {"what": "aiperf", "version": AIPERF_VERSION})
    except Exception as error:  # no index here: the pinned test holds
        pytest.skip(f"AIPerf's environment cannot be made here ({error}); the pinned test "
                    "checks its field names")


@pytest.mark.slow
@pytest.mark.e2e  # builds AIPerf's environment once (minutes): nox -s e2e
def test_aiperf_reads_the_lines_with_its_own_model(run_copy: Callable[[], Path]) -> None:
    python = aiperf_python()
    run = run_copy()
    lines = aiperf_lines(run)
    done = subprocess.run([python, str(HERE / "aiperf_check.py"),
                           str(run / "profile_export.jsonl")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["problems"] == []
    assert found["lines"] == len(lines) == 8
    assert {"time_to_first_token", "inter_token_latency", "spec_decode_acceptance_length"} \
        <= set(found["tags"])
    assert set(found["tags"]) <= set(AIPERF_UNITS)
