"""Continuous dispatch and the measured phase's progress (harness.run.drive uses both).

`dispatch` keeps `concurrency` requests in flight, in order; a stop rule's look comes once
every prompt before it has finished, and a settled look cancels what still runs. Requests
past the next look are sent only while fewer than `past_look` run (the suite's
`workload.sequential_in_flight`): on an engine whose step time grows with its batch, a
request the rule may cancel would slow the ones the look waits for. `Progress`
is what the watchdog reads: when the last request finished, the slowest so far (the
no-progress limit, `progress_limit`), and whether the server was seen dead (`drain`: the
answers it already sent are read, nothing new is sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from harness.metrics.stopping import in_flight_limit

T = TypeVar("T")  # what a drained task answers

# Once the server is seen dead or stopped, answers it sent in full before may still wait in
# the socket (a loaded host reads them late): they are read while they keep coming (one at
# least every DRAIN_QUIET_S), for DRAIN_MAX_S at most, so every finished request is kept.
DRAIN_QUIET_S = 0.5
DRAIN_MAX_S = 3.0
# The no-progress limit once requests have finished: PROGRESS_MULTIPLE x the slowest one
# (its latency includes its wait in the server's queue), at least PROGRESS_FLOOR_S (a
# loaded host's stalls), at most the suite's progress_timeout_s.
PROGRESS_MULTIPLE = 4.0
PROGRESS_FLOOR_S = 10.0


def progress_limit(cap_s: float, slowest_s: float | None) -> float:
    """Seconds without a finished request after which the server counts as hung."""
    if slowest_s is None:
        return cap_s
    return min(cap_s, max(PROGRESS_FLOOR_S, PROGRESS_MULTIPLE * slowest_s))


@dataclass
class Progress:
    """When the last request finished, and the slowest latency so far (the watchdog's)."""

    last: float = field(default_factory=time.monotonic)
    slowest: float | None = None
    halted: bool = False  # the server is seen dead or stopped: send nothing more

    def finished(self, latency: float) -> None:
        self.last = time.monotonic()
        self.slowest = max(self.slowest or 0.0, latency)

    def why(self, cap: float) -> str:
        if self.slowest is None:
            return f"none has yet; workload.progress_timeout_s {cap:g} s"
        return (f"{PROGRESS_MULTIPLE:g} x the slowest so far, {self.slowest:.3g} s, at least "
                f"{PROGRESS_FLOOR_S:g} s, at most workload.progress_timeout_s {cap:g} s")


@dataclass
class Dispatch:
    """What a dispatch did: prompts sent, looks taken, the settle, prompts cancelled."""

    sent: int = 0
    taken: list[int] = field(default_factory=list)
    settled: str | None = None
    cancelled: list[int] = field(default_factory=list)  # prompt positions, in flight at the end


async def dispatch(n: int, concurrency: int, one: Callable[[int], Awaitable[None]],
                   looks: Sequence[int], look: Callable[[int], str | None], state: Dispatch,
                   progress: Progress, past_look: int | None = None) -> None:
    """Prompts 0..n-1 with `concurrency` in flight; `look(at)` once prompts 0..at-1
    have all finished; a settled look ends the dispatch, cancelling what runs. A prompt
    past the next look is sent only while fewer than `past_look` run (None: `concurrency`).
    Once the watchdog halts it (a dead server), what runs finishes and nothing is sent."""
    running: dict[asyncio.Future[None], int] = {}
    done: set[int] = set()
    prefix, pending = 0, list(looks)

    def may_send() -> bool:
        limit = in_flight_limit(state.sent, pending[0] if pending else None, concurrency,
                                past_look)
        return state.sent < n and len(running) < limit and not progress.halted

    try:
        while True:
            while may_send():
                running[asyncio.ensure_future(one(state.sent))] = state.sent
                state.sent += 1
            if not running:
                return
            finished, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in finished:
                done.add(running.pop(task))
                task.result()  # a failed request ends the run (finally: the rest cancelled)
            while prefix in done:
                prefix += 1
            while pending and pending[0] <= prefix:
                state.taken.append(pending.pop(0))
                state.settled = look(state.taken[-1])
                if state.settled is not None:
                    return
    finally:
        for task, index in running.items():
            if not task.done():
                task.cancel()
                state.cancelled.append(index)
        await asyncio.gather(*running, return_exceptions=True)
        state.cancelled.sort()


async def drain(task: asyncio.Future[T], progress: Progress | None) -> None:
    """Let `task` read what the server already sent (see DRAIN_QUIET_S)."""
    if progress is None:
        return
    progress.halted = True  # what is in flight finishes or fails; nothing new is sent
    deadline = time.monotonic() + DRAIN_MAX_S
    while time.monotonic() < deadline:
        seen = progress.last
        done, _ = await asyncio.wait({task}, timeout=DRAIN_QUIET_S)
        if done:  # its own error, if any, is the server's death: retrieved, not raised
            with contextlib.suppress(asyncio.CancelledError):
                task.exception()
            return
        if progress.last == seen:
            return
