"""What a workload sends: one `Prompt` per question, with its turns, category and label."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Prompt:
    """One question of a workload.

    `text` is the first turn: the whole prompt (completion protocol) or the first user
    message (chat protocol); `later_turns` are further user messages, each sent with
    the model's own earlier answers in the conversation (Spec-Bench's multi-turn rule).
    """

    question_index: int  # row of the data (0-based), the unit of sampling
    text: str
    label: str | None  # the graded answer; None: not graded
    category: str = "gsm8k"  # the category results are broken down by
    question_id: str | None = None  # the data set's own id, when it has one
    later_turns: tuple[str, ...] = ()
    subcategory: str | None = None  # e.g. MT-Bench's "writing" under Spec-Bench's mt_bench

    @property
    def turns(self) -> tuple[str, ...]:
        return (self.text, *self.later_turns)


def warmup_prompts(prompts: list[Prompt], count: int) -> list[Prompt]:
    # Warm-up reuses the first prompts; its traffic is flushed before measuring.
    return prompts[: min(count, len(prompts))]
