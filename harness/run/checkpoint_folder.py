"""A local checkpoint folder, checked before any build or launch: its config, its weights,
and the shapes its config fixes.

Why the harness checks at all: an engine reads a broken folder in ways that cost minutes
or say nothing. A missing weights file ends SGLang's start after its imports; a weight
wider than its config says is silently cut to the config's shape by SGLang 0.5.23's linear
weight loaders (seen on CPU: a draft whose `intermediate_size` says 256 over 384-row MLP
weights served, and passed, as a different model). Here each fault is exit 2 in seconds,
naming the file and the field.

What is checked (torch-free: safetensors headers are JSON), on the text config (the
`text_config` of a multimodal config, else the config itself):

- `config.json` exists, is a JSON object, states `model_type`;
- weights exist (`*.safetensors` or `*.bin`), and each safetensors header is readable;
- in the text model's tensors (vision and audio towers, MoE experts are not checked): a
  layer index below `num_hidden_layers`; `hidden_size` as the input width of
  `q/k/v_proj` and of the MLP's `gate/up_proj`, the output width of `o_proj` and
  `down_proj`, the width of the layer norms and of `embed_tokens` / `lm_head`;
  `intermediate_size` as the MLP's (when the config has no wider MLP layers); `vocab_size`
  as the rows of `embed_tokens`; a DFlash draft's `fc` (or `encoder.fc`) as `hidden_size`
  x (`hidden_size` x the target layers it reads).

Whether the engine knows the config's `model_type` is the engine's to say: SGLang refuses
an unknown one at launch (exit 3, its message naming the type).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path
from typing import Any

from harness.errors import BadInput

# The header of a safetensors file is JSON; a length beyond this is not a header.
MAX_HEADER_BYTES = 100 * 2**20
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_NOT_TEXT = ("vision", "visual", "audio", "embed_vision", "embed_audio", "experts",
             "router", "mm_projector", "multi_modal")


def check_folder(folder: Path, role: str) -> None:
    """Raise BadInput naming the file and the field when the folder contradicts itself."""
    config_path = folder / "config.json"
    config = _read_config(config_path, role)
    weights = sorted(folder.glob("*.safetensors"))
    if not weights and not any(folder.glob("*.bin")):
        raise BadInput(f"the {role} model {folder}: no weights (*.safetensors or *.bin) "
                       "in the folder")
    text_config = config.get("text_config")
    text = text_config if isinstance(text_config, dict) else config
    for path in weights:
        for name, shape in _header_shapes(path, role).items():
            problem = _shape_problem(name, shape, text, config)
            if problem:
                raise BadInput(f"the {role} model {path}: {problem} ({config_path})")


def _read_config(path: Path, role: str) -> dict[str, Any]:
    if not path.is_file():
        raise BadInput(f"the {role} model {path.parent}: config.json is missing")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise BadInput(f"the {role} model {path}: not a readable JSON config ({error})") from None
    if not isinstance(config, dict):
        raise BadInput(f"the {role} model {path}: a config is a JSON object, got "
                       f"{type(config).__name__}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise BadInput(f"the {role} model {path}: model_type is missing (got {model_type!r})")
    return config


def _header_shapes(path: Path, role: str) -> dict[str, list[int]]:
    """name -> shape from a safetensors header, refusing anything that is not one."""
    try:
        with path.open("rb") as handle:
            raw_length = handle.read(8)
            if len(raw_length) != 8:
                raise ValueError("shorter than its 8-byte header length")
            (length,) = struct.unpack("<Q", raw_length)
            if length > MAX_HEADER_BYTES:
                raise ValueError(f"header length {length} is not plausible")
            header = json.loads(handle.read(length))
    except (OSError, ValueError, UnicodeDecodeError) as error:
        raise BadInput(f"the {role} model {path}: not a safetensors file ({error})") from None
    if not isinstance(header, dict):
        raise BadInput(f"the {role} model {path}: not a safetensors file (its header is not "
                       "a JSON object)")
    shapes = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise BadInput(f"the {role} model {path}: tensor {name!r} has no valid shape "
                           f"(got {shape!r})")
        shapes[str(name)] = shape
    return shapes


def _int(config: dict[str, Any], key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _target_layer_count(config: dict[str, Any]) -> int | None:
    nested = config.get("dflash_config")
    ids = nested.get("target_layer_ids") if isinstance(nested, dict) else None
    if ids is None:
        ids = config.get("target_layer_ids")
    return len(ids) if isinstance(ids, list) and ids else None


def _shape_problem(name: str, shape: list[int], text: dict[str, Any],
                   config: dict[str, Any]) -> str | None:
    """What a tensor's shape contradicts in the config, or None."""
    if any(part in name for part in _NOT_TEXT):
        return None
    hidden, layers = _int(text, "hidden_size"), _int(text, "num_hidden_layers")
    layer = _LAYER.search(name)
    if layer and layers is not None and int(layer.group(1)) >= layers:
        return (f"tensor {name} is layer {layer.group(1)}, but num_hidden_layers says "
                f"{layers}")
    if hidden is None or not name.endswith(".weight"):
        return None
    base = name.removesuffix(".weight")
    leaf = base.rsplit(".", 1)[-1]
    expected: list[tuple[int, int, str]] = []  # (dimension, value, field)
    if len(shape) == 2:
        if leaf in ("q_proj", "k_proj", "v_proj") or (
                ".mlp." in name and leaf in ("gate_proj", "up_proj")):
            expected.append((1, hidden, "hidden_size"))
        if leaf == "o_proj" or (".mlp." in name and leaf == "down_proj"):
            expected.append((0, hidden, "hidden_size"))
        intermediate = _int(text, "intermediate_size")
        if ".mlp." in name and intermediate and not text.get("use_double_wide_mlp"):
            if leaf in ("gate_proj", "up_proj"):
                expected.append((0, intermediate, "intermediate_size"))
            elif leaf == "down_proj":
                expected.append((1, intermediate, "intermediate_size"))
        if leaf in ("embed_tokens", "lm_head"):
            expected.append((1, hidden, "hidden_size"))
            vocab = _int(text, "vocab_size")
            if leaf == "embed_tokens" and vocab is not None:
                expected.append((0, vocab, "vocab_size"))
        if base in ("fc", "encoder.fc", "model.fc"):
            expected.append((0, hidden, "hidden_size"))
            count = _target_layer_count(config)
            if count is not None:
                expected.append((1, hidden * count, "hidden_size x len(target_layer_ids)"))
    elif len(shape) == 1 and leaf in ("input_layernorm", "post_attention_layernorm"):
        expected.append((0, hidden, "hidden_size"))
    for dimension, value, field in expected:
        if shape[dimension] != value:
            return f"tensor {name} is {shape}; config.json {field} says {value}"
    return None
