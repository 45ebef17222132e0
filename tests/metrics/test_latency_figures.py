"""Latency and throughput of a run (harness.metrics.latency): each request's figures from
its streamed arrival times, and the run's percentiles with their CIs over prompts, for any
gaps (zero, huge), one-token and token-less requests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.metrics import latency, stats
from harness.results import possible
from harness.results.record import LatencySummary, RequestRow, RequestTiming

GAP = st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False)


def row(index: int, question: int, tokens: int, chunks: list[float] | None,
        latency_s: float = 1.0, note: str | None = None) -> RequestRow:
    timing = None if chunks is None else RequestTiming(
        streamed=True, ttft_s=chunks[0] if chunks else None, chunk_s=chunks, note=note)
    return RequestRow(index=index, question_index=question, completion_tokens=tokens,
                      verify_steps=max(1, tokens // 2) if tokens else 0,
                      spec_accept_length=0.0, latency_s=latency_s, timing=timing)


def arrivals(first: float, gaps: list[float]) -> list[float]:
    return [first, *np.cumsum([first, *gaps])[1:].tolist()]


def test_a_requests_figures_follow_their_definitions() -> None:
    figures = latency.request_figures(row(0, 0, 9, [0.5, 0.7, 1.0, 1.3]))
    assert figures.ttft == 0.5 and figures.e2e == 1.3
    assert figures.tpot == pytest.approx((1.3 - 0.5) / 8)
    assert figures.gaps == pytest.approx([0.2, 0.3, 0.3])


def test_one_token_has_a_ttft_and_no_tpot_or_gap() -> None:
    figures = latency.request_figures(row(0, 0, 1, [0.25]))
    assert (figures.ttft, figures.e2e, figures.tpot, figures.gaps) == (0.25, 0.25, None, [])


def test_an_unstreamed_request_has_only_its_latency() -> None:
    figures = latency.request_figures(row(0, 0, 5, None, latency_s=2.0))
    assert (figures.ttft, figures.e2e, figures.tpot, figures.gaps) == (None, 2.0, None, [])


def test_a_summary_names_every_definition_and_counts_its_rows() -> None:
    rows = [row(0, 0, 4, [0.1, 0.2, 0.4]), row(1, 1, 2, [0.2, 0.3]),
            row(2, 2, 3, [], note="the stream carried no output token")]
    summary = latency.summarise_latency(rows, duration_s=2.0, concurrency=2)
    for name in (latency.TTFT, latency.TPOT, latency.ITL, latency.E2E,
                 latency.OUTPUT_THROUGHPUT, latency.REQUEST_THROUGHPUT, "percentile", "ci"):
        assert summary.definitions[name]
    assert (summary.n_requests, summary.n_timed) == (3, 2)
    assert summary.output_tok_s == pytest.approx(9 / 2.0)
    assert summary.requests_s == pytest.approx(3 / 2.0)
    assert summary.ttft_s is not None and summary.ttft_s.n == 2
    assert summary.itl_s is not None and summary.itl_s.n == 3
    assert summary.notes == ["1 request(s): the stream carried no output token (q2)"]
    LatencySummary.model_validate(summary.model_dump(mode="json"))


def test_no_rows_and_no_time_give_no_figures() -> None:
    summary = latency.summarise_latency([], duration_s=0.0)
    assert summary.n_requests == 0 and summary.ttft_s is None and summary.output_tok_s is None


@settings(max_examples=150, deadline=None)
@given(requests=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 50), GAP,
                                   st.lists(GAP, max_size=12)), min_size=1, max_size=25),
       duration=st.floats(min_value=0.0, max_value=1e7, allow_nan=False))
def test_any_gaps_give_ordered_finite_figures_inside_their_intervals(
        requests: list[tuple[int, int, float, list[float]]], duration: float) -> None:
    rows = []
    for index, (question, tokens, first, gaps) in enumerate(requests):
        chunks = arrivals(first, gaps[:max(0, tokens - 1)]) if tokens else []
        rows.append(row(index, question, tokens, chunks))
    summary = latency.summarise_latency(rows, duration_s=duration, seed=3)
    LatencySummary.model_validate(summary.model_dump(mode="json"))
    possible.check_latency("latency", summary.model_dump(mode="json"))  # never refused
    for spread in (summary.ttft_s, summary.tpot_s, summary.itl_s, summary.e2e_s):
        if spread is None:
            continue
        values = [spread.mean, spread.p50, spread.p90, spread.p99]
        assert all(math.isfinite(v) and v >= 0 for v in values)
        assert spread.p50 <= spread.p90 <= spread.p99
        for name in ("mean", "p50", "p90", "p99"):
            ci = getattr(spread, f"{name}_ci")
            if ci is not None:
                point = getattr(spread, name)
                assert ci[0] <= point * (1 + 1e-12) + 1e-12
                assert ci[1] >= point * (1 - 1e-12) - 1e-12
    timed = [r for r in rows if r.completion_tokens and r.timing and r.timing.chunk_s]
    assert summary.n_timed == len(timed)
    if summary.ttft_s is not None:
        firsts = [r.timing.chunk_s[0] for r in timed if r.timing]
        assert min(firsts) <= summary.ttft_s.p50 <= max(firsts)
    tokens = sum(r.completion_tokens for r in rows)
    if duration > 0 and math.isfinite(max(tokens, len(rows)) / duration):
        assert summary.output_tok_s == pytest.approx(tokens / duration)
        ci = summary.output_tok_s_ci
        if ci is not None:
            assert ci[0] <= summary.output_tok_s <= ci[1]
    else:
        assert summary.output_tok_s is None and summary.requests_s is None


@settings(max_examples=100, deadline=None)
@given(values=st.lists(GAP, min_size=1, max_size=60), clusters=st.integers(1, 8))
def test_the_percentiles_are_numpys_inverted_cdf(values: list[float], clusters: int) -> None:
    groups = [i % clusters for i in range(len(values))]
    found = stats.cluster_statistics(values, groups, n_boot=50)
    for q in (0.5, 0.9, 0.99):
        assert found[f"p{round(q * 100)}"].value == float(
            np.percentile(values, q * 100, method="inverted_cdf"))
    assert found["mean"].value == pytest.approx(float(np.mean(values)), rel=1e-9)
    if len(set(groups)) < 2:
        assert all(s.ci is None for s in found.values())


def test_the_interval_resamples_whole_prompts() -> None:
    # one prompt holds every slow gap: resampling prompts, not gaps, leaves replicates with
    # none of them, so the p99's interval reaches far below its point
    values = [10.0] * 20 + [0.1] * 80
    groups = [0] * 20 + [1 + i // 10 for i in range(80)]
    found = stats.cluster_statistics(values, groups, seed=1)
    assert found["p99"].value == 10.0
    assert found["p99"].ci is not None and found["p99"].ci[0] == pytest.approx(0.1)


def test_impossible_values_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        stats.cluster_statistics([1.0, math.inf], [0, 1])
    with pytest.raises(ValueError):
        stats.cluster_statistics([], [])
