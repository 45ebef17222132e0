"""The paired speedup gate (harness.metrics.speedup.paired_speedup): build B's speedup over
its target alone against build A's, paired by question, as its definition says: identical
builds pass with certainty, a B shown slower beyond the tolerance is "worse", a spread
that shows neither is inconclusive; no test without per-question sums on both sides or
with fewer than 2 common questions; no ratio is ever infinite or NaN."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics.latency import summarise_latency
from harness.metrics.speedup import GATED, paired_speedup, speedup
from harness.results import possible
from harness.results.record import RequestRow, RequestTiming, Speedup


def row(question: int, tokens: int, tpot: float, ttft: float = 0.1) -> RequestRow:
    chunks = [ttft + tpot * k for k in range(tokens)]  # one token a chunk
    return RequestRow(index=question, question_index=question, completion_tokens=tokens,
                      verify_steps=1, spec_accept_length=0.0, latency_s=chunks[-1],
                      timing=RequestTiming(streamed=True, ttft_s=chunks[0], chunk_s=chunks))


def build(spec_tpots: list[float], alone_tpots: list[float], tokens: int = 11) -> Speedup:
    """One build's speedup record from its two sides' per-question TPOTs."""
    sides = []
    for tpots in (spec_tpots, alone_tpots):
        rows = [row(q, tokens, tpot) for q, tpot in enumerate(tpots)]
        sides.append((rows, summarise_latency(rows, sum(r.latency_s for r in rows), 1)))
    (spec, spec_latency), (alone, alone_latency) = sides
    return speedup(spec, alone, spec_latency, alone_latency)


A_SPEC = [0.010, 0.012, 0.015, 0.011, 0.013, 0.014, 0.010, 0.016]
A_ALONE = [0.030, 0.033, 0.041, 0.029, 0.035, 0.040, 0.031, 0.044]


def test_each_run_keeps_the_sums_a_later_pair_needs() -> None:
    found = build(A_SPEC, A_ALONE)
    assert found.per_question is not None and len(found.per_question) == len(A_SPEC)
    first = found.per_question[0]
    assert first.speculative_tpot_n == first.target_alone_tpot_n == 1
    assert first.speculative_tpot_sum_s == pytest.approx(0.010)
    assert first.target_alone_tpot_sum_s == pytest.approx(0.030)
    assert found.speculative_in_flight == pytest.approx(1.0)
    possible.check_speedup("measurement.speedup", found.model_dump(mode="json"))


@pytest.mark.parametrize("figure", GATED)
def test_identical_builds_are_not_worse_with_certainty(figure: str) -> None:
    a = build(A_SPEC, A_ALONE)
    result = paired_speedup(a, a, figure, max_drop=0.01)
    assert result.decision == "not_worse" and result.ratio == pytest.approx(1.0)
    assert result.ratio_ci == pytest.approx((1.0, 1.0)) and result.n == len(A_SPEC)
    assert result.level == pytest.approx(0.9)


def test_a_build_that_decodes_half_as_fast_is_worse() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build([t * 2 for t in A_SPEC], A_ALONE)  # speculation twice as slow, target the same
    result = paired_speedup(a, b, "speedup_tpot", max_drop=0.15)
    assert result.decision == "worse"
    assert result.ratio == pytest.approx(0.5)
    assert result.b == pytest.approx(result.a / 2)
    assert result.ratio_ci is not None and result.ratio_ci[1] < 0.85


def test_a_drop_inside_the_tolerance_with_spread_is_not_worse() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build([t * k for t, k in zip(A_SPEC, [1.02, 1.05, 0.98, 1.04, 1.0, 1.03, 1.01, 1.05],
                                     strict=True)], A_ALONE)
    result = paired_speedup(a, b, "speedup_tpot", max_drop=0.2)
    assert result.decision == "not_worse" and 0.9 < result.ratio < 1.0


def test_a_spread_wider_than_the_tolerance_is_inconclusive() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build([t * k for t, k in zip(A_SPEC, [0.5, 1.6, 0.6, 1.5, 0.55, 1.7, 0.5, 1.6],
                                     strict=True)], A_ALONE)
    result = paired_speedup(a, b, "speedup_tpot", max_drop=0.05)
    assert result.decision == "inconclusive"
    assert result.ratio_ci is not None and result.ratio_ci[0] < 0.95 < result.ratio_ci[1]


def test_only_questions_both_builds_paired_enter() -> None:
    a = build(A_SPEC, A_ALONE)
    b = build(A_SPEC[:3], A_ALONE[:3])
    assert paired_speedup(a, b, "speedup_tpot", 0.1).n == 3


@pytest.mark.parametrize(("a_rows", "b_rows", "why"), [
    (None, 8, "A has no per-question speedup sums"),
    (8, None, "B has no per-question speedup sums"),
    (1, 8, r"1 question\(s\) paired"),
])
def test_no_test_without_sums_or_questions(a_rows: int | None, b_rows: int | None,
                                           why: str) -> None:
    def side(n: int | None) -> Speedup:
        if n is None:
            return Speedup(n_prompts=0, note="the target-alone run failed")
        return build(A_SPEC[:n], A_ALONE[:n])

    with pytest.raises(ValueError, match=why):
        paired_speedup(side(a_rows), side(b_rows), "speedup_tpot", 0.1)


@pytest.mark.parametrize("drop", [0.0, 1.0, -0.1, math.inf, math.nan])
def test_an_impossible_tolerance_is_refused(drop: float) -> None:
    a = build(A_SPEC, A_ALONE)
    with pytest.raises(ValueError, match="max_drop"):
        paired_speedup(a, a, "speedup_tpot", drop)


def test_an_unknown_figure_is_refused() -> None:
    a = build(A_SPEC, A_ALONE)
    with pytest.raises(ValueError, match="no paired speedup gate"):
        paired_speedup(a, a, "accept_length", 0.1)


seconds = st.floats(min_value=1e-6, max_value=10.0, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(seconds, seconds, seconds, seconds), min_size=2, max_size=12),
       st.floats(min_value=0.01, max_value=0.99), st.sampled_from(GATED))
def test_any_figures_give_a_finite_ratio_inside_its_interval_or_no_test(
        tpots: list[tuple[float, float, float, float]], drop: float, figure: str) -> None:
    a = build([t[0] for t in tpots], [t[1] for t in tpots])
    b = build([t[2] for t in tpots], [t[3] for t in tpots])
    try:
        result = paired_speedup(a, b, figure, drop)
    except ValueError:
        return  # named: never a NaN or an infinite ratio
    assert math.isfinite(result.ratio) and result.ratio > 0
    assert result.ratio == pytest.approx(result.b / result.a)
    if result.ratio_ci is not None:
        low, high = result.ratio_ci
        assert low <= result.ratio <= high
        floor = 1 - drop
        expected = "not_worse" if low > floor else "worse" if high < floor else "inconclusive"
        assert result.decision == expected
    else:
        assert result.decision == "inconclusive"
