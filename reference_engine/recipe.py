"""The recipes of the reference engine's checkpoints: every number that shapes them, for
the tiny pair (`Recipe`, `tiny/`) and for the seed's own pairs in miniature (`SeedRecipe`,
`seed/<pair>/`).

Why a separate, torch-free module: the harness process hashes a recipe to find the
checkpoint cache folder without importing torch, and the build records the same values
in `recipe.json` beside the checkpoints. Change any value and the hash (so the cache
folder) changes, so a stale build is never reused. Both kinds hash, and take overrides,
the same way (`Hashed`, `with_overrides`); their fields, so their hashes, are their own.

The seed pairs. The seed's regression struck `google/gemma-4-31B-it` with
`z-lab/gemma-4-31B-it-DFlash`, and its fix had to keep Muse Glimmer's DFlash assistant
bidirectional. SGLang 0.5.23 ships both architectures as code (`models/gemma4_mm.py` +
`gemma4_causal.py`, `models/muse_glimmer.py`, `configs/muse_glimmer.py`, and
`models/dflash.py` for both drafts), so the project trains a miniature of each pair and
serves it through that code.

Each miniature keeps what shapes the code path its real config takes, at a size CI can
train on two cores in minutes and ship (a few MB, bfloat16 like the real weights):

- gemma-4 target (`Gemma4ForConditionalGeneration`, `model_type` gemma4 with a
  `text_config`): the real one's period of five sliding layers then a full one, its
  per-type attention shapes (`head_dim` for sliding layers, `global_head_dim` and
  `num_global_key_value_heads` for full ones), `attention_k_eq_v` (the full layers have no
  `v_proj`: K is V), proportional partial RoPE on full layers, final logit softcapping,
  the embedding scale (sqrt(hidden), built into the architecture), tied embeddings, no
  per-layer inputs and no KV sharing (`num_kv_shared_layers` 0, as the 31B declares), and
  a one-layer vision tower (the class builds one; text requests never run it).
- its DFlash draft (`DFlashDraftModel`, `model_type` qwen3): 4 `sliding_attention` + 1
  `full_attention` layers, `is_causal` undeclared (the case that regressed), block 16,
  reading target layers below the last, `final_logit_softcapping` stated for the head it
  borrows.
- Muse Glimmer target (`MuseGlimmerForCausalLM`, `model_type` muse_glimmer, its text
  config as `MuseGlimmerConfig` reads it): sliding and full layers (RoPE on sliding ones
  only), QK norm, the attention output gate, the normalised token embedding, norms stored
  as offsets from 1, the output multiplier and softcap, untied head.
- its assistant (`MuseGlimmerAssistantModel`, `model_type` muse_glimmer_assistant, so
  SGLang builds `MuseGlimmerAssistantConfig`: `is_causal = False` as a class attribute,
  `vocab_size = None`): five sliding layers, no head, `encoder.fc` /
  `encoder.output_norm_enc` named as the native export names them; trained on the block
  the suite serves (5), declaring the real block size (16).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import Field, asdict, dataclass, field, replace
from typing import ClassVar, TypeVar

# Bump when the training code changes in a way the numbers below do not capture.
RECIPE_VERSION = 3
SEED_RECIPE_VERSION = 1

SLIDING, FULL = "sliding_attention", "full_attention"

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


class Hashed:
    """What every recipe does with its numbers: records them and hashes them (a dataclass's
    fields; this class adds none, so a recipe's hash is its fields' alone)."""

    # set by @dataclass on every recipe: what makes a Hashed a dataclass to the type checker
    __dataclass_fields__: ClassVar[dict[str, Field[object]]]

    def to_json(self) -> dict[str, object]:
        return asdict(self)  # every recipe is a dataclass

    def digest(self) -> str:
        """Short, stable hash of the recipe: the cache folder name."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Recipe(Hashed):
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
    extra: dict[str, object] = field(default_factory=dict)


DEFAULT_RECIPE = Recipe()

# A recipe small enough to build twice in a test (seconds, not minutes): it exercises every
# stage of the full build, so two equal builds of it show the build is deterministic. Two
# steps per training stage are enough for the second to read the first's optimizer state
# and schedule; more steps, prompts or tokens only repeat the same code at test time.
REDUCED_OVERRIDES: dict[str, object] = {
    "corpus_documents": 200, "target_steps": 2, "target_batch": 2, "distill_prompts": 4,
    "distill_new_tokens": 8, "draft_steps": 2, "draft_batch": 2, "draft_anchors": 2,
}


# ---------------------------------------------------------------- the seed pairs


@dataclass(frozen=True)
class SeedRecipe(Hashed):
    """Seeds, shapes and schedules of one miniature pair (target + DFlash draft)."""

    pair: str
    version: int = SEED_RECIPE_VERSION
    seed: int = 20260812
    # the tokenizer and corpus of the reference recipe (one tokenizer for every miniature)
    tokenizer_recipe: str = DEFAULT_RECIPE.digest()
    corpus_documents: int = 6000
    # target
    target_layer_types: tuple[str, ...] = ()
    hidden_size: int = 128
    target_intermediate: int = 256
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    full_head_dim: int = 32  # gemma-4: global_head_dim
    full_kv_heads: int = 2  # gemma-4: num_global_key_value_heads
    target_sliding_window: int = 32
    target_seq_len: int = 128
    target_batch: int = 16
    target_steps: int = 300
    target_lr: float = 3e-3
    # distillation data: the bfloat16 target's own greedy continuations
    distill_prompts: int = 256
    distill_new_tokens: int = 96
    # draft
    draft_layer_types: tuple[str, ...] = ()
    draft_heads: int = 4
    draft_kv_heads: int = 1
    draft_head_dim: int = 32
    draft_intermediate: int = 256
    draft_sliding_window: int = 16
    block_size: int = 16  # what the draft's config declares
    train_block: int = 16  # the block it is trained on (the suite's)
    target_layer_ids: tuple[int, ...] = ()
    draft_batch: int = 16
    draft_anchors: int = 8
    draft_steps: int = 400
    draft_lr: float = 2e-3
    # DFlash's loss weight for block offset k is exp(-(k - 1) / gamma)
    draft_loss_gamma: float = 4.0
    extra: dict[str, object] = field(default_factory=dict)


GEMMA4 = SeedRecipe(
    pair="gemma4",
    # google/gemma-4-31B-it: (5 sliding + 1 full) x 10; here one period
    target_layer_types=(SLIDING,) * 5 + (FULL,),
    target_intermediate=256,
    heads=4, kv_heads=2, head_dim=32,  # 31B: 32 heads, 16 KV heads, head_dim 256
    full_head_dim=64, full_kv_heads=1,  # 31B: global_head_dim 512, 4 global KV heads
    target_sliding_window=32,  # 31B: 1024
    # z-lab/gemma-4-31B-it-DFlash: 4 sliding (window 2048) + 1 full, 64 heads / 8 KV
    draft_layer_types=(SLIDING,) * 4 + (FULL,),
    draft_heads=8, draft_kv_heads=1, draft_head_dim=32, draft_intermediate=256,
    draft_sliding_window=16, block_size=16, train_block=16,
    target_layer_ids=(1, 2, 3, 4),  # the 31B draft reads 6 of 60, never the last ones
)

MUSE_GLIMMER = SeedRecipe(
    pair="muse_glimmer",
    target_layer_types=(SLIDING,) * 3 + (FULL,),
    target_intermediate=384,  # MuseGlimmerConfig: 3 x hidden
    heads=4, kv_heads=1, head_dim=32,  # 32 heads / 2 KV heads, head_dim 128
    full_head_dim=32, full_kv_heads=1,
    target_sliding_window=32,  # 2048
    # the assistant: 5 sliding layers (window 2048), 32 / 8 heads, block 16, FFN 3 x hidden
    draft_layer_types=(SLIDING,) * 5,
    draft_heads=4, draft_kv_heads=1, draft_head_dim=32, draft_intermediate=384,
    draft_sliding_window=16, block_size=16, train_block=5,
    target_layer_ids=(0, 1, 2),  # layer-output ids (SGLang adds 1 for a Muse target)
)

RECIPES: dict[str, SeedRecipe] = {recipe.pair: recipe for recipe in (GEMMA4, MUSE_GLIMMER)}

# Small enough to build twice in a test: every stage runs, two steps each (the second reads
# the first's optimizer state and schedule); a continuation holds one gemma4 train block.
SEED_REDUCED_OVERRIDES: dict[str, object] = {
    "corpus_documents": 100, "target_steps": 2, "target_batch": 2, "target_seq_len": 64,
    "distill_prompts": 4, "distill_new_tokens": 16, "draft_steps": 2, "draft_batch": 2,
    "draft_anchors": 2,
}


def recipe_for(pair: str) -> SeedRecipe:
    try:
        return RECIPES[pair]
    except KeyError:
        raise ValueError(f"no seed pair {pair!r}; known: {', '.join(RECIPES)}") from None


R = TypeVar("R", bound=Hashed)


def with_overrides(recipe: R, overrides: Mapping[str, object]) -> R:
    """`recipe` with some fields replaced (lists become tuples); unknown names are errors."""
    known = set(recipe.to_json())
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown recipe fields: {', '.join(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    return replace(recipe, **values)
