"""Streaming changes no count: the reference engine's answers to the harness's streamed
requests (harness.run.streaming, through the SGLang adapter's assemblers) parse to exactly
the figures of its unstreamed answers, on /generate and on the chat route, and the
streamed chunks carry every output token."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from harness.engines.http_client import Client
from harness.engines.interface import ParsedResponse
from harness.engines.sglang import ADAPTER
from harness.run import streaming
from harness.run.drive import sampling_params
from harness.suite.model import GSM8KWorkload
from tests.reference_engine.conftest import STOP, Server

pytestmark = pytest.mark.slow


def both(server: Server, path: str, body: dict[str, Any], chat: bool
         ) -> tuple[ParsedResponse, ParsedResponse, streaming.Received]:
    parse = ADAPTER.parse_chat if chat else ADAPTER.parse_generate

    async def go() -> tuple[Any, streaming.Received]:
        async with Client(server.base, 1, 300) as client:
            plain = (await client.post(path, body)).json()
            streamed = await streaming.receive(client, path, ADAPTER.stream_body(body, chat),
                                               ADAPTER.stream_assembler(chat), "the test",
                                               time.perf_counter)
            return plain, streamed
    plain, received = asyncio.run(go())
    return parse(plain, path), parse(received.payload, path), received


def params(question: int) -> dict[str, Any]:
    workload = GSM8KWorkload(max_tokens=48, temperature=0.0)
    return sampling_params(workload, question, STOP)


def test_streamed_generate_counts_equal_the_unstreamed(server: Server,
                                                       prompts: list[str]) -> None:
    for question, prompt in enumerate(prompts[:3]):
        body = ADAPTER.generate_body(prompt, params(question), f"q{question}")
        plain, streamed, received = both(server, "/generate", body, chat=False)
        assert streamed == plain
        assert plain.verify_steps > 1
        timing = received.timing
        assert timing.streamed and timing.note is None
        assert timing.chunk_tokens is not None
        assert sum(timing.chunk_tokens) == plain.completion_tokens
        assert len(timing.chunk_s) == len(timing.chunk_tokens) >= plain.verify_steps
        assert timing.chunk_s == sorted(timing.chunk_s) and timing.chunk_s[0] > 0


def test_streamed_chat_counts_equal_the_unstreamed(server: Server) -> None:
    messages = [{"role": "user", "content": "Tom has 3 apples and buys 4 more. How many?"}]
    body = ADAPTER.chat_body(messages, params(0), "q0", {"enable_thinking": True})
    plain, streamed, received = both(server, "/v1/chat/completions", body, chat=True)
    # every figure but the DP rank, which SGLang's chat stream does not carry (a server of
    # several ranks is sent unstreamed: harness.engines.sglang.stream.stream_refusal)
    assert plain.dp_rank == 0 and streamed.dp_rank is None
    assert dataclasses.replace(streamed, dp_rank=plain.dp_rank) == plain
    assert plain.verify_steps > 1 and plain.prompt_sha256 is not None
    assert received.timing.streamed and received.timing.chunk_s
