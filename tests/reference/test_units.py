"""Fast checks of the reference engine's pure parts: corpus, recipe, cache, accounting."""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
from pathlib import Path

import pytest

from harness.engines.reference import corpus
from harness.engines.reference.checkpoints import build, checkpoint_dir, is_complete
from harness.engines.reference.recipe import DEFAULT_RECIPE, Recipe
from harness.errors import EngineError

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
    pytest.importorskip("torch")
    from harness.engines.reference.server import Engine

    engine = Engine(decoder=None, server_args={}, seed=0)  # type: ignore[arg-type]
    engine.counters.verify_steps, engine.counters.accept_tokens = 4, 10
    engine.in_flight = 1
    assert engine.flush() is False
    assert engine.server_info()["internal_states"][0]["avg_spec_accept_length"] == 2.5
    engine.in_flight = 0
    assert engine.flush() is True
    assert "avg_spec_accept_length" not in engine.server_info()["internal_states"][0]


def test_meta_info_matches_sglang_formulas() -> None:
    pytest.importorskip("torch")
    from harness.engines.reference.decoding import Generation
    from harness.engines.reference.server import meta_info

    generation = Generation(output_ids=list(range(10)), prompt_tokens=7,
                            finish_reason={"type": "stop", "matched": "Question"},
                            accepted_drafts=[3, 0, 2], produced=[4, 1, 3])
    meta = meta_info(generation, "r1", 0.5, block_size=8)
    assert meta["spec_verify_ct"] == 3
    assert meta["spec_accept_length"] == pytest.approx(10 / 3)
    assert meta["spec_num_correct_drafts"] == 5
    assert meta["spec_num_proposed_drafts"] == 21
    assert meta["spec_accept_rate"] == pytest.approx(5 / 21)
    assert meta["spec_correct_drafts_histogram"] == [1, 0, 1, 1]
    single = Generation(output_ids=[1], prompt_tokens=7,
                        finish_reason={"type": "length", "length": 1})
    assert "spec_verify_ct" not in meta_info(single, "r2", 0.1, block_size=8)
