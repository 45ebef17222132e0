"""The harness's client to an engine (harness.engines.http_client, aiohttp) over a real socket:
every way a request gets no answer is a `TransportError` the driver names (a timeout as
one, the server's own words for an error status), and no proxy is taken from the
environment."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from harness.engines.http_client import Client, TransportError, TransportTimeout
from harness.engines.sglang import ADAPTER
from harness.errors import EngineError
from harness.run import drive
from harness.run.drive import Driver, Endpoint
from harness.run.launch import free_port
from harness.suite.model import SpecBenchWorkload
from harness.workloads import Prompt
from tests.fixtures.http_double import serving, stream

PROMPT = Prompt(0, "Write a poem.", None, "writing", "81")
EVENT = b'data: {"text": "a", "output_ids": [1], "meta_info": {"completion_tokens": 1}}\n\n'


def _driver(streamed: bool) -> Driver:
    driver = Driver(Endpoint("http://unused", ADAPTER),
                    SpecBenchWorkload(kind="spec_bench", concurrency=1, max_tokens=8))
    if streamed:
        driver.unstreamed = None
    return driver


def _generate(handler: drive.Any, streamed: bool, timeout_s: float = 30,
              url: str | None = None) -> EngineError:
    driver = _driver(streamed)

    async def once() -> None:
        if url is not None:
            async with Client(url, 1, timeout_s) as client:
                await driver.generate(client, PROMPT, "q0")
            return
        async with serving(handler) as base, Client(base, 1, timeout_s) as client:
            await driver.generate(client, PROMPT, "q0")

    with pytest.raises(EngineError) as raised:
        asyncio.run(once())
    return raised.value


@pytest.fixture(autouse=True)
def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "DEATH_GRACE_S", 0.05)


@pytest.mark.parametrize("streamed", [True, False])
def test_a_refused_connection_is_named(streamed: bool) -> None:
    error = _generate(None, streamed, url=f"http://127.0.0.1:{free_port()}")
    assert "for request q0 failed:" in str(error)
    assert "connect" in str(error).lower()


@pytest.mark.parametrize("streamed", [True, False])
def test_a_server_silent_past_the_timeout_is_a_timeout(streamed: bool) -> None:
    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(2)
        return web.json_response({})

    error = _generate(slow, streamed, timeout_s=0.3)
    assert "for request q0 timed out after" in str(error)


def test_a_stream_silent_past_the_timeout_midway_is_a_timeout() -> None:
    async def stalls(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(EVENT)
        await asyncio.sleep(2)
        return response

    assert "timed out after" in str(_generate(stalls, True, timeout_s=0.3))


def test_the_timeout_is_per_read_not_for_the_whole_answer() -> None:
    """An answer that takes longer than the timeout but never pauses that long arrives."""
    async def steady(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for _ in range(6):
            await response.write(EVENT)
            await asyncio.sleep(0.1)
        await response.write_eof()
        return response

    async def once() -> int:
        async with serving(steady) as url, Client(url, 1, 0.3) as client, \
                client.stream("/generate", {}) as answer:
            return len([chunk async for chunk in answer.chunks()])
    assert asyncio.run(once()) >= 6


def test_a_server_that_dies_midway_through_a_stream_is_named() -> None:
    async def dies(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(EVENT)
        assert request.transport is not None
        request.transport.close()  # the chunked body never ends
        return response

    error = _generate(dies, True)
    assert "for request q0 failed:" in str(error)


@pytest.mark.parametrize("streamed", [True, False])
def test_an_error_status_is_the_servers_answer(streamed: bool) -> None:
    async def refuses(request: web.Request) -> web.StreamResponse:
        return await stream(request, [b'{"error": "bad sampling params"}'], "application/json",
                            status=400)

    error = _generate(refuses, streamed)
    assert "answered 400 for request q0" in str(error)
    assert "bad sampling params" in str(error)


def test_no_proxy_is_taken_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({"seen": request.headers.get("x-api", "")})

    async def once() -> object:
        async with serving(answer) as url, Client(url, 1, 30, {"x-api": "k"}) as client:
            return (await client.get("/server_info")).json()
    assert asyncio.run(once()) == {"seen": "k"}  # the endpoint's headers are sent too


def test_a_transport_error_is_one_class_for_every_failure() -> None:
    assert issubclass(TransportTimeout, TransportError)

    async def once() -> None:
        async with Client(f"http://127.0.0.1:{free_port()}", 1, 30) as client:
            await client.get("/health")
    with pytest.raises(TransportError) as raised:
        asyncio.run(once())
    assert str(raised.value)  # the library's own words, never empty
    assert json.dumps(str(raised.value))
