"""Speedup over the target alone (harness.metrics.speedup): paired by question, a ratio of
means with its bootstrap CI over the paired questions, as its definitions say; a question
one side lacks moves neither figure; no ratio is ever infinite or NaN."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics.latency import summarise_latency
from harness.metrics.speedup import DEFINITIONS, speedup, speedup_lines
from harness.results import possible
from harness.results.record import RequestRow, RequestTiming


def row(question: int, tokens: int, tpot: float, ttft: float = 0.1,
        verify_steps: int = 1) -> RequestRow:
    chunks = [ttft + tpot * k for k in range(tokens)]  # one token a chunk
    return RequestRow(index=question, question_index=question, completion_tokens=tokens,
                      verify_steps=verify_steps, spec_accept_length=0.0,
                      latency_s=chunks[-1],
                      timing=RequestTiming(streamed=True, ttft_s=chunks[0], chunk_s=chunks))


def side(tpots: list[float], tokens: int = 11) -> tuple[list[RequestRow], object]:
    rows = [row(q, tokens, tpot) for q, tpot in enumerate(tpots)]
    # one request at a time: the wall time is the sum of the latencies
    return rows, summarise_latency(rows, sum(r.latency_s for r in rows), 1)


def test_a_known_speedup_is_the_ratio_of_the_mean_tpots() -> None:
    spec, spec_latency = side([0.01, 0.02, 0.03])
    alone, alone_latency = side([0.03, 0.06, 0.09])
    found = speedup(spec, alone, spec_latency, alone_latency)
    assert found.n_prompts == 3
    assert found.tpot == pytest.approx(3.0)
    assert found.tpot_ci is not None and found.tpot_ci[0] <= 3.0 <= found.tpot_ci[1]
    assert found.tpot_ci == pytest.approx((3.0, 3.0))  # every question 3x: no spread
    # throughput: each side's output tokens/s of its measured phase
    assert found.speculative_output_tok_s == pytest.approx(spec_latency.output_tok_s)
    assert found.target_alone_output_tok_s == pytest.approx(alone_latency.output_tok_s)
    assert found.throughput == pytest.approx(spec_latency.output_tok_s
                                             / alone_latency.output_tok_s)
    assert set(DEFINITIONS) <= set(found.definitions)
    possible.check_speedup("measurement.speedup", found.model_dump(mode="json"))
    assert "3.000x" in "\n".join(speedup_lines(found))


def test_a_question_one_side_lacks_moves_neither_figure() -> None:
    spec, spec_latency = side([0.01, 0.02])
    alone, alone_latency = side([0.02, 0.04, 99.0])  # question 2: the target alone only
    found = speedup(spec, alone, spec_latency, alone_latency)
    assert found.n_prompts == 2 and found.tpot == pytest.approx(2.0)


def test_no_paired_question_is_no_figure_and_says_why() -> None:
    spec, spec_latency = side([0.01])
    found = speedup(spec, [], spec_latency, None)
    assert found.tpot is None and found.throughput is None and found.n_prompts == 0
    assert found.note and "no question" in found.note
    assert "not measured" in "\n".join(speedup_lines(found))


def test_a_zero_tpot_gives_no_ratio_never_an_infinite_one() -> None:
    spec, spec_latency = side([0.0, 0.0])
    alone, alone_latency = side([0.01, 0.01])
    found = speedup(spec, alone, spec_latency, alone_latency)
    assert found.tpot is None and found.note and "speculation's TPOT is 0" in found.note
    found = speedup(alone, spec, alone_latency, spec_latency)  # the other side's is 0
    assert found.tpot is None and found.note and "target alone's TPOT is 0" in found.note


def test_an_answer_faster_than_the_clock_keeps_the_interval_its_low_end_zero() -> None:
    # a loaded host reads a short answer's every token after the first in one chunk: that
    # question's TPOT is 0, so a resample of it alone has a ratio of 0, which is a bound
    spec, spec_latency = side([0.02, 0.02, 0.02, 0.02])
    alone, alone_latency = side([0.0, 0.01, 0.0, 0.005])
    found = speedup(spec, alone, spec_latency, alone_latency)
    assert found.tpot == pytest.approx(0.1875)
    assert found.tpot_ci is not None and found.tpot_ci[0] == 0.0
    assert found.tpot_ci[0] <= found.tpot <= found.tpot_ci[1]
    possible.check_speedup("measurement.speedup", found.model_dump(mode="json"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1e3), st.floats(0.0, 1e3), st.integers(1, 64)),
                min_size=1, max_size=8))
def test_any_pair_of_runs_gives_a_possible_figure_or_none(
        questions: list[tuple[float, float, int]]) -> None:
    spec = [row(q, tokens, a) for q, (a, _, tokens) in enumerate(questions)]
    alone = [row(q, tokens, b) for q, (_, b, tokens) in enumerate(questions)]
    wall_s, wall_t = sum(r.latency_s for r in spec), sum(r.latency_s for r in alone)
    found = speedup(spec, alone, summarise_latency(spec, wall_s, 1),
                    summarise_latency(alone, wall_t, 1))
    for value in (found.tpot, found.throughput):
        assert value is None or (math.isfinite(value) and value > 0)
    # what it stores, every reader takes: a figure inside its own interval
    possible.check_speedup("measurement.speedup", found.model_dump(mode="json"))
