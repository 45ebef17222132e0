"""A streamed request (harness.run.streaming): its events read however the bytes are split,
assembled into the route's unstreamed answer so the counts parse exactly as before, each
output chunk's arrival kept; and each bad stream named, its counts never lost."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.http_client import Client
from harness.engines.sglang import ADAPTER as SGLANG
from harness.engines.sglang.api import parse_chat, parse_generate
from harness.engines.vllm import ADAPTER as VLLM
from harness.errors import EngineError
from harness.results.record import RequestTiming
from harness.run import streaming
from harness.run.drive import UNCHECKED, Driver, Endpoint
from tests.fixtures.http_double import serving, stream

META = {"id": "q0", "finish_reason": {"type": "stop", "matched": 1}, "prompt_tokens": 7,
        "completion_tokens": 9, "spec_verify_ct": 3, "spec_num_correct_drafts": 6,
        "spec_accept_length": 3.0, "spec_correct_drafts_histogram": [0, 0, 3]}
UNSTREAMED = {"text": "The answer is 4", "output_ids": list(range(9)), "meta_info": META}


def generate_events() -> list[Any]:
    """SGLang's /generate stream: the cumulative state after each step, then the answer."""
    def partial(tokens: int) -> dict[str, Any]:
        return {"text": "The answer is 4"[:tokens], "output_ids": list(range(tokens)),
                "meta_info": {"id": "q0", "finish_reason": None, "prompt_tokens": 7,
                              "completion_tokens": tokens}}
    return [partial(1), partial(4), partial(9), UNSTREAMED]


def sse(events: list[Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def ticking(step: float = 0.25, back_at: int | None = None) -> streaming.Clock:
    """A clock that advances `step` a reading (and steps back once at reading `back_at`)."""
    state = {"n": 0}

    def clock() -> float:
        state["n"] += 1
        if back_at is not None and state["n"] == back_at:
            return -100.0
        return state["n"] * step
    return clock


def receive(body: bytes, content_type: str = "text/event-stream", pieces: int = 0,
            chat: bool = False, clock: streaming.Clock | None = None,
            adapter: Any = SGLANG) -> streaming.Received:
    """`body` served over a socket in `pieces` writes, received by the harness's client."""
    size = max(1, len(body) // pieces) if pieces else max(1, len(body))
    chunks = [body[start:start + size] for start in range(0, len(body), size)]

    async def handler(request: web.Request) -> web.StreamResponse:
        return await stream(request, chunks, content_type)

    async def go() -> streaming.Received:
        async with serving(handler) as url, Client(url, 1, 30) as client:
            return await streaming.receive(client, "/generate", {"stream": True},
                                           adapter.stream_assembler(chat), "request q0",
                                           clock or ticking())
    return asyncio.run(go())


def test_a_streamed_generate_parses_to_the_unstreamed_counts() -> None:
    received = receive(sse(generate_events()), pieces=5)
    assert parse_generate(received.payload) == parse_generate(UNSTREAMED)
    timing = received.timing
    assert timing.streamed and timing.note is None
    assert timing.chunk_tokens == [1, 3, 5]  # the final event repeats the count: no output
    assert len(timing.chunk_s) == 3 and timing.ttft_s == timing.chunk_s[0]
    assert timing.chunk_s == sorted(timing.chunk_s)


def test_incremental_output_is_joined() -> None:
    deltas = [{"text": "The ", "output_ids": [0], "meta_info": {"completion_tokens": 1}},
              {"text": "answer is 4", "output_ids": list(range(1, 9)),
               "meta_info": {**META, "completion_tokens": 9}}]
    received = receive(sse(deltas))
    assert parse_generate(received.payload).text == "The answer is 4"


def test_a_streamed_chat_parses_to_the_unstreamed_counts() -> None:
    chunk = {"object": "chat.completion.chunk", "id": "q0"}
    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                            "content": ""}}]},
              {**chunk, "choices": [{"index": 0, "delta": {"content": "The answer"}}]},
              {**chunk, "choices": [{"index": 0, "delta": {"content": " is 4"}}]},
              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
              {**chunk, "choices": [], "sglext": {
                  "spec_tokens_details": {k: v for k, v in META.items() if "spec" in k},
                  "input_ids": [1, 2, 3]}},
              {**chunk, "choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}}]
    received = receive(sse(events), chat=True, pieces=7)
    unstreamed = {"choices": [{"index": 0, "message": {"content": "The answer is 4"},
                               "finish_reason": "stop", "prompt_token_ids": [1, 2, 3],
                               "meta_info": META}]}
    streamed, plain = parse_chat(received.payload), parse_chat(unstreamed)
    assert (streamed.completion_tokens, streamed.verify_steps, streamed.correct_drafts,
            streamed.histogram, streamed.text, streamed.prompt_sha256) == (
        plain.completion_tokens, plain.verify_steps, plain.correct_drafts, plain.histogram,
        plain.text, plain.prompt_sha256)
    assert len(received.timing.chunk_s) == 2 and received.timing.chunk_tokens is None


def test_a_vllm_stream_counts_its_token_ids_and_keeps_the_usage_chunk() -> None:
    events = [{"choices": [{"index": 0, "text": "The", "token_ids": [5],
                            "prompt_token_ids": [1, 2]}]},
              {"choices": [{"index": 0, "text": " answer is 4", "token_ids": [6, 7, 8],
                            "finish_reason": "stop"}]},
              {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 4},
               "metrics": {"speculative_decoding": {"num_spec_steps": 2,
                                                    "num_accepted_draft_tokens": 2}}}]
    received = receive(sse(events), adapter=VLLM)
    parsed = VLLM.parse_generate(received.payload, "/v1/completions")
    assert (parsed.completion_tokens, parsed.verify_steps, parsed.correct_drafts) == (4, 2, 2)
    assert received.timing.chunk_tokens == [1, 3]


def test_a_server_that_does_not_stream_keeps_its_counts_and_says_why() -> None:
    received = receive(json.dumps(UNSTREAMED).encode(), content_type="application/json")
    assert parse_generate(received.payload) == parse_generate(UNSTREAMED)
    assert not received.timing.streamed and received.timing.chunk_s == []
    assert "does not stream" in (received.timing.note or "")


def test_a_clock_stepping_back_refuses_the_timings_not_the_counts() -> None:
    received = receive(sse(generate_events()), pieces=4, clock=ticking(back_at=3))
    assert parse_generate(received.payload) == parse_generate(UNSTREAMED)
    assert received.timing.chunk_s == [] and received.timing.ttft_s is None
    assert "clock stepped back" in (received.timing.note or "")


def test_a_stream_without_an_output_token_has_no_ttft() -> None:
    empty = {"text": "", "output_ids": [], "meta_info": {**META, "completion_tokens": 0,
                                                         "spec_verify_ct": 0}}
    received = receive(sse([empty]))
    assert received.timing.ttft_s is None and "no output token" in (received.timing.note or "")


@pytest.mark.parametrize(("event", "says"), [
    (b'data: {"error": {"message": "out of memory"}}\n\n', "out of memory"),
    (b"data: {not json\n\n", "not JSON"),
    (b"data: [1, 2]\n\n", "not a JSON object"),
])
def test_a_broken_stream_fails_the_request_naming_it(event: bytes, says: str) -> None:
    with pytest.raises(EngineError, match=says) as raised:
        receive(sse(generate_events()[:1])[:-len(b"data: [DONE]\n\n")] + event)
    assert "request q0" in raised.value.message


def events_bytes() -> bytes:
    return sse(generate_events()) + b": a comment\r\n\r\nevent: x\ndata: [DONE]"


@settings(max_examples=200, deadline=None)
@given(cuts=st.lists(st.integers(0, len(events_bytes())), max_size=30))
def test_events_are_the_same_however_the_bytes_are_split(cuts: list[int]) -> None:
    raw = events_bytes()
    bounds = [0, *sorted(cuts), len(raw)]
    parser = streaming.SSEParser()
    got = [e for a, b in itertools.pairwise(bounds) for e in parser.feed(raw[a:b])]
    got += list(parser.close())
    assert got == [json.dumps(e) for e in generate_events()] + ["[DONE]", "[DONE]"]


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=300))
def test_any_bytes_give_strings_or_nothing(raw: bytes) -> None:
    parser = streaming.SSEParser()
    assert all(isinstance(e, str) for e in [*parser.feed(raw), *parser.close()])


def test_a_cut_answer_keeps_the_chunks_up_to_its_last_token() -> None:
    timing = RequestTiming(streamed=True, ttft_s=0.1, chunk_s=[0.1, 0.2, 0.3],
                           chunk_tokens=[1, 3, 5])
    assert streaming.cut_timing(timing, 4).chunk_s == [0.1, 0.2]
    assert streaming.cut_timing(timing, 9) == timing
    assert streaming.cut_timing(timing, 0).ttft_s is None
    unsaid = timing.model_copy(update={"chunk_tokens": None})
    assert streaming.cut_timing(unsaid, 2) == unsaid


def test_an_old_sglang_chat_route_is_sent_unstreamed_and_says_why() -> None:
    workload: Any = type("W", (), {"protocol": "chat"})()
    driver = Driver(Endpoint("http://server", SGLANG), workload)
    assert driver.unstreamed == UNCHECKED
    driver.check_streaming({"version": "0.5.18"})
    assert "0.5.18 streams no per-request counts" in (driver.unstreamed or "")
    driver.check_streaming({"version": "0.5.23"})
    assert driver.unstreamed is None


def test_a_dp_servers_chat_route_is_sent_unstreamed_to_keep_each_requests_rank() -> None:
    workload: Any = type("W", (), {"protocol": "chat"})()
    driver = Driver(Endpoint("http://server", SGLANG), workload)
    two_ranks = {"version": "0.5.23", "internal_states": [{"avg_spec_accept_length": 2.0},
                                                          {"avg_spec_accept_length": 2.5}]}
    driver.check_streaming(two_ranks)
    assert "2 DP ranks" in (driver.unstreamed or "")
    driver.check_streaming({**two_ranks, "internal_states": two_ranks["internal_states"][:1]})
    assert driver.unstreamed is None
    completion: Any = type("W", (), {"protocol": "completion"})()
    driver = Driver(Endpoint("http://server", SGLANG), completion)
    driver.check_streaming(two_ranks)  # /generate's last event carries meta_info.dp_rank
    assert driver.unstreamed is None


def test_a_streamed_generate_keeps_the_rank_that_served_it() -> None:
    events = generate_events()
    events[-1] = {**UNSTREAMED, "meta_info": {**META, "dp_rank": 1}}
    assert parse_generate(receive(sse(events), pieces=3).payload).dp_rank == 1


@pytest.mark.parametrize(("streamed", "matched", "answer"), [
    ("4 apples.\n\nQuestion", "Question:", "4 apples.\n\n"),  # stopped inside the string
    ("4 apples.\n\nQuestion: x", "Question:", "4 apples.\n\n"),
    ("4 apples.", "Question:", "4 apples."),
    ("4 apples.\n\nQ", None, "4 apples.\n\nQ"),  # a stop token, or no stop: nothing cut
])
def test_a_chat_stream_is_trimmed_as_sglang_trims_its_answer(streamed: str, matched: Any,
                                                              answer: str) -> None:
    from harness.engines.sglang.stream import trim_stop

    assert trim_stop(streamed, matched) == answer
