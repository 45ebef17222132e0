"""The GSM8K workload, exactly as SGLang's `run_eval` gsm8k completion protocol.

Matches `sglang/test/simple_eval_mixed_prefix_gsm8k.py` (`GSM8KEval`) and the
completion sampler of `sglang/test/run_eval.py` in SGLang 0.5.23: the shots are
the first `shots` lines of GSM8K's test split with their full answers, each
`Question: ...\\nAnswer: ...` plus a blank line; the evaluated questions are the
lines after the shots; a prompt is the shots plus `Question: {q}\\nAnswer:`;
generation stops at `Question`, `Assistant:` or `<|separator|>`; the answer is
the last number in the output. With `protocol = "chat"` the same prompt text is the
one user message (as run_eval's `--api chat` sends it), rendered by the target's
chat template. Every request's category is "gsm8k".

Two settings give the other engines' GSM8K prompts from the same rows:
- `shots_from = "train"`: vLLM's `tests/evals/gsm8k/gsm8k_eval.py` (`_build_gsm8k_prompts`,
  read at vllm-project/vllm 03e09605): the shots are the first lines of the *train* split,
  in the same `Question: ...\nAnswer: ...` form, and the questions are test lines 0..;
- `wording = "boxed"`: `"{question}\nPlease reason step by step, and put your final answer
  within \\boxed{}."`, no shots, no stop strings: vLLM's reference-acceptance test
  (`tests/v1/e2e/spec_decode/acceptance_rates/utils.py`, `load_and_process_dataset`) and
  the DFlash authors' benchmark (PyPI `dflash` 0.1.0, `dflash/benchmark.py`), sent through
  the chat template (`protocol = "chat"`).

Data: `gsm8k/test.jsonl` (`{"question", "answer"}` per line) from `workload.data`,
`$HARNESS_DATA_DIR` or `../shared/data`, else the hub's `openai/gsm8k` (config
`main`, split `test`) through `datasets`; the same rows give the same hash
(harness.workloads.data).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.suite.entries import GSM8KWorkload
from harness.workloads import data as sources
from harness.workloads.items import Prompt

STOP_STRINGS = ("Question", "Assistant:", "<|separator|>")
DATA_ENV = sources.DATA_ENV
DATA_FILE = "gsm8k/test.jsonl"
TRAIN_FILE = "gsm8k/train.jsonl"
HF_DATASET = ("openai/gsm8k", "main", "test")
HUB = sources.HubRef(*HF_DATASET)
TRAIN_HUB = sources.HubRef("openai/gsm8k", "main", "train")
BOXED = "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}."
CATEGORY = "gsm8k"
# `simple_eval_mixed_prefix_gsm8k.py`: commas removed, then the last match of this
# pattern, read as a Python literal; anything unreadable is invalid.
_NUMBER = re.compile(r"-?\d+\.?\d*")


@dataclass(frozen=True)
class Question:
    index: int  # line of test.jsonl (0-based)
    question: str
    answer: str  # full GSM8K answer text, ending `#### N`

    @property
    def label(self) -> str:
        return extract_label(self.answer)


@dataclass(frozen=True)
class GSM8KData:
    rows: list[Question]
    source: str
    sha256: str  # of the canonical rows: the same from test.jsonl and from the hub
    file_sha256: str | None = None  # of the local file's bytes, when one was read


def extract_answer(text: str) -> str | None:
    """The last number in a text, as SGLang's GSM8K eval reads it; None when invalid.

    Used for both the model's output and the label (the full GSM8K answer,
    whose last number is the `#### N` value). `18.` reads as 18.0; `007` is invalid.
    """
    numbers = _NUMBER.findall(text.replace(",", ""))
    if not numbers:
        return None
    try:
        value = ast.literal_eval(numbers[-1])
    except (SyntaxError, ValueError):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # hundreds of digits read as inf: graded wrong, never a crash
    return repr(value)


def extract_label(answer: str) -> str:
    label = extract_answer(answer)
    return label if label is not None else "invalid"


def is_correct(predicted: str | None, label: str) -> bool:
    """SGLang compares the two parsed literals with `==` (so 18.0 equals 18)."""
    if predicted is None or label == "invalid":
        return False
    return bool(ast.literal_eval(predicted) == ast.literal_eval(label))


def grade(prompt: Prompt, text: str) -> tuple[str | None, bool | None]:
    if prompt.label is None:
        return None, None
    predicted = extract_answer(text)
    return predicted, is_correct(predicted, prompt.label)


def default_data_paths() -> list[Path]:
    """Where a local GSM8K test.jsonl may lie: $HARNESS_DATA_DIR, then ../shared/data."""
    return sources.local_candidates(DATA_FILE)


def _canonical(source: str, items: list[tuple[int, dict[str, object]]]
               ) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for number, item in items:
        try:
            rows.append({"question": str(item["question"]), "answer": str(item["answer"])})
        except KeyError as error:
            raise BadInput(f"{source}:{number}: not a GSM8K row (no field {error})") from None
    return rows


def load_gsm8k(path: str | Path | None = None) -> GSM8KData:
    """GSM8K's test split from a local JSONL file, else from the hub through `datasets`."""
    dataset = sources.load(DATA_FILE, str(path) if path else None, HUB, "GSM8K", _canonical)
    rows = [Question(i, sources.text_of(row, "question"), sources.text_of(row, "answer"))
            for i, row in enumerate(dataset.rows)]
    return GSM8KData(rows, dataset.source, dataset.sha256, dataset.file_sha256)


def load_train() -> GSM8KData:
    """GSM8K's train split (the shots of `shots_from = "train"`): `gsm8k/train.jsonl` under
    $HARNESS_DATA_DIR or ../shared/data, else the hub's `openai/gsm8k` main train."""
    dataset = sources.load(TRAIN_FILE, None, TRAIN_HUB, "GSM8K train", _canonical)
    rows = [Question(i, sources.text_of(row, "question"), sources.text_of(row, "answer"))
            for i, row in enumerate(dataset.rows)]
    return GSM8KData(rows, dataset.source, dataset.sha256, dataset.file_sha256)


def stop_strings(workload: GSM8KWorkload) -> tuple[str, ...]:
    """run_eval's stops; none for the boxed wording (vLLM's test and the DFlash benchmark
    send none)."""
    return () if workload.wording == "boxed" else STOP_STRINGS


def few_shot_prefix(rows: list[Question], shots: int) -> str:
    return "".join(f"Question: {q.question}\nAnswer: {q.answer}\n\n" for q in rows[:shots])


def build_prompts(data: GSM8KData, workload: GSM8KWorkload,
                  train: GSM8KData | None = None) -> list[Prompt]:
    """The evaluated prompts: lines `shots .. shots + questions` after the shot lines, or
    lines `0 .. questions` with the shots from `train` (`shots_from = "train"`) or none."""
    rows = data.rows
    if workload.wording == "boxed":
        return [Prompt(q.index, BOXED.format(question=q.question), q.label, CATEGORY)
                for q in rows[:workload.questions]]
    if workload.shots_from == "train":
        if train is None and workload.shots:
            raise ValueError("shots_from = \"train\" needs GSM8K's train split")
        if len(rows) < workload.questions:
            raise BadInput(f"{data.source}: has {len(rows)} rows; the workload needs "
                           f"{workload.questions} questions")
        prefix = few_shot_prefix(train.rows, workload.shots) if train is not None else ""
        return [Prompt(q.index, f"{prefix}Question: {q.question}\nAnswer:", q.label, CATEGORY)
                for q in rows[:workload.questions]]
    needed = workload.shots + workload.questions
    if len(rows) < needed:
        raise BadInput(
            f"{data.source}: has {len(rows)} rows; the workload needs {needed} "
            f"({workload.shots} shots + {workload.questions} questions)"
        )
    prefix = few_shot_prefix(rows, workload.shots)
    return [
        Prompt(q.index, f"{prefix}Question: {q.question}\nAnswer:", q.label, CATEGORY)
        for q in rows[workload.shots:needed]
    ]


def describe(workload: GSM8KWorkload) -> str:
    if workload.wording == "boxed":
        return (f"GSM8K boxed wording (\"Please reason step by step\"), no shots, questions "
                f"0..{workload.questions - 1} of test.jsonl, graded (last number)")
    if workload.shots_from == "train":
        return (f"GSM8K vLLM gsm8k_eval protocol: {workload.shots} shots from train.jsonl, "
                f"questions 0..{workload.questions - 1} of test.jsonl, graded (last number)")
    return (f"GSM8K run_eval protocol: {workload.shots} shots, questions {workload.shots}.."
            f"{workload.shots + workload.questions - 1} of test.jsonl, graded (last number)")
