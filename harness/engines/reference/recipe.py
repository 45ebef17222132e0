"""The recipe of the tiny reference checkpoints: every number that shapes them.

Why a separate, torch-free module: the harness process hashes the recipe to find the
checkpoint cache folder without importing torch, and the build records the same values
in `recipe.json` beside the checkpoints. Change any value and the hash (so the cache
folder) changes, so a stale build is never reused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

# Bump when the training code changes in a way the numbers below do not capture.
RECIPE_VERSION = 3


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
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def digest(self) -> str:
        """Short, stable hash of the recipe: the cache folder name."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


DEFAULT_RECIPE = Recipe()
