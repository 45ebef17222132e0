"""The fake streaming server of benchmarks/bench_client_peers.py speaks what each of its
clients reads, so the benchmark cannot silently measure errors:
- the harness's Driver (vLLM adapter, streamed) finishes every request with exactly the
  tokens asked for, on the completions and the chat route;
- `vllm bench serve` (vllm/benchmarks/lib/endpoint_request_func.py, openai completions):
  `choices[0].text` per chunk, a final `usage.completion_tokens`, `data: [DONE]`;
- AIPerf (endpoints/openai_completions.py): `object: text_completion` chunks, and its
  readiness probe's unstreamed 1-token request and `/v1/models` listing the model;
- the server's own count (`/stats`) is the tokens it streamed.
No timing is asserted."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.engines.registry import adapter_for
from harness.run.drive import Driver, Endpoint
from harness.run.launch import free_port
from harness.suite.entries import GSM8KWorkload
from harness.workloads.items import Prompt

SERVER = Path(__file__).resolve().parents[2] / "benchmarks" / "fake_openai_server.py"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port),
                                "--model", "fake-model"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if httpx.get(base + "/health", trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def drive(url: str, n: int, concurrency: int, max_tokens: int, protocol: str):
    workload = GSM8KWorkload(questions=n, concurrency=concurrency, max_tokens=max_tokens,
                             protocol=protocol)
    driver = Driver(Endpoint(url, adapter_for("vllm")), workload)
    driver.check_streaming(None)
    assert driver.unstreamed is None
    prompts = [Prompt(i, f"Question {i}: one two three", None) for i in range(n)]
    return asyncio.run(driver.measure(prompts))


@pytest.mark.parametrize("protocol", ["completion", "chat"])
def test_harness_driver_gets_exact_token_counts(url: str, protocol: str) -> None:
    httpx.post(url + "/stats/reset", trust_env=False)
    result = drive(url, n=24, concurrency=8, max_tokens=17, protocol=protocol)
    assert len(result.rows) == 24
    for row in result.rows:
        assert row.completion_tokens == 17
        assert row.timing.streamed and row.timing.ttft_s is not None
        assert sum(row.timing.chunk_tokens or []) == 17  # token_ids: one per chunk
        assert row.output == " the" * 17
    stats = httpx.get(url + "/stats", trust_env=False).json()
    assert stats["requests"] == 24 and stats["chunks"] == 24 * 17


def events(url: str, body: dict) -> list:
    with httpx.stream("POST", url + "/v1/completions", json=body, trust_env=False) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    return [line[6:] for line in lines]


def test_stream_has_what_vllm_bench_and_aiperf_read(url: str) -> None:
    got = events(url, {"model": "fake-model", "prompt": "hi", "max_tokens": 5, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}})
    assert got[-1] == "[DONE]"
    chunks = [json.loads(e) for e in got[:-1]]
    tokens = [c for c in chunks if c["choices"]]
    assert len(tokens) == 5
    assert all(c["object"] == "text_completion" and c["choices"][0]["text"] == " the"
               for c in tokens)
    assert tokens[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 5
    # without include_usage: no usage chunk (as vLLM)
    plain = events(url, {"prompt": "hi", "max_tokens": 3, "stream": True})
    assert len(plain) == 4 and "usage" not in json.loads(plain[-2])


def test_probes_answer(url: str) -> None:
    probe = httpx.post(url + "/v1/completions", json={"prompt": "Lo", "max_tokens": 1},
                       trust_env=False).json()
    assert probe["choices"][0]["text"] == " the" and probe["usage"]["completion_tokens"] == 1
    models = httpx.get(url + "/v1/models", trust_env=False).json()
    assert [m["id"] for m in models["data"]] == ["fake-model"]
    assert httpx.get(url + "/nowhere", trust_env=False).status_code == 404


def test_stats_report_the_pace(url: str) -> None:
    httpx.post(url + "/stats/reset", trust_env=False)
    events(url, {"prompt": "hi", "max_tokens": 6, "stream": True})
    stats = httpx.get(url + "/stats", trust_env=False).json()
    assert stats["chunks"] == 6
    assert stats["pace_s"] is not None and stats["pace_s"] >= 0
