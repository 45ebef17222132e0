"""The GSM8K workload, exactly as SGLang's `run_eval` gsm8k completion protocol.

Matches `sglang/test/simple_eval_mixed_prefix_gsm8k.py` (`GSM8KEval`) and the
completion sampler of `sglang/test/run_eval.py` in SGLang 0.5.23: the shots are
the first `shots` lines of GSM8K's test split with their full answers, each
`Question: ...\\nAnswer: ...` plus a blank line; the evaluated questions are the
lines after the shots; a prompt is the shots plus `Question: {q}\\nAnswer:`;
generation stops at `Question`, `Assistant:` or `<|separator|>`; the answer is
the last number in the output.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from harness.errors import BadInput
from harness.suite import GSM8KWorkload

STOP_STRINGS = ("Question", "Assistant:", "<|separator|>")
DATA_ENV = "HARNESS_DATA_DIR"
HF_DATASET = ("openai/gsm8k", "main", "test")
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
    sha256: str


@dataclass(frozen=True)
class Prompt:
    question_index: int
    text: str
    label: str


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
    return ast.literal_eval(predicted) == ast.literal_eval(label)


def default_data_paths() -> list[Path]:
    """Where a local GSM8K test.jsonl may lie: $HARNESS_DATA_DIR, then ../shared/data."""
    repo_root = Path(__file__).resolve().parent.parent
    candidates = []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]) / "gsm8k" / "test.jsonl")
    candidates.append(repo_root.parent / "shared" / "data" / "gsm8k" / "test.jsonl")
    return candidates


def _rows_from_jsonl(text: str, source: str) -> list[Question]:
    rows = []
    # Split on newlines only: JSON strings may hold U+2028 and friends unescaped.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            rows.append(Question(len(rows), str(item["question"]), str(item["answer"])))
        except (ValueError, KeyError, TypeError) as error:
            raise BadInput(f"{source}:{number}: not a GSM8K row ({error})") from None
    return rows


def _load_from_hub() -> GSM8KData:
    try:
        import datasets  # heavy and optional: only when no local copy exists
    except ImportError:
        raise BadInput(
            "no local GSM8K test.jsonl found (set the suite's workload.data or "
            f"${DATA_ENV}) and the `datasets` package is not installed"
        ) from None
    name, config, split = HF_DATASET
    try:
        dataset = datasets.load_dataset(name, config, split=split)
    except Exception as error:  # the hub raises many kinds; all mean "not available"
        raise BadInput(f"cannot load {name} ({config}/{split}) from the hub: {error}") from None
    lines = "".join(json.dumps({"question": r["question"], "answer": r["answer"]}) + "\n"
                    for r in dataset)
    rows = _rows_from_jsonl(lines, name)
    digest = hashlib.sha256(lines.encode()).hexdigest()
    return GSM8KData(rows, f"hf:{name}/{config}/{split}", digest)


def load_gsm8k(path: str | Path | None = None) -> GSM8KData:
    """GSM8K's test split from a local JSONL file, else from the `datasets` hub."""
    candidates = [Path(path)] if path else default_data_paths()
    for candidate in candidates:
        if candidate.is_file():
            raw = candidate.read_bytes()
            rows = _rows_from_jsonl(raw.decode("utf-8"), str(candidate))
            return GSM8KData(rows, str(candidate), hashlib.sha256(raw).hexdigest())
    if path:
        raise BadInput(f"workload.data: no such file {path}")
    return _load_from_hub()


def few_shot_prefix(rows: list[Question], shots: int) -> str:
    return "".join(f"Question: {q.question}\nAnswer: {q.answer}\n\n" for q in rows[:shots])


def build_prompts(data: GSM8KData, workload: GSM8KWorkload) -> list[Prompt]:
    """The evaluated prompts: lines `shots .. shots + questions` after the shot lines."""
    rows = data.rows
    needed = workload.shots + workload.questions
    if len(rows) < needed:
        raise BadInput(
            f"{data.source}: has {len(rows)} rows; the workload needs {needed} "
            f"({workload.shots} shots + {workload.questions} questions)"
        )
    prefix = few_shot_prefix(rows, workload.shots)
    return [
        Prompt(q.index, f"{prefix}Question: {q.question}\nAnswer:", q.label)
        for q in rows[workload.shots:needed]
    ]


def warmup_prompts(prompts: list[Prompt], count: int) -> list[Prompt]:
    # Warm-up reuses the first prompts; its traffic is flushed before measuring.
    return prompts[: min(count, len(prompts))]
