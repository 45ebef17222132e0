"""Measure: SGLang's /generate responses and /server_info, and the run's exact figures.

Response shapes follow SGLang's `tokenizer_manager.py` (`_calculate_spec_decoding_metrics`):
0.5.23 sends the canonical keys only; 0.5.17 adds the aliases spec_accepted_drafts /
spec_proposed_drafts / spec_accept_histogram; older releases sent only spec_verify_ct, or
spec_accept_token_num / spec_draft_token_num next to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.errors import EngineError, MissingMetric
from harness.measure import (
    parse_generate_response,
    server_accept_length,
    summarise,
)
from harness.record import RequestRow
from harness.stats import per_position_acceptance, sum_histograms

# 10 verify steps accepting 2,3,4,5,5,5,5,5,6,6 drafts = 46 accepted; + 10 bonus tokens
# + 1 token from prefill = 57 completion tokens (SGLang counts the prefill token).
HISTOGRAM_16 = [0, 0, 1, 1, 1, 5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]


def response_0_5_23() -> dict[str, Any]:
    return {
        "text": " Janet sells 16 - 3 - 4 = 9 duck eggs.\nShe makes 9 * 2 = $18.\n#### 18\n\n",
        "output_ids": [791, 14596, 6763, 220, 845],
        "meta_info": {
            "id": "9c1d3f0e5b2a4c7f8e6d",
            "finish_reason": {"type": "stop", "matched": "Question"},
            "prompt_tokens": 812,
            "weight_version": "default",
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": 57,
            "cached_tokens": 800,
            "e2e_latency": 1.234,
            "spec_accept_rate": 46 / 150,
            "spec_accept_length": 5.7,
            "spec_num_correct_drafts": 46,
            "spec_num_proposed_drafts": 150,
            "spec_verify_ct": 10,
            "spec_correct_drafts_histogram": list(HISTOGRAM_16),
        },
    }


def response_0_5_17() -> dict[str, Any]:
    payload = response_0_5_23()
    meta = payload["meta_info"]
    meta["spec_accepted_drafts"] = meta["spec_num_correct_drafts"]
    meta["spec_proposed_drafts"] = meta["spec_num_proposed_drafts"]
    meta["spec_accept_histogram"] = list(meta["spec_correct_drafts_histogram"])
    return payload


def _meta(**spec: Any) -> dict[str, Any]:
    base = response_0_5_23()
    meta = {k: v for k, v in base["meta_info"].items() if not k.startswith("spec_")}
    meta.update(spec)
    return {"text": base["text"], "output_ids": base["output_ids"], "meta_info": meta}


def test_parse_0_5_23() -> None:
    parsed = parse_generate_response(response_0_5_23())
    assert parsed.completion_tokens == 57
    assert parsed.verify_steps == 10
    assert parsed.histogram == HISTOGRAM_16
    assert parsed.prompt_tokens == 812
    assert parsed.finish_reason == "stop"
    assert parsed.text.endswith("#### 18\n\n")


def test_parse_0_5_17_with_aliases() -> None:
    parsed = parse_generate_response(response_0_5_17())
    assert (parsed.completion_tokens, parsed.verify_steps) == (57, 10)
    assert parsed.histogram == HISTOGRAM_16


def test_parse_alias_only_histogram() -> None:
    payload = _meta(spec_verify_ct=10, spec_accepted_drafts=46, spec_proposed_drafts=150,
                    spec_accept_histogram=[0, 3, 7])
    parsed = parse_generate_response(payload)
    assert parsed.verify_steps == 10 and parsed.histogram == [0, 3, 7]


def test_parse_oldest_shape_only_verify_count() -> None:
    parsed = parse_generate_response(_meta(spec_verify_ct=10))
    assert (parsed.completion_tokens, parsed.verify_steps, parsed.histogram) == (57, 10, None)


def test_parse_token_num_shape() -> None:
    # one old variant pre-set rate and length to 0 unconditionally: they must not be used
    payload = _meta(spec_accept_rate=0.0, spec_accept_length=0, spec_accept_token_num=46,
                    spec_draft_token_num=150, spec_verify_ct=10)
    parsed = parse_generate_response(payload)
    assert (parsed.completion_tokens, parsed.verify_steps) == (57, 10)


def test_one_element_list() -> None:
    parsed = parse_generate_response([response_0_5_23()])
    assert parsed.verify_steps == 10


def test_two_element_list_is_not_one_response() -> None:
    with pytest.raises(MissingMetric, match="expected a JSON object, got list"):
        parse_generate_response([response_0_5_23(), response_0_5_23()])


def test_missing_meta_info() -> None:
    payload = response_0_5_23()
    del payload["meta_info"]
    with pytest.raises(MissingMetric, match="no meta_info"):
        parse_generate_response(payload, where="/generate q5")
    with pytest.raises(MissingMetric):
        parse_generate_response({"text": "x", "meta_info": None})
    with pytest.raises(MissingMetric):
        parse_generate_response("not json")


def test_missing_completion_tokens() -> None:
    payload = response_0_5_23()
    del payload["meta_info"]["completion_tokens"]
    with pytest.raises(MissingMetric, match="no completion token count"):
        parse_generate_response(payload)


def test_missing_verify_count_with_many_tokens() -> None:
    with pytest.raises(MissingMetric, match="no verify count"):
        parse_generate_response(_meta())
    # an accept length alone cannot give an exact figure
    with pytest.raises(MissingMetric, match="spec_accept_length but no verify count"):
        parse_generate_response(_meta(spec_accept_length=5.7))


def test_zero_verify_steps_with_many_tokens() -> None:
    with pytest.raises(MissingMetric, match="0 verify steps"):
        parse_generate_response(_meta(spec_verify_ct=0))


@pytest.mark.parametrize("tokens", [0, 1])
def test_one_token_request_has_zero_steps(tokens: int) -> None:
    payload = _meta()
    payload["meta_info"]["completion_tokens"] = tokens
    payload["meta_info"]["finish_reason"] = {"type": "length", "length": 1}
    parsed = parse_generate_response(payload)
    assert (parsed.completion_tokens, parsed.verify_steps) == (tokens, 0)
    assert parsed.finish_reason == "length"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("completion_tokens", "57"),
        ("completion_tokens", 57.5),
        ("completion_tokens", -1),
        ("completion_tokens", True),
        ("completion_tokens", [57]),
        ("spec_verify_ct", "10"),
        ("spec_verify_ct", 10.5),
        ("spec_verify_ct", -10),
        ("spec_verify_ct", False),
        ("spec_verify_ct", {"n": 10}),
    ],
)
def test_non_integer_counts(field: str, value: Any) -> None:
    payload = response_0_5_23()
    payload["meta_info"][field] = value
    with pytest.raises(MissingMetric, match="not a"):
        parse_generate_response(payload)


def test_whole_float_counts_are_accepted() -> None:
    payload = response_0_5_23()
    payload["meta_info"]["completion_tokens"] = 57.0
    assert parse_generate_response(payload).completion_tokens == 57


def test_malformed_histogram_is_dropped() -> None:
    payload = response_0_5_23()
    payload["meta_info"]["spec_correct_drafts_histogram"] = ["a", 1]
    assert parse_generate_response(payload).histogram is None


def test_missing_metric_is_an_engine_error() -> None:
    assert issubclass(MissingMetric, EngineError)
    assert MissingMetric("x").exit_code == 3


def _server_info(*states: dict[str, Any]) -> dict[str, Any]:
    return {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
            "version": "0.5.23", "internal_states": list(states)}


def test_server_accept_length() -> None:
    state = {"speculative_algorithm": "DFLASH", "world_size": 2, "avg_spec_accept_length": 5.6333}
    assert server_accept_length(_server_info(state)) == pytest.approx(5.6333)


def test_server_accept_length_absent() -> None:
    assert server_accept_length(_server_info({"world_size": 2})) is None  # folded in too rarely
    assert server_accept_length(_server_info()) is None
    assert server_accept_length({"version": "0.5.23"}) is None
    assert server_accept_length({"internal_states": None}) is None
    assert server_accept_length(None) is None
    assert server_accept_length([]) is None
    assert server_accept_length(_server_info({"avg_spec_accept_length": float("nan")})) is None


def test_server_accept_length_dp_ranks_averaged() -> None:
    info = _server_info({"avg_spec_accept_length": 5.0}, {"avg_spec_accept_length": 6.0},
                        {"avg_spec_accept_length": 5.5})
    assert server_accept_length(info) == pytest.approx(5.5)
    # a rank that has not folded its figure in yet is left out, not counted as 0
    assert server_accept_length(_server_info({"avg_spec_accept_length": 5.0}, {})) == 5.0


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
         histogram: list[int] | None = None) -> RequestRow:
    return RequestRow(index=i, question_index=i + 5, completion_tokens=tokens, verify_steps=steps,
                      accept_length=tokens / steps if steps else 0.0, latency_s=latency,
                      correct=correct, accept_histogram=histogram)


def test_summarise_exact_figure_is_ratio_of_sums() -> None:
    rows = [_row(0, 10, 2), _row(1, 30, 10)]  # per-request 5.0 and 3.0
    measurement = summarise(rows, duration_s=4.0, server_figure=None, ci=None)
    assert measurement.accept_length == pytest.approx(40 / 12)
    assert measurement.accept_length != pytest.approx((5.0 + 3.0) / 2)  # not the mean of ratios
    assert (measurement.completion_tokens, measurement.verify_steps) == (40, 12)
    assert measurement.n_requests == 2
    assert measurement.output_throughput_tok_s == pytest.approx(10.0)
    assert measurement.server_accept_length is None and measurement.server_disagreement is None


def test_summarise_from_parsed_responses() -> None:
    parsed = [parse_generate_response(r) for r in (response_0_5_23(), response_0_5_17())]
    one_token = _meta()
    one_token["meta_info"]["completion_tokens"] = 1
    parsed.append(parse_generate_response(one_token))
    rows = [_row(i, p.completion_tokens, p.verify_steps, histogram=p.histogram)
            for i, p in enumerate(parsed)]
    measurement = summarise(rows, 2.0, server_figure=5.6, ci=(5.5, 5.9))
    assert measurement.accept_length == pytest.approx((57 + 57 + 1) / 20)
    assert measurement.accept_length_ci == (5.5, 5.9)
    assert measurement.accept_histogram == [2 * v for v in HISTOGRAM_16]
    assert measurement.per_position_acceptance[:3] == pytest.approx([1.0, 1.0, 0.9])
    assert measurement.server_disagreement == pytest.approx((5.6 - 5.75) / 5.75)


def test_summarise_histograms_of_different_widths() -> None:
    rows = [_row(0, 5, 2, histogram=[1, 2]), _row(1, 9, 3, histogram=[0, 1, 3]), _row(2, 3, 1)]
    measurement = summarise(rows, 1.0, None, None)
    assert measurement.accept_histogram == [1, 3, 3]
    assert measurement.per_position_acceptance == pytest.approx([6 / 7, 3 / 7])


def test_summarise_latency_quantiles() -> None:
    rows = [_row(i, 10, 2, latency=lat) for i, lat in enumerate([4.0, 1.0, 3.0, 2.0])]
    measurement = summarise(rows, 1.0, None, None)
    assert measurement.latency_p50_s == pytest.approx(2.5)
    assert measurement.latency_p90_s == pytest.approx(3.7)
    single = summarise([_row(0, 10, 2, latency=7.0)], 1.0, None, None)
    assert single.latency_p50_s == single.latency_p90_s == 7.0


def test_summarise_accuracy() -> None:
    rows = [_row(0, 10, 2, correct=True), _row(1, 10, 2, correct=False),
            _row(2, 10, 2, correct=True), _row(3, 10, 2, correct=None)]
    measurement = summarise(rows, 1.0, None, None)
    assert measurement.accuracy == pytest.approx(2 / 3)  # ungraded rows are left out
    assert measurement.n_correct == 2
    ungraded = summarise([_row(0, 10, 2)], 1.0, None, None)
    assert ungraded.accuracy is None and ungraded.n_correct is None


def test_summarise_zero_duration_has_no_throughput() -> None:
    assert summarise([_row(0, 10, 2)], 0.0, None, None).output_throughput_tok_s is None


def test_summarise_no_requests_or_no_steps() -> None:
    with pytest.raises(MissingMetric, match="no measured request"):
        summarise([], 1.0, 5.0, None)
    with pytest.raises(MissingMetric, match="0 verify steps"):
        summarise([_row(0, 1, 0), _row(1, 0, 0)], 1.0, 5.0, None)

