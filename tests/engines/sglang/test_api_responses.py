"""SGLang's API as the adapter reads it: /generate responses and /server_info.

Response shapes follow SGLang's `tokenizer_manager.py` (`_calculate_spec_decoding_metrics`):
0.5.23 sends the canonical keys only; 0.5.17 adds the aliases spec_accepted_drafts /
spec_proposed_drafts / spec_accept_histogram; older releases sent only spec_verify_ct, or
spec_accept_token_num / spec_draft_token_num next to it.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.engines.sglang.api import parse_generate as parse_generate_response
from harness.engines.sglang.api import server_figure as server_accept_length
from harness.errors import EngineError, MissingMetric

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


def test_server_accept_length_is_no_average_of_dp_ranks() -> None:
    """Several DP ranks' states have no pooled figure: the mean of their averages is not
    the server's figure (ranks make different numbers of verify steps), so none is
    returned here; each rank is cross-checked on its own (harness.metrics.ranks)."""
    info = _server_info({"avg_spec_accept_length": 5.0}, {"avg_spec_accept_length": 6.0},
                        {"avg_spec_accept_length": 5.5})
    assert server_accept_length(info) is None
    assert server_accept_length(_server_info({"avg_spec_accept_length": 5.0}, {})) is None
    assert server_accept_length(_server_info({"avg_spec_accept_length": 5.0})) == 5.0


