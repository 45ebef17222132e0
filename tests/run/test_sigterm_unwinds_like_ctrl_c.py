"""SIGTERM unwinds a run like Ctrl-C, wherever it lands: here inside a request's task group."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import anyio
import pytest

from harness.errors import Interrupted, Terminated, interruption_text, sigterm_as_interrupt


async def _busy_request() -> None:
    """A request mid-flight: Python code running in one of two tasks of an anyio task group
    (as in httpx's connect), so the signal's handler raises inside that task. Another
    exception than a KeyboardInterrupt would leave it wrapped in an ExceptionGroup."""
    async def work() -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # never yields: the signal lands in here
            pass

    async with anyio.create_task_group() as group:
        group.start_soon(anyio.sleep, 10)
        group.start_soon(work)


def test_sigterm_inside_a_task_group_is_caught_as_an_interruption() -> None:
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    caught: BaseException | None = None
    with sigterm_as_interrupt():
        timer.start()
        try:
            asyncio.run(_busy_request())
        except (KeyboardInterrupt, Interrupted) as error:  # what runner.run_suite catches
            caught = error
        finally:
            timer.cancel()
    assert isinstance(caught, Terminated), repr(caught)
    assert interruption_text(caught) == "stopped by signal SIGTERM"


def test_the_previous_sigterm_handler_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_ctrl_c_reads_as_sigint() -> None:
    assert interruption_text(KeyboardInterrupt()) == "interrupted (SIGINT)"
    with pytest.raises(KeyboardInterrupt):
        raise Terminated(signal.SIGTERM)
