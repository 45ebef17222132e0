"""The three known SGLang behaviours, resolved by harness.suite.attention."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import BadInput, ExitCode
from harness.suite.attention import (
    BEHAVIOURS,
    DraftConfigError,
    LayerAttention,
    resolve_all,
    resolve_layers,
    text_config,
)
from tests.audit.conftest import (
    dflash2_draft,
    gemma4_dflash,
    muse_glimmer_assistant,
    nested_text_config,
    qwen3_8b_dflash,
)


def causality(config: dict[str, Any], behaviour: str) -> list[bool]:
    return [layer.causal for layer in resolve_layers(config, behaviour)]  # type: ignore[arg-type]


def test_behaviours_are_the_three_known() -> None:
    assert BEHAVIOURS == ("legacy", "regressed", "fixed")


def test_gemma4_shape_flips_only_under_the_regression() -> None:
    config = gemma4_dflash()
    assert causality(config, "legacy") == [True, True, True, True, False]
    assert causality(config, "regressed") == [False] * 5
    assert causality(config, "fixed") == [True, True, True, True, False]
    layers = resolve_layers(config, "fixed")
    assert [layer.window for layer in layers] == [2048] * 4 + [None]
    assert [layer.layer_type for layer in layers] == ["sliding_attention"] * 4 + ["full_attention"]
    assert not any(layer.explicit for layer in layers)


def test_muse_glimmer_stays_bidirectional_since_the_fix() -> None:
    config = muse_glimmer_assistant()
    # legacy never read is_causal for sliding layers
    assert causality(config, "legacy") == [True, True, False]
    assert causality(config, "regressed") == [False] * 3
    assert causality(config, "fixed") == [False] * 3
    assert [layer.explicit for layer in resolve_layers(config, "fixed")] == [True] * 3
    assert [layer.explicit for layer in resolve_layers(config, "legacy")] == [False, False, True]


def test_qwen3_all_full_attention_is_bidirectional_everywhere() -> None:
    for behaviour in BEHAVIOURS:
        layers = resolve_layers(qwen3_8b_dflash(), behaviour)
        assert [layer.causal for layer in layers] == [False] * 5
        assert all(layer.window is None for layer in layers)


def test_dflash2_explicit_false_wins_after_the_fix() -> None:
    config = dflash2_draft()
    assert causality(config, "legacy") == [True] * 4
    assert causality(config, "regressed") == [False] * 4
    assert causality(config, "fixed") == [False] * 4
    assert [layer.window for layer in resolve_layers(config, "fixed")] == [4096] * 4


def test_nested_text_config_is_read() -> None:
    config = nested_text_config()
    assert text_config(config) is config["text_config"]
    assert causality(config, "legacy") == [True, True, True]
    assert causality(config, "regressed") == [True, True, True]
    assert causality(config, "fixed") == [True, True, True]
    assert [layer.window for layer in resolve_layers(config, "fixed")] == [1024, None, 1024]


def test_top_level_is_causal_is_ignored_when_text_config_nests() -> None:
    config = nested_text_config()
    del config["text_config"]["is_causal"]
    config["is_causal"] = False
    assert causality(config, "fixed") == [True, False, True]


def test_no_layer_types_means_bidirectional_without_window() -> None:
    config = {"num_hidden_layers": 2, "is_causal": True}
    for behaviour in BEHAVIOURS:
        assert resolve_layers(config, behaviour) == [
            LayerAttention(0, None, None, causal=False, explicit=False),
            LayerAttention(1, None, None, causal=False, explicit=False),
        ]


def test_to_dict_is_plain_data() -> None:
    layer = resolve_layers(gemma4_dflash(), "fixed")[0]
    assert layer.to_dict() == {
        "index": 0,
        "layer_type": "sliding_attention",
        "window": 2048,
        "causal": True,
        "explicit": False,
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([1, 2], "must be a JSON object"),
        ("text", "must be a JSON object"),
        ({"num_hidden_layers": 3, "layer_types": ["full_attention"] * 2}, "has 2 entries"),
        ({"num_hidden_layers": 1, "layer_types": ["sliding_attention"]}, "no sliding_window"),
        ({"num_hidden_layers": 1, "layer_types": ["chunked_attention"]}, "unknown layer type"),
        ({"num_hidden_layers": 1, "layer_types": "full_attention"}, "list of strings"),
        ({"layer_types": ["full_attention"], "is_causal": "yes"}, "is_causal must be"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive"),
        ({"is_causal": True}, "neither num_hidden_layers nor layer_types"),
        (
            {"layer_types": ["sliding_attention"], "sliding_window": True},
            "sliding_window must be a positive",
        ),
        ({"text_config": [], "num_hidden_layers": 1}, "text_config must be a JSON object"),
    ],
)
def test_malformed_configs_are_rejected_clearly(config: Any, message: str) -> None:
    with pytest.raises(DraftConfigError, match=message) as caught:
        resolve_layers(config, "fixed")
    assert isinstance(caught.value, BadInput)
    assert caught.value.exit_code == ExitCode.BAD_INPUT


def test_unknown_behaviour_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown behaviour"):
        resolve_layers(gemma4_dflash(), "newest")  # type: ignore[arg-type]


layer_type = st.sampled_from(["sliding_attention", "full_attention"])


@given(
    types=st.lists(layer_type, min_size=1, max_size=8),
    is_causal=st.sampled_from([None, True, False]),
)
def test_explicit_is_causal_always_wins_after_the_regression(
    types: list[str], is_causal: bool | None
) -> None:
    config: dict[str, Any] = {"layer_types": types, "sliding_window": 16}
    if is_causal is not None:
        config["is_causal"] = is_causal
    tables = resolve_all(config)
    for behaviour in ("regressed", "fixed"):
        for layer in tables[behaviour]:
            if is_causal is not None:
                assert layer.causal is is_causal and layer.explicit
            else:
                assert not layer.explicit
    # full layers never differ between legacy and fixed; sliding ones only when declared
    for legacy, fixed in zip(tables["legacy"], tables["fixed"], strict=True):
        if legacy.layer_type == "full_attention" or is_causal in (None, True):
            assert legacy.causal == fixed.causal
