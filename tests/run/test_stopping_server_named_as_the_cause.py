"""A server being stopped (a scheduler cancelling its job, a node lost) may answer a request
with a 5xx before its death shows: the run's error then names the death, not the answer; a
5xx from a server that lives is reported as it was given, and a 4xx is never waited on."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from harness.engines.http_client import Client
from harness.engines.sglang import ADAPTER
from harness.errors import EngineError
from harness.run import drive
from harness.run.drive import Driver, Endpoint
from harness.suite.model import SpecBenchWorkload
from harness.workloads import Prompt
from tests.fixtures.http_double import serving

PROMPT = Prompt(0, "Write a poem.", None, "writing", "81")


def _generate(status: int, dies: bool) -> tuple[EngineError, list[str]]:
    calls: list[str] = []

    def liveness() -> str | None:
        calls.append("liveness")
        return "Slurm job 7 is CANCELLED (by user)" if dies else None

    async def answer(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"message": "no decoding worker is left"}},
                                 status=status)

    driver = Driver(Endpoint("http://server", ADAPTER, liveness=liveness),
                    SpecBenchWorkload(kind="spec_bench", concurrency=1, max_tokens=8))

    async def once() -> None:
        async with serving(answer) as url, Client(url, 1, 30) as client:
            await driver.generate(client, PROMPT, "q0")

    with pytest.raises(EngineError) as raised:
        asyncio.run(once())
    return raised.value, calls


def test_a_5xx_from_a_server_that_died_names_the_death() -> None:
    error, _ = _generate(500, dies=True)
    assert str(error).startswith("Slurm job 7 is CANCELLED (by user)")
    assert "while waiting for" in str(error)


def test_a_5xx_from_a_living_server_is_reported_as_given(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(drive, "DEATH_GRACE_S", 0.1)
    error, calls = _generate(503, dies=False)
    assert "answered 503 for request q0" in str(error)
    assert "no decoding worker is left" in str(error)
    assert calls  # the death was looked for


def test_a_4xx_is_the_request_and_not_waited_on() -> None:
    error, calls = _generate(400, dies=True)
    assert "answered 400 for request q0" in str(error)
    assert not calls
