"""Per-layer attention of a DFlash draft under each known SGLang behaviour.

SGLang decides, for every DFlash draft layer, whether its attention is causal or
bidirectional, from `layer_types`, `sliding_window` and an optional `is_causal` in the
draft's (text) config. Three behaviours have existed (../shared/docs/sglang-facts.md):

| behaviour | full_attention layer             | sliding_attention layer          |
|-----------|----------------------------------|----------------------------------|
| legacy    | causal only if is_causal truthy  | always causal                    |
| regressed | unset -> bidirectional, else it  | unset -> bidirectional, else it  |
| fixed     | unset -> bidirectional, else it  | unset -> causal, else it         |

No `layer_types` at all -> every layer bidirectional, no window, in all three.

This module is pure and stdlib-only: the CPU reference engine imports it to replay a
behaviour on its own draft, and the audit compares it with a version's own code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from harness.errors import BadInput

Behaviour = Literal["legacy", "regressed", "fixed"]
BEHAVIOURS: tuple[Behaviour, ...] = get_args(Behaviour)

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LAYER_TYPES: tuple[str, ...] = (FULL_ATTENTION, SLIDING_ATTENTION)


class DraftConfigError(BadInput):
    """A draft config that no SGLang behaviour can resolve; the message names the field."""


@dataclass(frozen=True)
class LayerAttention:
    """How one draft layer attends: the unit every audit and contract compares."""

    index: int
    layer_type: str | None  # "sliding_attention" / "full_attention" / None without layer_types
    window: int | None  # sliding window as declared in the config (tokens); None = full
    causal: bool
    explicit: bool  # causality came from an explicit is_causal, not from a default

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def audit_dict(self) -> dict[str, object]:
        """The layer as `harness audit --json` prints it: the window under names that say
        its unit. `window_tokens` is the config's `sliding_window` (the tokens a query
        sees, itself included); SGLang stores one less (`window_left`, the tokens to the
        left: `sglang_window_left`). Both None for full attention."""
        return {"index": self.index, "layer_type": self.layer_type,
                "window_tokens": self.window,
                "sglang_window_left": None if self.window is None else self.window - 1,
                "causal": self.causal, "explicit": self.explicit}

    @property
    def attention(self) -> str:
        """`causal` or `bidirectional`, the word the reports use."""
        return "causal" if self.causal else "bidirectional"


@dataclass(frozen=True)
class DraftAttentionFields:
    """The validated fields every behaviour reads; resolved once, shared by all three."""

    num_layers: int
    layer_types: tuple[str, ...] | None
    sliding_window: int | None
    is_causal: bool | None


def text_config(config: Mapping[str, object]) -> Mapping[str, object]:
    """The text sub-config when the draft nests one (multimodal wrappers), else the config.

    SGLang reads `is_causal` only from the text config, and `layer_types` /
    `sliding_window` from the text config first, then from the top level.
    """
    if not isinstance(config, Mapping):
        raise DraftConfigError(f"draft config must be a JSON object, got {type(config).__name__}")
    nested = config.get("text_config")
    if nested is None:
        return config
    if not isinstance(nested, Mapping):
        raise DraftConfigError(
            f"draft config text_config must be a JSON object, got {type(nested).__name__}"
        )
    return nested


def _lookup(config: Mapping[str, object], key: str) -> object:
    """Text config first, then the top level: the order SGLang's dflash_utils uses."""
    value = text_config(config).get(key)
    return config.get(key) if value is None else value


def _positive_int(value: object, field: str) -> int:
    # bool is an int in Python; a `true` window or layer count is a typo, not a number.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise DraftConfigError(f"draft config {field} must be a positive integer, got {value!r}")
    return value


def read_fields(config: Mapping[str, object]) -> DraftAttentionFields:
    """Validate the attention fields of a draft config; raise DraftConfigError naming the fault."""
    text = text_config(config)
    raw_types = _lookup(config, "layer_types")
    layer_types: tuple[str, ...] | None = None
    if raw_types is not None:
        if isinstance(raw_types, str) or not isinstance(raw_types, Sequence):
            raise DraftConfigError(
                f"draft config layer_types must be a list of strings, got {raw_types!r}"
            )
        for index, layer_type in enumerate(raw_types):
            if layer_type not in LAYER_TYPES:
                raise DraftConfigError(
                    f"draft config layer_types[{index}] is {layer_type!r}: unknown layer type "
                    f"(known: {', '.join(LAYER_TYPES)})"
                )
        layer_types = tuple(raw_types)

    raw_layers = _lookup(config, "num_hidden_layers")
    if raw_layers is None:
        if layer_types is None:
            raise DraftConfigError(
                "draft config declares neither num_hidden_layers nor layer_types: "
                "cannot tell how many draft layers there are"
            )
        num_layers = len(layer_types)
    else:
        num_layers = _positive_int(raw_layers, "num_hidden_layers")
    if layer_types is not None and len(layer_types) != num_layers:
        raise DraftConfigError(
            f"draft config layer_types has {len(layer_types)} entries but "
            f"num_hidden_layers is {num_layers}: one entry per draft layer is required"
        )

    sliding_window: int | None = None
    if layer_types is not None and SLIDING_ATTENTION in layer_types:
        raw_window = _lookup(config, "sliding_window")
        if raw_window is None:
            first = layer_types.index(SLIDING_ATTENTION)
            raise DraftConfigError(
                f"draft config layer {first} is sliding_attention but the config has no "
                "sliding_window"
            )
        sliding_window = _positive_int(raw_window, "sliding_window")

    # Only the text config counts: SGLang reads is_causal from get_text_config().
    is_causal = text.get("is_causal")
    if is_causal is not None and not isinstance(is_causal, bool):
        raise DraftConfigError(
            f"draft config is_causal must be true, false or absent, got {is_causal!r}"
        )
    return DraftAttentionFields(num_layers, layer_types, sliding_window, is_causal)


def _layer_causality(
    layer_type: str, is_causal: bool | None, behaviour: Behaviour
) -> tuple[bool, bool]:
    """(causal, explicit) of one typed layer under one behaviour."""
    if behaviour == "legacy":
        if layer_type == SLIDING_ATTENTION:
            return True, False  # hard-coded: is_causal was never read for sliding layers
        return bool(is_causal), is_causal is not None
    if is_causal is not None:
        return is_causal, True
    if behaviour == "regressed":
        return False, False
    return layer_type == SLIDING_ATTENTION, False


def resolve_layers(config: Mapping[str, object], behaviour: Behaviour) -> list[LayerAttention]:
    """Per-layer attention of a draft config under one known SGLang behaviour."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {behaviour!r}; known: {', '.join(BEHAVIOURS)}")
    fields = read_fields(config)
    if fields.layer_types is None:
        # Without layer_types SGLang makes every layer bidirectional, whatever is_causal says.
        return [
            LayerAttention(index, None, None, causal=False, explicit=False)
            for index in range(fields.num_layers)
        ]
    layers = []
    for index, layer_type in enumerate(fields.layer_types):
        causal, explicit = _layer_causality(layer_type, fields.is_causal, behaviour)
        window = fields.sliding_window if layer_type == SLIDING_ATTENTION else None
        layers.append(LayerAttention(index, layer_type, window, causal, explicit))
    return layers


def resolve_all(config: Mapping[str, object]) -> dict[Behaviour, list[LayerAttention]]:
    """The table under every known behaviour, keyed by behaviour."""
    return {behaviour: resolve_layers(config, behaviour) for behaviour in BEHAVIOURS}
