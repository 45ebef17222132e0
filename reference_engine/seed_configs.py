"""The `config.json` of each seed miniature, written as the real checkpoints write theirs.

Torch-free (plain dicts): the training code builds its models from these, and tests compare
their keys with the real configs' without any engine installed. The keys are the ones the
real configs use (`global_head_dim`, `num_global_key_value_heads`, `attention_k_eq_v`,
`rope_parameters` per layer type for gemma-4; `MuseGlimmerConfig`'s own names for Muse
Glimmer; `dflash_config` for both drafts), so SGLang reads each through the same parser as
the real one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from reference_engine.recipe import FULL, SLIDING, SeedRecipe


@dataclass(frozen=True)
class TokenIds:
    """The tokenizer's ids the configs name."""

    vocab_size: int
    eos: int
    pad: int
    mask: int
    # gemma-4's multimodal markers (`GEMMA4_SPECIAL_TOKENS` name -> id), else empty
    special: tuple[tuple[str, int], ...] = ()


# The markers gemma-4's processor and SGLang's Gemma4SGLangProcessor read, added to the
# reference tokenizer (after its 1024 tokens) in the real vocabulary's order; the config
# names their ids as the real one does (`boi_token_id`, ..., `video_token_id`).
GEMMA4_SPECIAL_TOKENS = (
    ("boi_token", "<|image>"), ("boa_token", "<|audio>"), ("image_token", "<|image|>"),
    ("audio_token", "<|audio|>"), ("eoi_token", "<image|>"), ("eoa_token", "<audio|>"),
    ("video_token", "<|video|>"),
)
_GEMMA4_ID_KEYS = {"boi_token": "boi_token_id", "boa_token": "boa_token_id",
                   "image_token": "image_token_id", "audio_token": "audio_token_id",
                   "eoi_token": "eoi_token_id", "eoa_token": "eoa_token_index",
                   "video_token": "video_token_id"}


def gemma4_target(recipe: SeedRecipe, ids: TokenIds) -> dict[str, Any]:
    """`Gemma4ForConditionalGeneration`: a text config shaped like gemma-4-31B-it's and a
    one-layer vision tower (the class always builds one)."""
    text = {
        "model_type": "gemma4_text",
        "vocab_size": ids.vocab_size,
        "vocab_size_per_layer_input": ids.vocab_size,
        "hidden_size": recipe.hidden_size,
        "intermediate_size": recipe.target_intermediate,
        "num_hidden_layers": len(recipe.target_layer_types),
        "layer_types": list(recipe.target_layer_types),
        "num_attention_heads": recipe.heads,
        "num_key_value_heads": recipe.kv_heads,
        "head_dim": recipe.head_dim,
        "num_global_key_value_heads": recipe.full_kv_heads,
        "global_head_dim": recipe.full_head_dim,
        "attention_k_eq_v": True,
        "sliding_window": recipe.target_sliding_window,
        "final_logit_softcapping": 30.0,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size_per_layer_input": 0,
        "num_kv_shared_layers": 0,
        "use_double_wide_mlp": False,
        "enable_moe_block": False,
        "attention_bias": False,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "rope_parameters": {
            FULL: {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                   "rope_type": "proportional"},
            SLIDING: {"rope_theta": 10000.0, "rope_type": "default"},
        },
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "dtype": "bfloat16",
    }
    vision = {
        "model_type": "gemma4_vision",
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "patch_size": 4,
        "pooling_kernel_size": 2,
        "position_embedding_size": 64,
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "rope_parameters": {"rope_theta": 100.0, "rope_type": "default"},
        "dtype": "bfloat16",
    }
    markers = {_GEMMA4_ID_KEYS[name]: token_id for name, token_id in ids.special}
    return {
        **markers,
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": vision,
        "audio_config": None,
        "tie_word_embeddings": True,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "dtype": "bfloat16",
    }


def gemma4_processor(recipe: SeedRecipe) -> dict[str, Any]:
    """`processor_config.json`: gemma-4's processor (audio features, images, video), its
    patch and pooling sizes the vision tower's."""
    image = {"do_convert_rgb": True, "do_normalize": False, "do_rescale": True,
             "do_resize": True, "image_mean": [0.0, 0.0, 0.0], "image_std": [1.0, 1.0, 1.0],
             "patch_size": 4, "pooling_kernel_size": 2, "resample": 3,
             "rescale_factor": 1 / 255}
    return {
        "processor_class": "Gemma4Processor",
        "image_seq_length": 280,
        "audio_seq_length": 750,
        "audio_ms_per_token": 40,
        "feature_extractor": {
            "feature_extractor_type": "Gemma4AudioFeatureExtractor", "feature_size": 128,
            "sampling_rate": 16000, "frame_length": 320, "hop_length": 160,
            "fft_length": 512, "min_frequency": 0.0, "max_frequency": 8000.0,
            "mel_floor": 0.001, "dither": 0.0, "input_scale_factor": 1.0,
            "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True},
        "image_processor": {**image, "image_processor_type": "Gemma4ImageProcessor",
                            "max_soft_tokens": 280},
        "video_processor": {**image, "do_normalize": True, "do_sample_frames": True,
                            "num_frames": 32, "max_soft_tokens": 70,
                            "video_processor_type": "Gemma4VideoProcessor"},
    }


def _draft_layers(recipe: SeedRecipe) -> dict[str, Any]:
    """The draft's layers as both seed drafts' configs state them, in their order."""
    return {
        "hidden_size": recipe.hidden_size,
        "intermediate_size": recipe.draft_intermediate,
        "num_hidden_layers": len(recipe.draft_layer_types),
        "layer_types": list(recipe.draft_layer_types),
        "num_attention_heads": recipe.draft_heads,
        "num_key_value_heads": recipe.draft_kv_heads,
        "head_dim": recipe.draft_head_dim,
        "hidden_act": "silu",
    }


def gemma4_draft(recipe: SeedRecipe, ids: TokenIds) -> dict[str, Any]:
    """`DFlashDraftModel` (qwen3) like z-lab/gemma-4-31B-it-DFlash: `is_causal` undeclared."""
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "vocab_size": ids.vocab_size,
        **_draft_layers(recipe),
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        # Without use_sliding_window transformers' Qwen3Config drops sliding_window.
        "use_sliding_window": True,
        "sliding_window": recipe.draft_sliding_window,
        "max_window_layers": len(recipe.draft_layer_types),
        "attention_bias": False,
        "tie_word_embeddings": False,
        "final_logit_softcapping": 30.0,
        "num_target_layers": len(recipe.target_layer_types),
        "block_size": recipe.block_size,
        "dflash_config": {"mask_token_id": ids.mask,
                          "target_layer_ids": list(recipe.target_layer_ids)},
        "bos_token_id": None,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "dtype": "bfloat16",
    }


# Muse Glimmer's architecture constants, kept at the released values (transformers'
# MuseGlimmerTextConfig defaults): the QK scale on top of 1/sqrt(head_dim), the logit
# multiplier and softcap, the RoPE base.
MUSE_QK_SCALE = 3.87
MUSE_OUTPUT_MULTIPLIER = 0.19611613513818404
MUSE_SOFTCAP = 20.0
MUSE_ROPE_THETA = 500000.0


def muse_glimmer_text(recipe: SeedRecipe, ids: TokenIds) -> dict[str, Any]:
    """The text decoder as SGLang's `MuseGlimmerConfig` holds it once it has read the
    checkpoint's vendor config (`muse_glimmer_config_kwargs_from_hf`): what the training
    code builds. `muse_glimmer_target` writes the same numbers in the vendor's names.
    The layer pattern is the released one's: a full layer every fourth counted back from
    the last, RoPE on the sliding layers only."""
    layer_types = list(recipe.target_layer_types)
    return {
        "vocab_size": ids.vocab_size,
        "hidden_size": recipe.hidden_size,
        "intermediate_size": recipe.target_intermediate,
        "num_hidden_layers": len(layer_types),
        "num_attention_heads": recipe.heads,
        "num_key_value_heads": recipe.kv_heads,
        "head_dim": recipe.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "post_norm_eps": 1e-8,
        "rope_theta": MUSE_ROPE_THETA,
        "sliding_window": recipe.target_sliding_window,
        "layer_types": layer_types,
        # RoPE on the sliding layers only (the full layers' theta is null)
        "no_rope_layers": [1 if kind == SLIDING else 0 for kind in layer_types],
        "use_qk_norm": True,
        "use_attn_output_gate": True,
        # SGLang multiplies the vendor's factor by sqrt(head_dim)
        "qk_scale_factor": MUSE_QK_SCALE * math.sqrt(recipe.head_dim),
        "rope_is_neox_style": True,  # the vendor export's (SGLang sets it for that format)
        "normalize_tok_embeddings": True,
        "output_multiplier": MUSE_OUTPUT_MULTIPLIER,
        "output_soft_cap_temp": MUSE_SOFTCAP,
        "tie_word_embeddings": False,
    }


def muse_glimmer_target(recipe: SeedRecipe, ids: TokenIds) -> dict[str, Any]:
    """`MuseGlimmerForConditionalGeneration`, the vendor's multimodal export: a
    `text_config` in the vendor's names (SGLang translates `hidden_activation`,
    `rope_parameters`, `layer_rope_theta`, `final_logit_softcapping` and a
    `qk_scale_factor` divided by sqrt(head_dim)) and a `vision_config`, which
    `--language-model-only` (the suite's) leaves unbuilt."""
    text = muse_glimmer_text(recipe, ids)
    vendor_text = {
        key: text[key] for key in (
            "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
            "num_attention_heads", "num_key_value_heads", "head_dim",
            "max_position_embeddings", "rms_norm_eps", "post_norm_eps", "sliding_window",
            "layer_types", "tie_word_embeddings")}
    vendor_text.update({
        "model_type": "muse_glimmer_text",
        "hidden_activation": text["hidden_act"],
        "rope_parameters": {"rope_theta": text["rope_theta"], "rope_type": "default"},
        "layer_rope_theta": [text["rope_theta"] if rope else 0
                             for rope in text["no_rope_layers"]],  # 0: no RoPE
        "final_logit_softcapping": text["output_soft_cap_temp"],
        "qk_scale_factor": MUSE_QK_SCALE,
        "output_multiplier": text["output_multiplier"],
        "bos_token_id": None,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
    })
    vision = {
        "model_type": "muse_glimmer_vision", "hidden_size": 16, "intermediate_size": 32,
        "num_hidden_layers": 1, "num_attention_heads": 2, "layer_types": ["full_attention"],
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "patch_size": 14, "merge_size": 2, "pos_emb_height": 4, "pos_emb_width": 4,
    }
    return {
        "architectures": ["MuseGlimmerForConditionalGeneration"],
        "model_type": "muse_glimmer",
        "text_config": vendor_text,
        "vision_config": vision,
        "out_hidden_size": 64,
        "projector_hidden_size": 32,
        "tie_word_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "dtype": "bfloat16",
    }


def muse_glimmer_draft(recipe: SeedRecipe, ids: TokenIds) -> dict[str, Any]:
    """The assistant as transformers' `MuseGlimmerAssistantConfig` writes it
    (`block_size`, `mask_token_id`, `target_layer_ids` at the top level): `model_type`
    muse_glimmer_assistant, no `is_causal` and no `vocab_size` (SGLang's class states
    both), a standard two-norm DFlash block on every layer."""
    return {
        "architectures": ["MuseGlimmerAssistantModel"],
        "model_type": "muse_glimmer_assistant",
        **_draft_layers(recipe),
        "rms_norm_eps": 1e-5,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_theta": MUSE_ROPE_THETA, "rope_type": "default"},
        "sliding_window": recipe.draft_sliding_window,
        "block_size": recipe.block_size,
        "mask_token_id": ids.mask,
        "target_layer_ids": list(recipe.target_layer_ids),
        "bos_token_id": None,
        "eos_token_id": ids.eos,
        "pad_token_id": ids.pad,
        "dtype": "bfloat16",
    }


TARGET_CONFIGS = {"gemma4": gemma4_target, "muse_glimmer": muse_glimmer_target}
DRAFT_CONFIGS = {"gemma4": gemma4_draft, "muse_glimmer": muse_glimmer_draft}
