"""The workload kinds' protocols: which rows, which prompts, which categories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.suite.model import (
    HumanEvalWorkload,
    JsonlWorkload,
    SpecBenchWorkload,
    parse_suite,
)
from harness.workloads import prepare
from harness.workloads.humaneval import CHAT_WORDING, STOP_STRINGS

from .conftest import (
    HUMANEVAL_ROWS_SHA256,
    SPEC_BENCH,
    SPEC_BENCH_ROWS_SHA256,
    humaneval_file,
    jsonl_rows,
    needs,
)

TASKS = ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]


def _spec(**fields: object) -> SpecBenchWorkload:
    return SpecBenchWorkload(kind="spec_bench", data=str(needs(SPEC_BENCH)), **fields)


def test_spec_bench_all_480_by_task() -> None:
    plan = prepare(_spec())
    rows = jsonl_rows(SPEC_BENCH)
    assert plan.sha256 == SPEC_BENCH_ROWS_SHA256 and len(plan.prompts) == 480
    counts = {task: sum(p.category == task for p in plan.prompts) for task in TASKS}
    assert counts == dict.fromkeys(TASKS, 80)
    first = plan.prompts[0]  # MT-Bench question 81: writing, two turns
    assert (first.question_id, first.category, first.subcategory) == ("81", "mt_bench", "writing")
    assert first.turns == tuple(rows[0]["turns"]) and len(first.turns) == 2
    assert all(len(p.turns) == 1 for p in plan.prompts if p.category != "mt_bench")
    assert sum(len(p.turns) for p in plan.prompts) == 560  # 80 second turns
    assert plan.stop == () and not plan.graded and all(p.label is None for p in plan.prompts)
    assert [p.question_index for p in plan.prompts] == list(range(480))


def test_spec_bench_selection() -> None:
    plan = prepare(_spec(categories=["qa", "writing", "coding"], per_category=2, turns=1))
    assert [(p.category, p.subcategory) for p in plan.prompts] == [
        ("mt_bench", "writing"), ("mt_bench", "writing"), ("mt_bench", "coding"),
        ("mt_bench", "coding"), ("qa", None), ("qa", None)]
    assert all(len(p.turns) == 1 for p in plan.prompts)
    three = prepare(_spec(per_category=3))
    assert len(three.prompts) == 18
    assert sum(len(p.turns) for p in three.prompts) == 21


def test_spec_bench_schema_errors() -> None:
    with pytest.raises(ValueError, match="unknown Spec-Bench categories"):
        SpecBenchWorkload(kind="spec_bench", categories=["poetry"])
    with pytest.raises(ValueError, match="a second turn needs the chat template"):
        SpecBenchWorkload(kind="spec_bench", protocol="completion")
    assert SpecBenchWorkload(kind="spec_bench", protocol="completion", turns=1).turns == 1


def test_spec_bench_bad_row_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question_id": 1, "category": "qa", "turns": ["x"]}\n'
                    '{"question_id": 2, "category": "qa", "turns": []}\n')
    with pytest.raises(BadInput, match=r"q\.jsonl:2: not a Spec-Bench row \(turns must"):
        prepare(SpecBenchWorkload(kind="spec_bench", data=str(path)))
    path.write_text('{"question_id": "1", "category": "qa", "turns": ["x"]}\n')
    with pytest.raises(BadInput, match=r"q\.jsonl:1: not a Spec-Bench row \('question_id'"):
        prepare(SpecBenchWorkload(kind="spec_bench", data=str(path)))


def test_humaneval_completion_and_chat() -> None:
    source = humaneval_file()
    rows = jsonl_rows(source)
    completion = prepare(HumanEvalWorkload(kind="humaneval", data=str(source)))
    assert completion.sha256 == HUMANEVAL_ROWS_SHA256 and len(completion.prompts) == 164
    first = completion.prompts[0]
    assert first.text == rows[0]["prompt"] and first.question_id == "HumanEval/0"
    assert first.text.startswith("from typing import List\n\n\ndef has_close_elements(")
    assert completion.stop == STOP_STRINGS == ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
    chat = prepare(HumanEvalWorkload(kind="humaneval", protocol="chat", questions=3))
    assert chat.source == str(source)  # the installed package's own file, by default
    assert chat.stop == () and len(chat.prompts) == 3
    assert chat.prompts[2].text == CHAT_WORDING.format(prompt=rows[2]["prompt"])
    assert chat.prompts[2].text.startswith("Write a solution to the following problem")
    assert {p.category for p in chat.prompts} == {"humaneval"}


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_fields_categories_and_grading(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.jsonl", [
        {"q": "What is 2+2?", "kind": "math", "key": 7, "a": "#### 4"},
        {"q": ["Hello", "And again?"], "kind": "chat", "key": 8, "a": "none"},
        {"q": "What is 3+3?", "kind": "math", "key": 9, "a": "6"},
    ])
    workload = JsonlWorkload(kind="jsonl", data=str(path), prompt_field="q",
                             category_field="kind", id_field="key", answer_field="a",
                             protocol="chat", stop=["\n\n"])
    plan = prepare(workload)
    assert plan.graded and plan.stop == ("\n\n",)
    assert [(p.category, p.question_id, p.label, p.turns) for p in plan.prompts] == [
        ("math", "7", "4", ("What is 2+2?",)), ("chat", "8", "invalid", ("Hello", "And again?")),
        ("math", "9", "6", ("What is 3+3?",))]
    only = prepare(workload.model_copy(update={"categories": ["math"], "questions": 1}))
    assert [p.question_index for p in only.prompts] == [0]
    # the hash covers the declared fields only: other keys may change freely
    extra = _write(tmp_path / "extra.jsonl", [
        {**row, "note": "x"} for row in jsonl_rows(path)])
    assert prepare(workload.model_copy(update={"data": str(extra)})).sha256 == plan.sha256


def test_jsonl_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "mine.jsonl", [{"prompt": ["a", "b"]}])
    with pytest.raises(BadInput, match=r"mine\.jsonl:1: 2 turns need the chat template"):
        prepare(JsonlWorkload(kind="jsonl", data=str(path)))
    with pytest.raises(BadInput, match=r"mine\.jsonl:1: not a prompt row \(no field 'text'\)"):
        prepare(JsonlWorkload(kind="jsonl", data=str(path), prompt_field="text"))
    with pytest.raises(BadInput, match="asks for 5"):
        prepare(JsonlWorkload(kind="jsonl", data=str(path), protocol="chat", questions=5))
    with pytest.raises(ValueError, match="exactly one of `data`"):
        JsonlWorkload(kind="jsonl")


SUITE = """\
name = "kinds"
[engine]
kind = "reference"
[topology]
gpus = 0
[workload]
{workload}
[floors]
accept_length = 2.0
{floors}
"""


@pytest.mark.parametrize(("workload", "floors", "message"), [
    ('kind = "mmlu"', "", "workload: got kind 'mmlu'; allowed: gsm8k, spec_bench"),
    ('kind = "spec_bench"\ncategories = ["qa"]', "categories = { rag = { accept_length = 2 } }",
     "floors.categories: ['rag'] are not categories of this spec_bench workload"),
    ('kind = "gsm8k"\nchat_template_kwargs = { enable_thinking = false }', "",
     "only apply with protocol = \"chat\""),
    ('kind = "gsm8k"\ntop_k = 0', "", "top_k is -1 (no top-k) or at least 1"),
    ('kind = "humaneval"\nquestions = 165', "", "workload.questions: Input should be less"),
    ('kind = "gsm8k"', "categories = { gsm8k = {} }", "needs accept_length, accuracy or both"),
    ('kind = "gsm8k"', "positions = [1.5]", "floors.positions.0: Input should be less"),
])
def test_suite_errors_name_the_field(workload: str, floors: str, message: str) -> None:
    from harness.errors import SuiteError

    with pytest.raises(SuiteError) as caught:
        parse_suite(SUITE.format(workload=workload, floors=floors), "k.toml")
    assert message in caught.value.message, caught.value.message
    assert "Traceback" not in caught.value.message and "(got {" not in caught.value.message


def test_planned_questions() -> None:
    from harness.suite.model import GSM8KWorkload
    from harness.workloads import planned_questions

    assert planned_questions(GSM8KWorkload(questions=17)) == 17
    assert planned_questions(HumanEvalWorkload(kind="humaneval", questions=9)) == 9
    assert planned_questions(_spec(per_category=3)) == 18  # from the data
    assert planned_questions(_spec(categories=["rag"])) == 80
