"""The chat protocol: messages through the target's template on SGLang's chat route, the
model's own answers in later turns, sampling declared in full, and per-request figures."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.engines.sglang import ADAPTER
from harness.engines.sglang.api import chat_body, parse_chat
from harness.errors import MissingMetric
from harness.run.drive import TURN_SEED_STRIDE, Driver, Endpoint, first_turn
from harness.suite.model import SpecBenchWorkload
from harness.workloads import Prompt

from . import sglang_like

PROMPTS = [
    Prompt(0, "Write a poem.", None, "mt_bench", "81", ("Now shorter.",), "writing"),
    Prompt(1, "Translate: Hallo", None, "translation", "161"),
    Prompt(2, "Summarise this.", None, "summarization", "241"),
]


def _drive(workload: Any, prompts: list[Prompt]) -> tuple[Any, list[tuple[str, dict]]]:
    server = sglang_like.start()
    try:
        endpoint = Endpoint(f"http://127.0.0.1:{server.server_address[1]}", ADAPTER)
        result = asyncio.run(Driver(endpoint, workload).measure(prompts))
        return result, list(server.requests)
    finally:
        server.shutdown()


def test_turns_carry_the_models_own_answers() -> None:
    workload = SpecBenchWorkload(kind="spec_bench", concurrency=2, max_tokens=77,
                                 chat_template_kwargs={"enable_thinking": False},
                                 system_prompt="Be brief.")
    result, requests = _drive(workload, PROMPTS)
    assert {path for path, _ in requests} == {"/v1/chat/completions"}
    by_rid = {body["rid"]: body for _, body in requests}
    assert set(by_rid) == {"q0", "q0-t1", "q1", "q2"}
    first, second = by_rid["q0"], by_rid["q0-t1"]
    system = {"role": "system", "content": "Be brief."}
    assert first["messages"] == [system, {"role": "user", "content": "Write a poem."}]
    rendered = sglang_like.render(first["messages"], {"enable_thinking": False})
    answer = sglang_like.answer_for(rendered)
    assert second["messages"] == [  # Spec-Bench: the answer, stripped, then the next turn
        system, {"role": "user", "content": "Write a poem."},
        {"role": "assistant", "content": answer.strip()},
        {"role": "user", "content": "Now shorter."}]
    for body in by_rid.values():
        # every sampling field sent: the model's generation_config never fills one in
        assert {k: body[k] for k in ("temperature", "top_p", "top_k", "min_p",
                                     "repetition_penalty", "max_completion_tokens")} == {
            "temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
            "repetition_penalty": 1.0, "max_completion_tokens": 77}
        assert body["return_meta_info"] is True and body["stream"] is False
        assert body["chat_template_kwargs"] == {"enable_thinking": False}
        assert "seed" not in body and "stop" not in body  # greedy; Spec-Bench has no stop
    rows = result.rows
    assert [(r.index, r.question_index, r.turn, r.category) for r in rows] == [
        (0, 0, 0, "mt_bench"), (1, 0, 1, "mt_bench"), (2, 1, 0, "translation"),
        (3, 2, 0, "summarization")]
    assert rows[0].subcategory == "writing" and rows[0].question_id == "81"
    assert rows[0].output == answer and rows[0].correct is None
    meta = sglang_like.meta_for(answer, "q0")
    assert (rows[0].completion_tokens, rows[0].verify_steps, rows[0].correct_drafts,
            rows[0].accept_histogram) == (meta["completion_tokens"], meta["spec_verify_ct"],
                                          meta["spec_num_correct_drafts"],
                                          meta["spec_correct_drafts_histogram"])
    ids = json.dumps(sglang_like.ids_of(rendered), separators=(",", ":"))
    assert rows[0].prompt_sha256 == hashlib.sha256(ids.encode()).hexdigest()
    assert result.planned == 4 and not result.stopped_early


def test_sampled_turns_have_their_own_seeds() -> None:
    workload = SpecBenchWorkload(kind="spec_bench", temperature=0.6, top_p=0.95, top_k=20,
                                 sampling_seed=100)
    _, requests = _drive(workload, PROMPTS[:2])
    seeds = {body["rid"]: body["seed"] for _, body in requests}
    assert seeds == {"q0": 100, "q0-t1": 100 + TURN_SEED_STRIDE, "q1": 101}
    assert {body["top_k"] for _, body in requests} == {20}


def test_completion_protocol_sends_the_text_to_generate() -> None:
    workload = SpecBenchWorkload(kind="spec_bench", protocol="completion", turns=1)
    result, requests = _drive(workload, PROMPTS[1:])
    assert [path for path, _ in requests] == ["/generate", "/generate"]
    assert sorted(body["text"] for _, body in requests) == ["Summarise this.",
                                                            "Translate: Hallo"]
    assert all("stop" not in body["sampling_params"] for _, body in requests)
    assert first_turn(workload, PROMPTS[1]) == "Translate: Hallo"
    assert [r.category for r in result.rows] == ["translation", "summarization"]
    assert result.rows[0].prompt_sha256 is None  # /generate returns no prompt ids


def test_parse_chat_needs_meta_info() -> None:
    payload = {"choices": [{"index": 0, "message": {"content": "hi"}}]}
    with pytest.raises(MissingMetric, match="no meta_info"):
        parse_chat(payload)
    with pytest.raises(MissingMetric, match="expected one choice"):
        parse_chat({"choices": []})
    meta = sglang_like.meta_for("a b c d e f", "r")
    parsed = parse_chat({"choices": [{"message": {"content": None}, "meta_info": meta,
                                      "prompt_token_ids": "nope"}]})
    assert parsed.text == "" and parsed.prompt_sha256 is None
    assert parsed.verify_steps == meta["spec_verify_ct"]


def _wheel(version: str) -> Path:
    folder = Path(os.environ.get("HARNESS_SGLANG_WHEELS",
                                 Path(__file__).resolve().parents[2] / ".cache" / "sglang-wheels"))
    found = sorted(folder.glob(f"sglang-{version}-*.whl"))
    if not found:
        pytest.skip(f"sglang {version} wheel not in {folder} (set HARNESS_SGLANG_WHEELS)")
    return found[0]


def _fields(wheel: Path, cls: str) -> set[str]:
    """The fields of a request class in the wheel's entrypoints/openai/protocol.py (its
    annotated class attributes and those of its bases in the same file)."""
    with zipfile.ZipFile(wheel) as archive:
        tree = ast.parse(archive.read("sglang/srt/entrypoints/openai/protocol.py"))
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    fields: set[str] = set()
    todo = [cls]
    while todo:
        node = classes.get(todo.pop())
        if node is None:
            continue
        fields |= {item.target.id for item in node.body
                   if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
        todo += [base.id for base in node.bases if isinstance(base, ast.Name)]
    return fields


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_every_chat_field_exists_in_sglang(version: str) -> None:
    body = chat_body([{"role": "user", "content": "x"}],
                     {"max_new_tokens": 5, "temperature": 0.6, "top_p": 0.9, "top_k": 3,
                      "stop": ["\n"], "sampling_seed": 4}, "rid", {"enable_thinking": False})
    fields = _fields(_wheel(version), "ChatCompletionRequest")
    assert set(body) <= fields, set(body) - fields
