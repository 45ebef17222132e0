"""A prefixed context: `context_shots` GSM8K worked examples before a workload's first
turn, the prompt-length tiers of the workload grid (harness.suite.grid).

The examples are the first lines of GSM8K's train split in run_eval's form
(`Question: ...\\nAnswer: ...` and a blank line, `gsm8k.few_shot_prefix`), the same text a
GSM8K tier of `shots_from = "train"` puts before its questions, so a tier is one prefix
across every category. Every prompt of a tier shares it: with prefix caching on, the
engine restores it from its cache after the first request. The rows' hash covers the
train rows the prefix came from.
"""

from __future__ import annotations

import dataclasses

from harness.workloads import data as sources
from harness.workloads import gsm8k
from harness.workloads.items import Prompt


def context_prefix(shots: int) -> tuple[str, str]:
    """(the prefix text, the hash of the train rows it came from)."""
    train = gsm8k.load_train()
    return gsm8k.few_shot_prefix(train.rows, shots), train.sha256


def with_context(prompts: list[Prompt], sha256: str, shots: int) -> tuple[list[Prompt], str]:
    """The prompts with the prefixed context before their first turn, and the hash over
    both data sets; unchanged for 0 shots."""
    if shots == 0:
        return prompts, sha256
    prefix, train_sha256 = context_prefix(shots)
    combined = sources.canonical_sha256([{"rows": sha256, "context_train": train_sha256,
                                          "context_shots": shots}])
    return [dataclasses.replace(p, text=prefix + p.text) for p in prompts], combined


def describe(shots: int) -> str:
    return (f", after a prefixed context of {shots} GSM8K train worked example(s)"
            if shots else "")
