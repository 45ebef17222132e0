"""A flush resets every DP rank before a measurement starts, or the run says why not.

SGLang answers `/flush_cache` for its first DP rank alone, and a rank busy at that moment
(still finishing a warm-up request) keeps its counters behind the 200; its server figure
then covers requests the harness never measured, and the per-rank cross-check fails for
no fault of the build. The server here is the reference engine's own HTTP server, whose
flush follows SGLang's (tests/sglang_oracle pins that to SGLang's code), with no worker
started: the ranks' counters and business are set by hand.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from harness.engines.sglang import ADAPTER
from harness.errors import EngineError
from harness.run import drive
from harness.run.drive import Driver, Endpoint
from harness.suite.model import SpecBenchWorkload
from reference_engine.engine import Engine
from reference_engine.loading import Options
from reference_engine.routes import routes
from reference_engine.web import make_server


@pytest.fixture
def dp2() -> Iterator[tuple[Engine, str]]:
    """A DP-2 reference server whose two ranks both hold a warm-up's figures."""
    engine = Engine(Options(target="t", draft="d"), 1, {}, dp_size=2)  # workers not started
    for counters in engine.rank_counters:
        counters.add({"accepted_drafts": [3, 1]})
    server = make_server(engine, "127.0.0.1", 0, routes())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield engine, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def flush(url: str) -> float:
    driver = Driver(Endpoint(url, ADAPTER),
                    SpecBenchWorkload(kind="spec_bench", concurrency=1, max_tokens=8))
    started = time.monotonic()
    asyncio.run(driver.flush())
    return time.monotonic() - started


def figures(engine: Engine) -> list[float | None]:
    return [state.get("avg_spec_accept_length")
            for state in engine.server_info()["internal_states"]]


def test_a_rank_busy_behind_a_200_is_flushed_again_once_idle(
        dp2: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, url = dp2
    monkeypatch.setattr(drive, "FLUSH_RETRY_S", 0.05)
    engine.rank_in_flight[1] = 1  # rank 0 idle: the flush answers 200 for it
    threading.Timer(0.3, lambda: engine.rank_in_flight.__setitem__(1, 0)).start()
    waited = flush(url)
    assert figures(engine) == [None, None]
    assert waited >= 0.3  # it did not take the first 200 for a reset


def test_an_idle_server_is_flushed_at_once(dp2: tuple[Engine, str]) -> None:
    engine, url = dp2
    assert flush(url) < drive.FLUSH_RETRY_S
    assert figures(engine) == [None, None]


def test_a_rank_that_never_idles_fails_the_run_naming_it(
        dp2: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch) -> None:
    engine, url = dp2
    monkeypatch.setattr(drive, "FLUSH_RETRY_S", 0.01)
    engine.rank_in_flight[1] = 1
    with pytest.raises(EngineError) as raised:
        flush(url)
    message = str(raised.value)
    assert "/flush_cache did not reset the server's counters" in message
    assert "DP rank 1 kept its counters" in message
    assert figures(engine) == [None, 3.0]


def test_a_refusing_first_rank_is_waited_for(dp2: tuple[Engine, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    engine, url = dp2
    monkeypatch.setattr(drive, "FLUSH_RETRY_S", 0.01)
    engine.rank_in_flight[0] = 1
    with pytest.raises(EngineError, match=r"last answer: 400 Flush cache failed"):
        flush(url)
