"""The Spec-Bench workload: its 480 prompts, by category, multi-turn as Spec-Bench runs them.

Spec-Bench (hemingkx/Spec-Bench, `data/spec_bench/question.jsonl`, Apache-2.0) holds
MT-Bench's 80 two-turn questions (categories writing, roleplay, reasoning, math, coding,
extraction, stem, humanities) and 80 each of translation, summarization, qa,
math_reasoning and rag. Spec-Bench reports six tasks (`evaluation/speed.py`): the eight
MT-Bench categories together are `mt_bench`. Here every request's category is its task
and, for MT-Bench questions, its subcategory the MT-Bench category; a suite selects
either (`categories`), optionally the first N of each (`per_category`, file order).

Multi-turn (`evaluation/eval.py`, `get_model_answers`): for each turn the user message is
appended, the model answers, and its answer (decoded, stripped) is appended as the
assistant message before the next turn; every turn is a measured request. Spec-Bench
renders each model's conversation template; this harness sends the conversation to the
target's own chat template (`protocol = "chat"`, the default). Defaults follow Spec-Bench:
greedy, at most 1,024 new tokens. Not graded.

Data: `spec_bench/question.jsonl` from `workload.data`, `$HARNESS_DATA_DIR` or
`../shared/data`, else the same file from GitHub read through `datasets` ("json"
builder, cached in the Hugging Face cache). The hash is over `question_id`, `category`
and `turns` of each row, the fields the protocol reads.
"""

from __future__ import annotations

from harness.errors import BadInput
from harness.suite.entries import MT_BENCH_CATEGORIES, SPEC_BENCH_TASKS, SpecBenchWorkload
from harness.workloads import data as sources
from harness.workloads.items import Prompt

DATA_FILE = "spec_bench/question.jsonl"
REPO_PATH = "data/spec_bench/question.jsonl"
SOURCE_URL = f"https://raw.githubusercontent.com/hemingkx/Spec-Bench/main/{REPO_PATH}"
HUB = sources.HubRef("hemingkx/Spec-Bench", split="test", url=SOURCE_URL, path=REPO_PATH)


def task_of(category: str) -> str:
    return "mt_bench" if category in MT_BENCH_CATEGORIES else category


def _canonical(source: str, items: list[tuple[int, dict[str, object]]]
               ) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for number, item in items:
        question_id = sources.field(item, "question_id", source, number, "Spec-Bench", (int,))
        category = sources.field(item, "category", source, number, "Spec-Bench")
        turns = sources.field(item, "turns", source, number, "Spec-Bench", (list,))
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t
                                                                for t in turns):
            raise BadInput(f"{source}:{number}: not a Spec-Bench row (turns must be a "
                           "non-empty list of non-empty strings)")
        rows.append({"question_id": question_id, "category": category, "turns": list(turns)})
    return rows


def load(workload: SpecBenchWorkload) -> sources.Dataset:
    return sources.load(DATA_FILE, workload.data, HUB, "Spec-Bench", _canonical)


def build_prompts(dataset: sources.Dataset, workload: SpecBenchWorkload) -> list[Prompt]:
    chosen = set(workload.categories)
    counts: dict[str, int] = {}
    prompts = []
    for index, row in enumerate(dataset.rows):
        raw = sources.text_of(row, "category")
        task = task_of(raw)
        if chosen and raw not in chosen and task not in chosen:
            continue
        key = raw if raw in chosen else task
        if workload.per_category is not None and counts.get(key, 0) >= workload.per_category:
            continue
        counts[key] = counts.get(key, 0) + 1
        turns = sources.texts_of(row, "turns")[: workload.turns]
        prompts.append(Prompt(index, turns[0], None, task, str(row["question_id"]),
                              tuple(turns[1:]), raw if raw != task else None))
    missing = sorted((chosen or set(SPEC_BENCH_TASKS)) - {p.category for p in prompts}
                     - {p.subcategory for p in prompts})
    if missing:
        raise BadInput(f"{dataset.source}: no Spec-Bench rows of categories {missing}")
    return prompts


def describe(workload: SpecBenchWorkload) -> str:
    which = ", ".join(workload.categories) or "all six tasks"
    count = (f"first {workload.per_category} of each" if workload.per_category
             else "every question")
    return (f"Spec-Bench: {which}, {count}, up to {workload.turns} turn(s) per question "
            "(later turns sent with the model's own answers), not graded")
