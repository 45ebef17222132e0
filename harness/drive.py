"""Drive: send the workload to the server over HTTP, warm up, flush, then measure.

Requests go to SGLang's native `POST /generate` with the prompt and sampling
parameters that `run_eval`'s completion sampler sends to `/v1/completions`:
the same generation, plus per-request `meta_info` with the speculative
figures (`/v1/completions` carries none in SGLang 0.5.23).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from harness.errors import EngineError
from harness.measure import ParsedResponse, parse_generate_response
from harness.record import RequestRow
from harness.suite import GSM8KWorkload
from harness.workload import STOP_STRINGS, Prompt, extract_answer, is_correct

FLUSH_ATTEMPTS = 20
FLUSH_RETRY_S = 0.5


class StopRule(Protocol):
    """Sequential stopping: settle the verdict before every prompt is sent."""

    def decide(self, tokens: Sequence[int], steps: Sequence[int]) -> str | None: ...


@dataclass
class DriveResult:
    rows: list[RequestRow]
    duration_s: float
    stopped_early: bool = False
    settled_as: str | None = None


def sampling_params(workload: GSM8KWorkload) -> dict[str, Any]:
    return {
        "max_new_tokens": workload.max_tokens,
        "temperature": workload.temperature,
        "top_p": workload.top_p,
        "stop": list(STOP_STRINGS),
    }


def generate_body(prompt: Prompt, workload: GSM8KWorkload, request_id: str) -> dict[str, Any]:
    params = sampling_params(workload)
    if workload.temperature > 0:
        # Seeded sampling makes sampled runs repeatable (SGLang's `sampling_seed`).
        params["sampling_seed"] = workload.seed + prompt.question_index
    return {"text": prompt.text, "sampling_params": params, "rid": request_id}


async def _post_generate(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> tuple[ParsedResponse, float]:
    started = time.perf_counter()
    try:
        response = await client.post("/generate", json=body)
    except httpx.TimeoutException:
        raise EngineError(f"/generate timed out for request {body['rid']}") from None
    except httpx.HTTPError as error:
        raise EngineError(f"/generate failed for request {body['rid']}: {error}") from None
    latency = time.perf_counter() - started
    if response.status_code != 200:
        raise EngineError(
            f"/generate answered {response.status_code} for request {body['rid']}: "
            f"{response.text[:500]}"
        )
    try:
        payload = response.json()
    except ValueError:
        raise EngineError(f"/generate answered non-JSON for {body['rid']}: "
                          f"{response.text[:200]!r}") from None
    return parse_generate_response(payload, f"/generate ({body['rid']})"), latency


def _row(index: int, prompt: Prompt, parsed: ParsedResponse, latency: float) -> RequestRow:
    predicted = extract_answer(parsed.text)
    return RequestRow(
        index=index,
        question_index=prompt.question_index,
        completion_tokens=parsed.completion_tokens,
        verify_steps=parsed.verify_steps,
        accept_length=(parsed.completion_tokens / parsed.verify_steps
                       if parsed.verify_steps else 0.0),
        accept_histogram=parsed.histogram,
        prompt_tokens=parsed.prompt_tokens,
        latency_s=latency,
        finish_reason=parsed.finish_reason,
        predicted=predicted,
        expected=prompt.label,
        correct=is_correct(predicted, prompt.label),
        output=parsed.text,
    )


def client_for(base_url: str, workload: GSM8KWorkload) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=workload.concurrency,
                          max_keepalive_connections=workload.concurrency)
    return httpx.AsyncClient(base_url=base_url, limits=limits, trust_env=False,
                             timeout=httpx.Timeout(workload.request_timeout_s, connect=10.0))


async def warm_up(base_url: str, prompts: Sequence[Prompt], workload: GSM8KWorkload) -> None:
    """Send warm-up requests; they also prove meta_info is there before measuring."""
    async with client_for(base_url, workload) as client:
        await asyncio.gather(*(
            _post_generate(client, generate_body(p, workload, f"warmup-{i}"))
            for i, p in enumerate(prompts)
        ))


async def flush_cache(base_url: str) -> None:
    """`/flush_cache` resets the server's counters; SGLang refuses while requests run."""
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0, trust_env=False) as client:
        last = ""
        for _ in range(FLUSH_ATTEMPTS):
            try:
                response = await client.post("/flush_cache")
            except httpx.HTTPError as error:
                raise EngineError(f"/flush_cache failed: {error}") from None
            if response.status_code == 200:
                return
            last = f"{response.status_code} {response.text[:200]}"
            await asyncio.sleep(FLUSH_RETRY_S)
    raise EngineError(f"/flush_cache kept refusing ({last}); the server never became idle")


async def server_info(base_url: str) -> Any:
    async with httpx.AsyncClient(base_url=base_url, timeout=30.0, trust_env=False) as client:
        for path in ("/server_info", "/get_server_info"):
            try:
                response = await client.get(path)
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                try:
                    return response.json()
                except ValueError:
                    return None
    return None


def _completed_prefix(rows: dict[int, RequestRow]) -> list[RequestRow]:
    prefix = []
    while len(prefix) in rows:
        prefix.append(rows[len(prefix)])
    return prefix


async def measure_phase(
    base_url: str,
    prompts: Sequence[Prompt],
    workload: GSM8KWorkload,
    on_done: Callable[[], None] | None = None,
    stop_rule: StopRule | None = None,
) -> DriveResult:
    """Send every prompt with at most `concurrency` in flight; rows in submission order."""
    semaphore = asyncio.Semaphore(workload.concurrency)
    rows: dict[int, RequestRow] = {}
    settled: asyncio.Event = asyncio.Event()
    verdict: list[str] = []
    started = time.perf_counter()

    async with client_for(base_url, workload) as client:

        async def one(index: int, prompt: Prompt) -> None:
            async with semaphore:
                if settled.is_set():
                    return
                body = generate_body(prompt, workload, f"q{prompt.question_index}")
                parsed, latency = await _post_generate(client, body)
            row = _row(index, prompt, parsed, latency)
            rows[index] = row
            if on_done is not None:
                on_done()
            if stop_rule is not None and not settled.is_set():
                # The rule sees the completed prefix in submission order: short requests
                # finish first under concurrency and would bias a completion-order view.
                prefix = _completed_prefix(rows)
                decision = stop_rule.decide([r.completion_tokens for r in prefix],
                                            [r.verify_steps for r in prefix])
                if decision is not None:
                    verdict.append(decision)
                    settled.set()

        tasks = [asyncio.create_task(one(i, p)) for i, p in enumerate(prompts)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
    duration = time.perf_counter() - started
    ordered = [rows[i] for i in sorted(rows)]
    return DriveResult(ordered, duration, stopped_early=settled.is_set() and
                       len(ordered) < len(prompts), settled_as=verdict[0] if verdict else None)
