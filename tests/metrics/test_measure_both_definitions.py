"""Measure: the run's exact figures in both accept-length definitions.

The server definition (`server_avg`) counts, per verify step, the correct drafts plus the
bonus token (SGLang's metrics reporter); the per-request definition (`per_request`) is
completion tokens per verify step, the prefill token included (SGLang's meta_info).
"""

from __future__ import annotations

import pytest

from harness.engines.sglang.api import parse_generate
from harness.errors import MissingMetric
from harness.metrics.definitions import accept_lengths, numerator, numerators
from harness.metrics.measure import summarise
from harness.metrics.stats import per_position_acceptance, sum_histograms
from harness.results.record import RequestRow
from tests.engines.sglang.test_api_responses import (
    HISTOGRAM_16,
    _meta,
    response_0_5_17,
    response_0_5_23,
)


def test_per_position_acceptance() -> None:
    assert per_position_acceptance([1, 2, 1]) == [0.75, 0.25]
    result = per_position_acceptance(HISTOGRAM_16)
    assert len(result) == 15
    assert result[:7] == pytest.approx([1.0, 1.0, 0.9, 0.8, 0.7, 0.2, 0.0])
    # summed over requests, different widths
    summed = sum_histograms([[2, 2], [0, 0, 4], None])
    assert summed == [2, 2, 4]
    assert per_position_acceptance(summed) == pytest.approx([6 / 8, 4 / 8])
    assert per_position_acceptance([]) == []
    assert per_position_acceptance(sum_histograms([[], [0, 0]])) == []


def _row(i: int, tokens: int, steps: int, latency: float = 1.0, correct: bool | None = None,
         histogram: list[int] | None = None, drafts: int | None = None) -> RequestRow:
    if drafts is None and steps:
        drafts = tokens - 1 - steps  # no step cut short: tokens = prefill + drafts + bonuses
    return RequestRow(index=i, question_index=i + 5, completion_tokens=tokens, verify_steps=steps,
                      correct_drafts=drafts,
                      spec_accept_length=tokens / steps if steps else 0.0, latency_s=latency,
                      correct=correct, accept_histogram=histogram)


def test_two_definitions() -> None:
    # 57 tokens: 1 from prefill + 10 verify steps of (46 correct drafts + 10 bonus tokens)
    row = _row(0, 57, 10, drafts=46)
    assert numerator(row, "server_avg") == 56
    assert numerator(row, "per_request") == 57
    # a last step cut by a stop string: SGLang's server counter still counts its drafts
    cut = _row(1, 50, 10, drafts=46)
    assert numerator(cut, "server_avg") == 56
    # a request that ended at prefill contributes nothing to either ratio: SGLang gives
    # it no spec fields, so its token is in no pooled spec_accept_length (issue 19, 9)
    prefill_only = _row(2, 1, 0)
    assert numerators([prefill_only], "server_avg") == [0]
    assert numerators([prefill_only], "per_request") == [0]
    figures = accept_lengths([row, cut, prefill_only])
    assert figures["server_avg"] == pytest.approx(112 / 20)
    assert figures["per_request"] == pytest.approx(107 / 20)
    # v1 rows (no correct drafts): the prefill token left out
    assert numerator({"completion_tokens": 57, "verify_steps": 10}, "server_avg") == 56
    with pytest.raises(ValueError, match="unknown metric"):
        numerator(row, "mean_of_ratios")


def test_summarise_records_both_definitions_and_judges_the_declared_one() -> None:
    rows = [_row(0, 57, 10, drafts=46), _row(1, 21, 5, drafts=15)]
    server = summarise(rows, "server_avg", 1.0, None)
    per_request = summarise(rows, "per_request", 1.0, None)
    assert server.metric == "server_avg" and per_request.metric == "per_request"
    assert server.accept_length == pytest.approx((56 + 20) / 15)
    assert per_request.accept_length == pytest.approx(78 / 15)
    for m in (server, per_request):
        assert m.accept_length_server_avg == pytest.approx((56 + 20) / 15)
        assert m.accept_length_per_request == pytest.approx(78 / 15)
        assert m.correct_drafts == 61
    assert server.accept_length_ci is not None
    assert server.accept_length_ci != per_request.accept_length_ci


def test_summarise_exact_figure_is_ratio_of_sums() -> None:
    rows = [_row(0, 10, 2), _row(1, 30, 10)]  # per-request 5.0 and 3.0
    measurement = summarise(rows, "per_request", duration_s=4.0, server_figure=None)
    assert measurement.accept_length == pytest.approx(40 / 12)
    assert measurement.accept_length != pytest.approx((5.0 + 3.0) / 2)  # not the mean of ratios
    assert (measurement.completion_tokens, measurement.verify_steps) == (40, 12)
    assert measurement.n_requests == 2
    assert measurement.output_throughput_tok_s == pytest.approx(10.0)
    assert measurement.server_reported_accept_length is None
    assert measurement.server_disagreement is None


def test_summarise_from_parsed_responses() -> None:
    parsed = [parse_generate(r) for r in (response_0_5_23(), response_0_5_17())]
    one_token = _meta()
    one_token["meta_info"]["completion_tokens"] = 1
    parsed.append(parse_generate(one_token))
    rows = [_row(i, p.completion_tokens, p.verify_steps, histogram=p.histogram,
                 drafts=p.correct_drafts)
            for i, p in enumerate(parsed)]
    measurement = summarise(rows, "per_request", 2.0, server_figure=5.6)
    assert measurement.accept_length == pytest.approx((57 + 57) / 20)  # the 1-token one: 0
    assert measurement.accept_length_ci is not None
    assert measurement.accept_histogram == [2 * v for v in HISTOGRAM_16]
    assert measurement.per_position_acceptance[:3] == pytest.approx([1.0, 1.0, 0.9])
    # the server figure is compared with server_avg, (2 x (46 + 10) + 0) / 20 = 5.6
    assert measurement.accept_length_server_avg == pytest.approx(5.6)
    assert measurement.server_disagreement == pytest.approx(0.0)


def test_summarise_histograms_of_different_widths() -> None:
    rows = [_row(0, 5, 2, histogram=[1, 2]), _row(1, 9, 3, histogram=[0, 1, 3]), _row(2, 3, 1)]
    measurement = summarise(rows, "per_request", 1.0, None)
    assert measurement.accept_histogram == [1, 3, 3]
    assert measurement.per_position_acceptance == pytest.approx([6 / 7, 3 / 7])


def test_summarise_latency_quantiles() -> None:
    rows = [_row(i, 10, 2, latency=lat) for i, lat in enumerate([4.0, 1.0, 3.0, 2.0])]
    measurement = summarise(rows, "per_request", 1.0, None)
    assert measurement.latency_p50_s == pytest.approx(2.5)
    assert measurement.latency_p90_s == pytest.approx(3.7)
    single = summarise([_row(0, 10, 2, latency=7.0)], "per_request", 1.0, None)
    assert single.latency_p50_s == single.latency_p90_s == 7.0


def test_summarise_accuracy() -> None:
    rows = [_row(0, 10, 2, correct=True), _row(1, 10, 2, correct=False),
            _row(2, 10, 2, correct=True), _row(3, 10, 2, correct=None)]
    measurement = summarise(rows, "per_request", 1.0, None)
    assert measurement.accuracy == pytest.approx(2 / 3)  # ungraded rows are left out
    assert measurement.n_correct == 2
    ungraded = summarise([_row(0, 10, 2)], "per_request", 1.0, None)
    assert ungraded.accuracy is None and ungraded.n_correct is None


def test_summarise_zero_duration_has_no_throughput() -> None:
    assert summarise([_row(0, 10, 2)], "per_request", 0.0, None).output_throughput_tok_s is None


def test_summarise_no_requests_or_no_steps() -> None:
    with pytest.raises(MissingMetric, match="no measured request"):
        summarise([], "per_request", 1.0, 5.0)
    with pytest.raises(MissingMetric, match="0 verify steps"):
        summarise([_row(0, 1, 0), _row(1, 0, 0)], "per_request", 1.0, 5.0)

