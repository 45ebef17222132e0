"""The seed miniatures' configs are shaped like the real checkpoints' (torch-free)."""

from __future__ import annotations

import json

import pytest

from harness.suite.attention import resolve_layers
from reference_engine.recipe import (
    GEMMA4,
    MUSE_GLIMMER,
    RECIPES,
    recipe_for,
    with_overrides,
)
from reference_engine.seed_configs import (
    DRAFT_CONFIGS,
    GEMMA4_SPECIAL_TOKENS,
    TARGET_CONFIGS,
    TokenIds,
    muse_glimmer_text,
)

IDS = TokenIds(vocab_size=1031, eos=0, pad=1, mask=2,
               special=tuple((name, 1024 + i) for i, (name, _) in
                             enumerate(GEMMA4_SPECIAL_TOKENS)))


def test_gemma4_target_has_the_31b_shape_in_miniature() -> None:
    config = TARGET_CONFIGS["gemma4"](GEMMA4, IDS)
    assert config["architectures"] == ["Gemma4ForConditionalGeneration"]
    assert config["model_type"] == "gemma4"
    text = config["text_config"]
    # google/gemma-4-31B-it: (5 sliding + 1 full) x 10, the last layer full
    assert text["layer_types"] == ["sliding_attention"] * 5 + ["full_attention"]
    assert text["global_head_dim"] > text["head_dim"]  # 512 vs 256
    assert text["num_global_key_value_heads"] < text["num_key_value_heads"]  # 4 vs 16
    assert text["attention_k_eq_v"] is True
    assert text["final_logit_softcapping"] == 30.0
    assert text["num_kv_shared_layers"] == 0 and text["hidden_size_per_layer_input"] == 0
    assert text["rope_parameters"]["full_attention"]["rope_type"] == "proportional"
    assert text["tie_word_embeddings"] is True
    # the multimodal markers name tokens the tokenizer has
    assert config["image_token_id"] == 1026 and config["video_token_id"] == 1030
    assert max(config[key] for key in ("boi_token_id", "eoi_token_id", "audio_token_id",
                                       "boa_token_id", "eoa_token_index")) < IDS.vocab_size


def test_gemma4_draft_leaves_is_causal_undeclared() -> None:
    config = DRAFT_CONFIGS["gemma4"](GEMMA4, IDS)
    assert config["architectures"] == ["DFlashDraftModel"]
    assert "is_causal" not in config and "is_causal" not in json.dumps(config)
    assert config["layer_types"] == ["sliding_attention"] * 4 + ["full_attention"]
    assert config["block_size"] == 16
    # never the target's last layer (SGLang captures no output of it)
    assert max(config["dflash_config"]["target_layer_ids"]) < len(GEMMA4.target_layer_types) - 1
    causal = [layer.causal for layer in resolve_layers(config, "fixed")]
    assert causal == [True] * 4 + [False]  # PR #34524's contract
    assert [layer.causal for layer in resolve_layers(config, "regressed")] == [False] * 5


def test_muse_glimmer_is_the_vendor_export_with_its_layer_pattern() -> None:
    config = TARGET_CONFIGS["muse_glimmer"](MUSE_GLIMMER, IDS)
    assert config["architectures"] == ["MuseGlimmerForConditionalGeneration"]
    text = config["text_config"]
    # transformers' MuseGlimmerTextConfig default: a full layer every fourth counted back
    # from the last, and no RoPE (theta 0) on it
    layers = len(text["layer_types"])
    assert text["layer_types"] == ["full_attention" if (layers - 1 - i) % 4 == 0
                                   else "sliding_attention" for i in range(layers)]
    assert [theta == 0 for theta in text["layer_rope_theta"]] == [
        kind == "full_attention" for kind in text["layer_types"]]
    assert text["qk_scale_factor"] == 3.87
    flat = muse_glimmer_text(MUSE_GLIMMER, IDS)
    assert flat["no_rope_layers"] == [0 if theta == 0 else 1 for theta in text["layer_rope_theta"]]
    assert flat["rope_is_neox_style"] is True


def test_muse_glimmer_assistant_states_neither_is_causal_nor_a_vocabulary() -> None:
    config = DRAFT_CONFIGS["muse_glimmer"](MUSE_GLIMMER, IDS)
    assert config["model_type"] == "muse_glimmer_assistant"
    assert config["architectures"] == ["MuseGlimmerAssistantModel"]
    assert "is_causal" not in config and "vocab_size" not in config
    assert config["layer_types"] == ["sliding_attention"] * 5
    # as transformers' MuseGlimmerAssistantConfig writes them: at the top level
    assert {"block_size", "mask_token_id", "target_layer_ids"} <= set(config)
    # SGLang adds 1 to these ids for a Muse target: every one must stay below the last layer
    assert max(config["target_layer_ids"]) + 1 < len(MUSE_GLIMMER.target_layer_types)


@pytest.mark.parametrize("pair", sorted(RECIPES))
def test_recipes_hash_every_field(pair: str) -> None:
    recipe = recipe_for(pair)
    assert recipe.digest() != with_overrides(recipe, {"draft_steps": 1}).digest()
    with pytest.raises(ValueError, match="unknown recipe fields: nope"):
        with_overrides(recipe, {"nope": 1})
    with pytest.raises(ValueError, match="no seed pair"):
        recipe_for("llama")
