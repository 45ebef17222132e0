"""Workloads: which prompts a suite sends, how they are sent, how answers are graded.

One module per kind, each holding its whole protocol (docs/workloads.md):
- `gsm8k`: SGLang's run_eval GSM8K protocol (few-shot, graded by the last number);
- `spec_bench`: Spec-Bench's 480 prompts by category, multi-turn;
- `humaneval`: HumanEval's 164 problems, completion of the function body;
- `jsonl`: a user's own prompts, field names declared in the suite.
`data` finds the rows (local file, `../shared/data`, else `datasets`) and hashes them;
`items.Prompt` is what every kind produces. The protocol a request is sent with
(`completion`: the text to SGLang's /generate; `chat`: messages through the target's
chat template) and the sampling settings are the workload's request fields
(`harness.suite.entries`); the routes and bodies are the engine adapter's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.workloads import context, gsm8k, humaneval, jsonl, spec_bench
from harness.workloads import data as sources
from harness.workloads.gsm8k import grade as by_last_number
from harness.workloads.items import Prompt, warmup_prompts

if TYPE_CHECKING:
    from harness.suite.entries import Workload  # a suite's workload, or one of its entries

__all__ = ["Prompt", "WorkloadPlan", "describe", "grade", "planned_questions", "prepare",
           "warmup_prompts"]


@dataclass(frozen=True)
class WorkloadPlan:
    """A workload made concrete: its prompts, where its rows came from, how it stops."""

    prompts: list[Prompt]
    source: str
    sha256: str  # canonical rows (harness.workloads.data)
    file_sha256: str | None
    stop: tuple[str, ...]
    graded: bool


def prepare(workload: Workload) -> WorkloadPlan:
    """Load the workload's rows and build its prompts (BadInput on bad or missing data)."""
    if workload.kind == "gsm8k":
        data = gsm8k.load_gsm8k(workload.data)
        train = gsm8k.load_train() if workload.shots_from == "train" and workload.shots else None
        sha256 = data.sha256 if train is None else sources.canonical_sha256(
            [{"test": data.sha256, "train": train.sha256}])
        return WorkloadPlan(gsm8k.build_prompts(data, workload, train), data.source, sha256,
                            data.file_sha256, gsm8k.stop_strings(workload), True)
    if workload.kind == "spec_bench":
        dataset = spec_bench.load(workload)
        prompts, sha256 = context.with_context(spec_bench.build_prompts(dataset, workload),
                                               dataset.sha256, workload.context_shots)
        return WorkloadPlan(prompts, dataset.source, sha256, dataset.file_sha256, (), False)
    if workload.kind == "humaneval":
        dataset = humaneval.load(workload)
        prompts, sha256 = context.with_context(humaneval.build_prompts(dataset, workload),
                                               dataset.sha256, workload.context_shots)
        return WorkloadPlan(prompts, dataset.source, sha256, dataset.file_sha256,
                            humaneval.stop_strings(workload), False)
    if workload.kind == "jsonl":
        dataset = jsonl.load(workload)
        return WorkloadPlan(jsonl.build_prompts(dataset, workload), dataset.source,
                            dataset.sha256, dataset.file_sha256, tuple(workload.stop),
                            workload.answer_field is not None)
    raise ValueError(f"no workload kind {workload.kind!r}")


def grade(prompt: Prompt, text: str) -> tuple[str | None, bool | None]:
    """(predicted answer, correct) by the GSM8K rule when the prompt has a label, else
    (None, None): only gsm8k and jsonl rows with an answer are graded."""
    return by_last_number(prompt, text)


def describe(workload: Workload) -> str:
    """One line: which prompts and how they are graded."""
    module = {"gsm8k": gsm8k, "spec_bench": spec_bench, "humaneval": humaneval,
              "jsonl": jsonl}[workload.kind]
    line: str = module.describe(workload)
    return line + context.describe(getattr(workload, "context_shots", 0))


def planned_questions(workload: Workload) -> int:
    """How many questions a run of the workload asks (the sample size of its figure);
    read from the suite where it says, else from the data (a Spec-Bench selection)."""
    if workload.kind in ("gsm8k", "humaneval"):
        return int(workload.questions)
    if workload.kind == "jsonl" and workload.questions is not None:
        return int(workload.questions)
    return len(prepare(workload).prompts)
