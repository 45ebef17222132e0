"""A minimal SGLang source tree whose resolver files import GPU-only modules (never loaded)."""

from __future__ import annotations

from pathlib import Path

UTILS = """
from __future__ import annotations
from collections.abc import Sequence
from typing import Any, Optional
import torch  # never imported by the audit

def get_dflash_layer_types(config: Any) -> Optional[Sequence[str]]:
    text_config = _get_text_config(config)
    return _cfg_get(text_config, "layer_types", _cfg_get(config, "layer_types"))

def get_dflash_attention_sliding_window_size(config: Any) -> Optional[int]:
    layer_types = get_dflash_layer_types(config)
    if layer_types is None or "sliding_attention" not in layer_types:
        return None
    text_config = _get_text_config(config)
    return int(_cfg_get(text_config, "sliding_window", _cfg_get(config, "sliding_window"))) - 1

def _cfg_get(config: Any, key: str, default: Any = None) -> Any:
    if isinstance(config, dict):
        return config.get(key, default)
    return getattr(config, key, default)

def _get_text_config(config: Any) -> Any:
    if isinstance(config, dict):
        return config.get("text_config", config)
    return getattr(config, "text_config", None) or config
"""

# The behaviour that lived on main between PR #34262 and PR #34524.
REGRESSED_MODEL = """
from __future__ import annotations
from typing import Tuple
import torch
from sglang.srt.layers.radix_attention import AttentionType
from sglang.srt.speculative.dflash_utils import (
    get_dflash_attention_sliding_window_size,
    get_dflash_layer_types,
)

_NO_WINDOW = -1

def _get_dflash_attention_type(config) -> AttentionType:
    text_config = config.get_text_config()
    is_causal = getattr(text_config, "is_causal", None)
    return AttentionType.DECODER if is_causal else AttentionType.ENCODER_ONLY

def _get_dflash_layer_attention_params(config, layer_id: int) -> Tuple[int, AttentionType]:
    layer_types = get_dflash_layer_types(config)
    if layer_types is None:
        return _NO_WINDOW, AttentionType.ENCODER_ONLY
    layer_type = layer_types[layer_id]
    if layer_type == "full_attention":
        return _NO_WINDOW, _get_dflash_attention_type(config)
    if layer_type == "sliding_attention":
        return get_dflash_attention_sliding_window_size(config), _get_dflash_attention_type(config)
    raise ValueError(f"Unsupported DFLASH draft layer type {layer_type!r}")

class DFlashDraftModel(torch.nn.Module):
    pass
"""


PINNED_TRANSFORMERS = "transformers==5.19.0"


def write_checkout(root: Path, model: str = REGRESSED_MODEL, version: str = "0.5.18.dev0") -> Path:
    """A repository layout like SGLang's: <root>/python/sglang/..., pinning transformers."""
    package = root / "python" / "sglang"
    (package / "srt" / "models").mkdir(parents=True)
    (package / "srt" / "speculative").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the audit must not import sglang')\n")
    (package / "version.py").write_text(f'__version__ = "{version}"\n')
    (package / "srt" / "models" / "dflash.py").write_text(model)
    (package / "srt" / "speculative" / "dflash_utils.py").write_text(UTILS)
    (root / "python" / "pyproject.toml").write_text(
        f'[project]\nname = "sglang"\ndependencies = ["{PINNED_TRANSFORMERS}", "requests"]\n'
    )
    return root
