"""Continuous dispatch under `--sequential` (issue 30): `concurrency` in flight at all times,
a look only once every question before it has finished (the rule sees exactly that
prefix, as waves would show it), at a settle the requests in flight cancelled and named,
every finished one kept; and the run says where a stop cannot save wall time."""

from __future__ import annotations

import asyncio

from harness.run.dispatch import Dispatch, Progress, dispatch
from harness.run.sequential import sequential_saving_note

# each question's latency in ticks: question 0 is slow, so the first look waits for it
LATENCY = [9, 2, 2, 3, 2, 4, 3, 3, 4, 3, 3, 3]
TICK = 0.02


def _run(concurrency: int, looks: list[int], settle_at: int | None
         ) -> tuple[Dispatch, list[int], list[tuple[int, list[int]]], int]:
    finished: list[int] = []
    seen: list[tuple[int, list[int]]] = []  # (look, questions finished when it came)
    in_flight, most = [0], [0]

    async def one(index: int) -> None:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        try:
            await asyncio.sleep(LATENCY[index] * TICK)
            finished.append(index)
        finally:
            in_flight[0] -= 1

    def look(at: int) -> str | None:
        seen.append((at, sorted(finished)))
        return "pass" if at == settle_at else None

    state = Dispatch()
    asyncio.run(dispatch(len(LATENCY), concurrency, one, looks, look, state, Progress()))
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
