"""The `jsonl` workload: a user's own prompts, with the field names the suite declares.

Rows come from a JSON-lines file (`data`) or a Hugging Face data set (`hub = { id,
config, split, revision }`, through `datasets`). Per row: `prompt_field` holds the prompt
(a string) or the turns of a conversation (a list of strings; later turns are sent with
the model's own earlier answers, as for Spec-Bench, and need `protocol = "chat"`);
`category_field` (optional) the category results are broken down by (default: every
request is "jsonl"); `id_field` (optional) the row's own id; `answer_field` (optional) an
answer, graded by GSM8K's rule (the last number in the output equals the answer's last
number). `categories` keeps rows of those categories, `questions` the first N kept rows,
in file order. Generation stops at `stop`. The hash is over the declared fields only.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.errors import BadInput
from harness.suite.entries import JsonlWorkload
from harness.workloads import data as sources
from harness.workloads.gsm8k import extract_label
from harness.workloads.items import Prompt

CATEGORY = "jsonl"


Canonical = Callable[[str, list[tuple[int, dict[str, object]]]], list[dict[str, object]]]


def _canonical_for(workload: JsonlWorkload) -> Canonical:
    def canonical(source: str, items: list[tuple[int, dict[str, object]]]
                  ) -> list[dict[str, object]]:
        rows = []
        for number, item in items:
            prompt = sources.field(item, workload.prompt_field, source, number, "prompt",
                                   (str, list))
            turns = [prompt] if isinstance(prompt, str) else (  # field: str or list
                prompt if isinstance(prompt, list) else [])
            if not turns or not all(isinstance(t, str) and t for t in turns):
                raise BadInput(f"{source}:{number}: {workload.prompt_field!r} must be a "
                               "non-empty string or a non-empty list of non-empty strings")
            if len(turns) > 1 and workload.protocol != "chat":
                raise BadInput(f"{source}:{number}: {len(turns)} turns need the chat template "
                               "(protocol = \"chat\")")
            row: dict[str, object] = {"prompt": prompt}
            for key, name in (("category", workload.category_field), ("id", workload.id_field),
                              ("answer", workload.answer_field)):
                if name is not None:
                    value = sources.field(item, name, source, number, "prompt", (str, int, float))
                    row[key] = str(value)
            rows.append(row)
        return rows

    return canonical


def load(workload: JsonlWorkload) -> sources.Dataset:
    hub = None
    if workload.hub is not None:
        hub = sources.HubRef(workload.hub.id, workload.hub.config, workload.hub.split,
                             workload.hub.revision)
    if workload.data is None and hub is not None:
        rows = _canonical_for(workload)(hub.describe(),
                                        list(enumerate(sources.load_hub(hub), start=1)))
        return sources.Dataset(rows, hub.describe(), sources.canonical_sha256(rows))
    return sources.load("", workload.data, None, "prompt", _canonical_for(workload))


def build_prompts(dataset: sources.Dataset, workload: JsonlWorkload) -> list[Prompt]:
    chosen = set(workload.categories)
    prompts = []
    for index, row in enumerate(dataset.rows):
        category = sources.text_of(row, "category") if "category" in row else CATEGORY
        if chosen and category not in chosen:
            continue
        turns = sources.texts_of(row, "prompt")
        label = extract_label(sources.text_of(row, "answer")) if "answer" in row else None
        question_id = sources.text_of(row, "id") if "id" in row else None
        prompts.append(Prompt(index, turns[0], label, category, question_id, tuple(turns[1:])))
        if workload.questions is not None and len(prompts) == workload.questions:
            break
    if not prompts:
        raise BadInput(f"{dataset.source}: no row is selected (categories "
                       f"{sorted(chosen) or 'any'})")
    if workload.questions is not None and len(prompts) < workload.questions:
        raise BadInput(f"{dataset.source}: {len(prompts)} rows are selected; the workload "
                       f"asks for {workload.questions}")
    return prompts


def describe(workload: JsonlWorkload) -> str:
    source = workload.data or (workload.hub.id if workload.hub else "?")
    graded = (f"graded against {workload.answer_field!r} (last number)"
              if workload.answer_field else "not graded")
    return (f"prompts from {source} (field {workload.prompt_field!r}"
            + (f", categories from {workload.category_field!r}" if workload.category_field
               else "") + f"), {graded}")
