"""Apply one SGLang causality behaviour (legacy / regressed / fixed) to a loaded DFlash draft.

Why: the harness must show that its gate catches the causality regression, and one tiny
checkpoint can replay every behaviour only if the engine decides each layer's causality
and window the way that SGLang version did. The decision itself lives in
`harness.suite.attention` (pure, shared with the audit); this module only writes the result into
dflash's attention modules, which read `is_causal` and `sliding_window` at every forward.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.suite.attention import Behaviour, LayerAttention, resolve_layers


def read_draft_config(draft_dir: Path) -> dict[str, Any]:
    """The draft's config.json as written (not as transformers re-serialises it).

    Reading the file matters: whether `is_causal` is *declared* decides the behaviours, and
    a config object could carry defaults the checkpoint never declared.
    """
    return json.loads((draft_dir / "config.json").read_text())


def apply_policy(draft, config: dict[str, Any], behaviour: Behaviour) -> list[LayerAttention]:
    """Set every draft layer's causality and window; return the applied table."""
    table = resolve_layers(config, behaviour)
    if len(table) != len(draft.layers):
        raise ValueError(
            f"draft config resolves {len(table)} layers but the model has {len(draft.layers)}"
        )
    for layer, entry in zip(draft.layers, table, strict=True):
        layer.self_attn.is_causal = entry.causal
        layer.self_attn.sliding_window = entry.window
    return table


def applied_table(draft) -> list[dict[str, Any]]:
    """What the model will actually do, read back from the modules (for /server_info)."""
    return [
        {"index": index, "causal": bool(layer.self_attn.is_causal),
         "window": layer.self_attn.sliding_window}
        for index, layer in enumerate(draft.layers)
    ]
