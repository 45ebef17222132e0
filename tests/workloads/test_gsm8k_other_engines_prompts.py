"""GSM8K as the other engines' tests send it: the boxed wording (vLLM's
reference-acceptance test, the DFlash authors' benchmark) and shots from the train split
(vLLM's tests/evals/gsm8k/gsm8k_eval.py `_build_gsm8k_prompts`, read at vllm-project/vllm
03e09605: `Question: {q}\\nAnswer: {a}\\n\\n` for each of the first train rows, then
`Question: {q}\\nAnswer:` for test rows 0..). The boxed wording and HumanEval's chat wording
are pinned to the DFlash package's own formatters (PyPI dflash 0.1.0, `benchmark.DATASETS`),
the same text vLLM's `load_and_process_dataset` builds."""

from __future__ import annotations

import json

import pytest
from dflash import benchmark
from pydantic import ValidationError

from harness import workloads
from harness.suite.model import GSM8KWorkload, HumanEvalWorkload
from harness.workloads import data as sources
from harness.workloads import gsm8k, humaneval


def test_boxed_wording_is_the_dflash_benchmarks() -> None:
    plan = workloads.prepare(GSM8KWorkload(questions=200, shots=0, wording="boxed",
                                           protocol="chat"))
    rows = gsm8k.load_gsm8k().rows
    assert [p.question_index for p in plan.prompts] == list(range(200))  # the first 200
    format_row = benchmark.DATASETS["gsm8k"]["format"]
    for prompt, row in zip(plan.prompts[:20], rows, strict=False):
        assert prompt.text == format_row({"question": row.question, "answer": row.answer})
    assert plan.stop == ()  # neither sends stop strings
    assert plan.prompts[0].label == rows[0].label  # still graded (last number)


def test_humaneval_chat_wording_is_the_dflash_benchmarks() -> None:
    workload = HumanEvalWorkload(kind="humaneval", protocol="chat", questions=3)
    dataset = humaneval.load(workload)
    prompts = humaneval.build_prompts(dataset, workload)
    format_row = benchmark.DATASETS["humaneval"]["format"]
    assert len(prompts) == 3
    for prompt, row in zip(prompts, dataset.rows, strict=False):
        assert prompt.text == format_row({"prompt": row["prompt"]})


def test_shots_from_train_are_vllms() -> None:
    plan = workloads.prepare(GSM8KWorkload(questions=1319, shots=5, shots_from="train"))
    train = [json.loads(line) for line in
             sources.local_candidates(gsm8k.TRAIN_FILE)[0].read_text().splitlines()[:5]]
    test = gsm8k.load_gsm8k().rows
    prefix = "".join(f"Question: {r['question']}\nAnswer: {r['answer']}\n\n" for r in train)
    assert len(plan.prompts) == 1319 and plan.prompts[0].question_index == 0
    assert plan.prompts[0].text == f"{prefix}Question: {test[0].question}\nAnswer:"
    assert plan.prompts[-1].text == f"{prefix}Question: {test[-1].question}\nAnswer:"
    assert plan.stop == gsm8k.STOP_STRINGS
    own = workloads.prepare(GSM8KWorkload(questions=10, shots=5))
    assert own.sha256 != workloads.prepare(GSM8KWorkload(questions=10, shots=5,
                                                         shots_from="train")).sha256


@pytest.mark.parametrize(("fields", "message"), [
    ({"wording": "boxed", "shots": 5}, "set shots = 0"),
    ({"shots": 5, "questions": 1319}, "need 1324"),
])
def test_impossible_gsm8k_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GSM8KWorkload(**fields)  # type: ignore[arg-type]
