"""Continuous dispatch under `--sequential` (issue 30): `concurrency` in flight at all times,
a look only once every question before it has finished (the rule sees exactly that
prefix, as waves would show it), at a settle the requests in flight cancelled and named,
every finished one kept; and the run says where a stop cannot save wall time."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.run.dispatch import Dispatch, Progress, dispatch
from harness.run.sequential import sequential_saving_note

# each question's latency in ticks: question 0 is slow, so the first look waits for it
LATENCY = [9, 2, 2, 3, 2, 4, 3, 3, 4, 3, 3, 3]
TICK = 0.02


class _VirtualSelector(selectors.DefaultSelector):
    """A wait for the next timer moves the clock to it at once: the order in which the
    requests finish follows their latencies alone, not how busy the host is (with the
    wall clock, a stalled loop let timers of different latencies fire together)."""

    now = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if not ready and timeout:
            self.now += timeout
        return ready


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._clock = _VirtualSelector()
        super().__init__(self._clock)

    def time(self) -> float:
        return self._clock.now


def _run_virtual(main: Coroutine[Any, Any, None]) -> None:
    with asyncio.Runner(loop_factory=_VirtualTimeLoop) as runner:
        runner.run(main)


def _run(concurrency: int, looks: list[int], settle_at: int | None,
         past_look: int | None = None, log: list[tuple[str, int, int]] | None = None,
         ) -> tuple[Dispatch, list[int], list[tuple[int, list[int]]], int]:
    finished: list[int] = []
    seen: list[tuple[int, list[int]]] = []  # (look, questions finished when it came)
    in_flight, most = [0], [0]
    log = [] if log is None else log  # ("send", question, running before it) / ("look", at, 0)

    async def one(index: int) -> None:
        log.append(("send", index, in_flight[0]))
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        try:
            await asyncio.sleep(LATENCY[index] * TICK)
            finished.append(index)
        finally:
            in_flight[0] -= 1

    def look(at: int) -> str | None:
        seen.append((at, sorted(finished)))
        log.append(("look", at, 0))
        return "pass" if at == settle_at else None

    state = Dispatch()
    _run_virtual(dispatch(len(LATENCY), concurrency, one, looks, look, state, Progress(),
                          past_look))
    return state, finished, seen, most[0]


def test_every_question_runs_with_the_slots_kept_full() -> None:
    state, finished, seen, most = _run(3, [4, 8, 12], settle_at=None)
    assert sorted(finished) == list(range(12)) and most == 3
    assert state.taken == [4, 8, 12] and state.cancelled == [] and state.settled is None
    # a look comes only once every question before it is done (question 0 is the slowest:
    # later questions finished meanwhile, in the slots it did not hold)
    for at, done in seen:
        assert set(range(at)) <= set(done)
    assert len(seen[0][1]) > 4


def test_a_settled_look_cancels_what_runs_and_keeps_what_finished() -> None:
    state, finished, _, _ = _run(3, [4, 8, 12], settle_at=4)
    assert state.settled == "pass" and state.taken == [4]
    assert set(range(4)) <= set(finished)
    # in flight at the settle: cancelled, named, never finished; nothing else was sent
    assert state.cancelled and not set(state.cancelled) & set(finished)
    assert sorted(finished + state.cancelled) == list(range(state.sent))
    assert state.sent < 12


def test_a_halted_dispatch_sends_nothing_more() -> None:
    progress = Progress(halted=True)
    state = Dispatch()

    async def one(index: int) -> None:  # pragma: no cover - never sent
        raise AssertionError(index)

    asyncio.run(dispatch(5, 2, one, [5], lambda at: None, state, progress))
    assert state.sent == 0


def test_the_run_says_where_a_stop_cannot_save_wall_time() -> None:
    assert "saves no wall time" in (sequential_saving_note(128, 100) or "")
    assert "saves little wall time" in (sequential_saving_note(128, 200) or "")
    assert sequential_saving_note(4, 100) is None  # the tiny suites: many rounds
    # the knob that can save is named; once set, the look's requests get the engine
    assert "workload.sequential_in_flight" in (sequential_saving_note(128, 200) or "")
    assert sequential_saving_note(128, 200, sequential_in_flight=16) is None


def test_past_the_next_look_only_sequential_in_flight_run() -> None:
    """workload.sequential_in_flight: a question past the next look is sent only while fewer
    than that many run (an engine whose step time grows with its batch gives the look's
    questions the batch); the look's own questions still fill `concurrency` slots."""
    log: list[tuple[str, int, int]] = []
    state, finished, seen, most = _run(3, [4, 8, 12], settle_at=None, past_look=2, log=log)
    assert sorted(finished) == list(range(12)) and state.taken == [4, 8, 12]
    pending, held = [4, 8, 12], 0
    for kind, number, running in log:
        if kind == "look":
            pending.remove(number)
        elif number >= pending[0]:  # past the next look
            assert running < 2, log
            held += 1
    assert held  # some were sent ahead of their look, beside at most one other
    assert most == 3  # a look's own questions keep every slot
    for at, done in seen:
        assert set(range(at)) <= set(done)
    # the default (None) is every slot busy: questions past a look run beside question 0
    log = []
    _run(3, [4, 8, 12], settle_at=None, log=log)
    assert any(kind == "send" and number >= 4 and running >= 1 for kind, number, running
               in log[: log.index(("look", 4, 0))])


@settings(max_examples=40, deadline=None)
@given(latencies=st.lists(st.integers(0, 4), min_size=1, max_size=24),
       concurrency=st.integers(1, 6), wave=st.integers(1, 8),
       past_look=st.none() | st.integers(1, 8), settle=st.none() | st.integers(0, 4),
       data=st.data())
def test_dispatch_invariants_on_any_latencies(latencies: list[int], concurrency: int,
                                              wave: int, past_look: int | None,
                                              settle: int | None,
                                              data: st.DataObject) -> None:
    """Whatever the latencies, slots, looks and sequential_in_flight: never more than
    `concurrency` run; a question past the next look goes into fewer than
    min(sequential_in_flight, concurrency) running; a look comes only once every question
    before it finished; what was sent finished or was cancelled, never both."""
    n = len(latencies)
    looks = [*range(wave, n, wave), n]
    settle_at = None if settle is None else looks[min(settle, len(looks) - 1)]
    log: list[tuple[str, int, int]] = []
    running: set[int] = set()
    finished: list[int] = []

    async def one(index: int) -> None:
        log.append(("send", index, len(running)))
        running.add(index)
        try:
            await asyncio.sleep(latencies[index] * 0.001)
            finished.append(index)
        finally:
            running.discard(index)

    def look(at: int) -> str | None:
        log.append(("look", at, len(finished)))
        assert set(range(at)) <= set(finished)
        return "pass" if at == settle_at else None

    state = Dispatch()
    _run_virtual(dispatch(n, concurrency, one, looks, look, state, Progress(), past_look))
    limit = concurrency if past_look is None else min(past_look, concurrency)
    pending = list(looks)
    sent = [index for kind, index, _ in log if kind == "send"]
    assert sent == list(range(len(sent))) and len(sent) == state.sent
    for kind, number, running_then in log:
        if kind == "look":
            assert number == pending.pop(0)
            continue
        assert running_then < concurrency
        if pending and number >= pending[0]:
            assert running_then < limit, log
    assert not set(finished) & set(state.cancelled)
    assert sorted(finished + state.cancelled) == sent
    if settle_at is None:
        assert sorted(finished) == list(range(n)) and state.taken == looks
    else:
        assert state.settled == "pass" and state.taken[-1] == settle_at
