"""Fast checks of the reference engine's pure parts: corpus, recipe, cache, accounting."""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
from pathlib import Path

import pytest

from harness.errors import EngineError
from reference_engine import corpus
from reference_engine.checkpoints import build, checkpoint_dir, is_complete
from reference_engine.openai_api import held_back
from reference_engine.params import BadRequest, check_context, meta_info, parse_sampling
from reference_engine.recipe import (
    DEFAULT_RECIPE,
    REDUCED_OVERRIDES,
    Recipe,
    with_overrides,
)

EXAMPLE = re.compile(r"Question: [^\n]+\nAnswer: .+?\n#### -?\d+\n\n", re.S)


def test_corpus_is_deterministic_and_gsm8k_shaped() -> None:
    first = list(corpus.documents(5, 50))
    assert first == list(corpus.documents(5, 50))
    assert first != list(corpus.documents(6, 50))
    for document in first:
        assert EXAMPLE.sub("", document) == "", document
    for prompt in corpus.prompts(5, 20):
        assert prompt.endswith("\nAnswer:") and prompt.count("Question: ") in (1, 2)


def test_corpus_answers_are_arithmetic_truths() -> None:
    for _, answer in corpus.examples(9, 200):
        for expression, value in re.findall(r"<<([^=]+)=(\d+)>>", answer):
            assert eval(expression) == int(value)  # expressions are digits and + - * / only


def test_recipe_digest_tracks_every_field() -> None:
    assert DEFAULT_RECIPE.digest() == Recipe().digest()
    assert Recipe(draft_steps=1).digest() != DEFAULT_RECIPE.digest()
    assert checkpoint_dir(Path("/c")) == Path("/c/reference") / DEFAULT_RECIPE.digest()


def fake_python(tmp_path: Path, *, fail: bool = False) -> tuple[str, Path]:
    """An executable standing in for the engine's python: counts builds, writes the layout."""
    counter = tmp_path / "builds.txt"
    script = tmp_path / "fake-python"
    body = "exit 1" if fail else (
        'out="$4"; for role in target draft; do mkdir -p "$out/$role"; '
        'echo {} > "$out/$role/config.json"; : > "$out/$role/model.safetensors"; done; '
        'sleep 0.3; echo {} > "$out/recipe.json"')
    script.write_text(f'#!/bin/sh\necho x >> "{counter}"\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), counter


@pytest.mark.skipif(sys.platform == "win32", reason="uses a shell script as the engine python")
def test_concurrent_builds_run_once(tmp_path: Path) -> None:
    python, counter = fake_python(tmp_path)
    out = tmp_path / "cache" / "abc"
    threads = [threading.Thread(target=build, args=(python, out)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert is_complete(out)
    assert counter.read_text().count("x") == 1
    build(python, out)
    assert counter.read_text().count("x") == 1  # cached: skipped
    build(python, out, force=True)
    assert counter.read_text().count("x") == 2


@pytest.mark.skipif(sys.platform == "win32", reason="uses a shell script as the engine python")
def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    python, _ = fake_python(tmp_path, fail=True)
    out = tmp_path / "cache" / "abc"
    with pytest.raises(EngineError, match="build failed"):
        build(python, out)
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith("abc.building")]


def test_missing_engine_python_is_an_engine_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="not found"):
        build(os.fspath(tmp_path / "no-python"), tmp_path / "out")


def test_flush_is_refused_while_requests_run() -> None:
    from reference_engine.engine import Engine
    from reference_engine.loading import Options

    engine = Engine(Options(target="t", draft="d"), 1, {})  # workers not started
    engine.rank_counters[0].add({"accepted_drafts": [3, 1]})  # SGLang: (3 + 1) + (1 + 1)
    engine.rank_in_flight[0] = 1
    assert engine.flush() is False
    assert engine.server_info()["internal_states"][0]["avg_spec_accept_length"] == 3.0
    engine.rank_in_flight[0] = 0
    assert engine.flush() is True
    assert "avg_spec_accept_length" not in engine.server_info()["internal_states"][0]


def test_each_dp_rank_has_its_own_state() -> None:
    """SGLang's /server_info lists one internal state per DP rank, each with its own
    counters; a flush resets them all."""
    from reference_engine.engine import Engine
    from reference_engine.loading import Options

    engine = Engine(Options(target="t", draft="d"), 1, {}, dp_size=2)
    engine.rank_counters[1].add({"accepted_drafts": [3, 1]})
    states = engine.server_info()["internal_states"]
    assert len(states) == 2 and "avg_spec_accept_length" not in states[0]
    assert states[1]["avg_spec_accept_length"] == 3.0
    assert engine.flush() is True
    assert all("avg_spec_accept_length" not in s for s in engine.server_info()[
        "internal_states"])


def test_a_flush_answers_for_the_first_rank_and_spares_a_busy_one() -> None:
    """SGLang: each rank's scheduler resets only when it runs nothing, and the route
    answers the first rank's result (tests/sglang_oracle pins it to SGLang's code)."""
    from reference_engine.engine import Engine
    from reference_engine.loading import Options

    engine = Engine(Options(target="t", draft="d"), 1, {}, dp_size=2)
    for counters in engine.rank_counters:
        counters.add({"accepted_drafts": [3, 1]})
    engine.rank_in_flight[1] = 1
    assert engine.flush() is True  # rank 0 idle: 200, though rank 1 kept its counters
    states = engine.server_info()["internal_states"]
    assert "avg_spec_accept_length" not in states[0]
    assert states[1]["avg_spec_accept_length"] == 3.0
    engine.rank_in_flight = [1, 0]
    engine.rank_counters[0].add({"accepted_drafts": [1]})
    assert engine.flush() is False  # rank 0 busy: refused, though rank 1 was reset
    states = engine.server_info()["internal_states"]
    assert states[0]["avg_spec_accept_length"] == 2.0
    assert "avg_spec_accept_length" not in states[1]


def test_meta_info_matches_sglang_formulas() -> None:
    result = {"output_ids": list(range(10)), "prompt_tokens": 7, "accepted_drafts": [3, 0, 2],
              "finish_reason": {"type": "stop", "matched": "Question"}}
    meta = meta_info(result, "r1", 0.5, block_size=8)
    assert meta["spec_verify_ct"] == 3
    assert meta["spec_accept_length"] == pytest.approx(10 / 3)
    assert meta["spec_num_correct_drafts"] == 5
    assert meta["spec_num_proposed_drafts"] == 21
    assert meta["spec_accept_rate"] == pytest.approx(5 / 21)
    assert meta["spec_correct_drafts_histogram"] == [1, 0, 1, 1]
    single = {"output_ids": [1], "prompt_tokens": 7, "accepted_drafts": [],
              "finish_reason": {"type": "length", "length": 1}}
    assert "spec_verify_ct" not in meta_info(single, "r2", 0.1, block_size=8)
    streaming = meta_info(result, "r1", 0.0, block_size=8, finished=False)
    assert streaming["finish_reason"] is None and "spec_verify_ct" not in streaming


@pytest.mark.parametrize(("params", "message"), [
    ({"top_p": 0}, "top_p"), ({"temperature": -1}, "temperature"), ({"top_k": 0}, "top_k"),
    ({"max_new_tokens": 0}, "max_new_tokens"), ({"max_tokens": 4}, "unknown sampling_params"),
    ({"stop": [1]}, "stop"), ({"n": 2}, "n > 1"), ({"temperature": "hot"}, "bad sampling"),
])
def test_bad_sampling_params_say_what(params: dict, message: str) -> None:
    with pytest.raises(BadRequest, match=message) as caught:
        parse_sampling(params)
    assert caught.value.status == 400 and str(caught.value)


def test_sampling_defaults_are_sglangs() -> None:
    sampling = parse_sampling(None)
    assert (sampling.max_new_tokens, sampling.temperature, sampling.top_p, sampling.top_k) == (
        128, 1.0, 1.0, 0)
    assert parse_sampling({"stop": "Q", "max_new_tokens": None}).stop == ["Q"]


def test_context_check_is_sglangs() -> None:
    assert check_context(10, 20, 4096) == 20
    assert check_context(10, None, 4096) == 4096 - 12
    with pytest.raises(BadRequest, match="requested a total of 6010 tokens: 10 tokens"):
        check_context(10, 6000, 4096)
    with pytest.raises(BadRequest, match=r"The input \(4096 tokens\) is longer"):
        check_context(4096, 1, 4096)


def test_streamed_text_holds_back_partial_stops() -> None:
    assert held_back("The answer is 4\n\nQues", ["Question"]) == "The answer is 4\n\n"
    assert held_back("caf\ufffd", []) == "caf"
    assert held_back("plain", ["Question"]) == "plain"


def test_recipe_overrides_change_the_digest() -> None:
    reduced = with_overrides(DEFAULT_RECIPE, REDUCED_OVERRIDES)
    assert reduced.digest() != DEFAULT_RECIPE.digest()
    assert reduced.chat_template == DEFAULT_RECIPE.chat_template
    with pytest.raises(ValueError, match="unknown recipe fields: nope"):
        with_overrides(DEFAULT_RECIPE, {"nope": 1})


def test_chat_template_renders_the_corpus_format() -> None:
    jinja2 = pytest.importorskip("jinja2")
    template = jinja2.Environment().from_string(DEFAULT_RECIPE.chat_template)
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is 2+2?"},
                {"role": "assistant", "content": "4"},
                {"role": "user", "content": " And 3+3? "}]
    text = template.render(messages=messages, add_generation_prompt=True)
    assert text == ("Be brief.\n\nQuestion: What is 2+2?\nAnswer: 4\n\n"
                    "Question: And 3+3?\nAnswer:")
    off = template.render(messages=messages[1:2], add_generation_prompt=True,
                          enable_thinking=False)
    assert off == "Question: What is 2+2?\nAnswer: <think>\n\n</think>\n\n"
