"""The recipe of the tiny reference checkpoints: every number that shapes them.

Why a separate, torch-free module: the harness process hashes the recipe to find the
checkpoint cache folder without importing torch, and the build records the same values
in `recipe.json` beside the checkpoints. Change any value and the hash (so the cache
folder) changes, so a stale build is never reused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# Bump when the training code changes in a way the numbers below do not capture.
RECIPE_VERSION = 3

# The tokenizer's chat template (tokenizer_config.json `chat_template`, Jinja, as
# transformers' `apply_chat_template` and SGLang's /v1/chat/completions render it). The
# tiny target knows one format, the corpus's `Question: ...\nAnswer: ...`, so a user turn
# becomes a question and the assistant answers after `Answer:`; a system turn is a plain
# preamble. `enable_thinking=False` (a template kwarg, as for Qwen3) appends Qwen3's empty
# think block to the generation prompt: a prompt change that measurably moves acceptance.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}{{ message['content'] | trim }}{{ '\n\n' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ 'Question: ' }}{{ message['content'] | trim }}{{ '\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ 'Answer: ' }}{{ message['content'] | trim }}{{ '\n\n' }}"
    "{%- else -%}{{ raise_exception('unknown role: ' ~ message['role']) }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'Answer:' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}"
    "{{ ' <think>\n\n</think>\n\n' }}{%- endif -%}"
    "{%- endif -%}"
)


@dataclass(frozen=True)
class Recipe:
    """Seeds, sizes and schedules of the tiny target and draft."""

    version: int = RECIPE_VERSION
    seed: int = 20261129
    # corpus and tokenizer
    corpus_documents: int = 6000
    vocab_size: int = 1024
    # target: Qwen3 architecture
    target_layers: int = 4
    hidden_size: int = 128
    target_intermediate: int = 384
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    target_seq_len: int = 128
    target_batch: int = 16
    target_steps: int = 350
    target_lr: float = 3e-3
    # distillation data: the target's own greedy continuations
    distill_prompts: int = 384
    distill_new_tokens: int = 96
    # draft: shaped like z-lab/gemma-4-31B-it-DFlash in miniature (4 sliding + 1 full layer)
    draft_layer_types: tuple[str, ...] = (
        "sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention",
        "full_attention",
    )
    draft_intermediate: int = 384
    sliding_window: int = 16
    block_size: int = 8
    target_layer_ids: tuple[int, ...] = (0, 1, 2, 3)
    draft_batch: int = 16
    draft_anchors: int = 12
    draft_steps: int = 450
    draft_lr: float = 2e-3
    # DFlash's loss weight for block offset k is exp(-(k - 1) / gamma): early offsets count more
    draft_loss_gamma: float = 4.0
    chat_template: str = CHAT_TEMPLATE
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def digest(self) -> str:
        """Short, stable hash of the recipe: the cache folder name."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_RECIPE = Recipe()

# A recipe small enough to build twice in a test (seconds, not minutes): it exercises every
# stage of the full build, so two equal builds of it show the build is deterministic. Two
# steps per training stage are enough for the second to read the first's optimizer state
# and schedule; more steps, prompts or tokens only repeat the same code at test time.
REDUCED_OVERRIDES: dict[str, Any] = {
    "corpus_documents": 200, "target_steps": 2, "target_batch": 2, "distill_prompts": 4,
    "distill_new_tokens": 8, "draft_steps": 2, "draft_batch": 2, "draft_anchors": 2,
}


def with_overrides(recipe: Recipe, overrides: dict[str, Any]) -> Recipe:
    """`recipe` with some fields replaced (lists become tuples); unknown names are errors."""
    known = set(recipe.to_json())
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown recipe fields: {', '.join(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return replace(recipe, **values)
