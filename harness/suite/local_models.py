"""A checkpoint named by a local path: where it is, and the context its config declares.

A name is a path when it starts with / . ~ or has more parts than a hub id (`org/name`);
a relative one is found from the working folder, else from the repository root (as the
stand-ins are), so a suite names the shipped tiny checkpoints as
`reference_engine/tiny/target` from anywhere.

The context is what SGLang takes as the model's context length when no `--context-length`
is given (0.5.23, `utils/hf_transformers/common.py`, `get_context_length`, called with the
text config of a multimodal model): the first of `max_sequence_length`, `seq_length`,
`max_seq_len`, `model_max_length`, `max_position_embeddings` the config sets, times a
`rope_scaling` factor unless the scaling states `original_max_position_embeddings` or is of
`rope_type` llama3 (those configs already give the extended length).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from harness.suite.document import DocumentError, load_json

# The repository root (the folder above `harness/`): where relative model paths are
# found when the working folder has no such path.
REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_NAME = "config.json"
CONTEXT_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings")
# Where a model's context cannot be read (a hub id, a variable): the longest `max_tokens`
# a suite may ask for. 2**24 = 16,777,216 tokens is past every context a released model
# declares; a larger figure is a typo (an exponent, a digit too many), never a setting.
MAX_CONTEXT_TOKENS = 2**24


def named_as_path(name: str) -> bool:
    """A hub id is `org/name` (or a bare name); a path starts with / . ~ or has more parts."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") >= 2


def find_local(name: str) -> Path | None:
    """The existing file or folder `name` names, absolute: from the working folder, else
    the repository root; None for a hub id or a path that does not exist."""
    if not (named_as_path(name) or "/" in name):
        return None
    path = Path(name).expanduser()
    for candidate in (path, REPO_ROOT / path):
        if candidate.exists():
            return candidate.resolve()
    return None


def read_config(name: str) -> tuple[dict[str, object], Path] | None:
    """The config.json of a local checkpoint (a folder holding one, or the file itself)
    and where it was read; None when `name` names no local checkpoint with one.
    DocumentError (naming the file) for one that cannot be read or is no JSON object."""
    found = find_local(name)
    if found is None:
        return None
    file = found / CONFIG_NAME if found.is_dir() else found
    if file.name != CONFIG_NAME or not file.is_file():
        return None
    try:
        data = load_json(file.read_bytes())
    except OSError as error:
        raise DocumentError(str(file), f"cannot read: {error.strerror}") from None
    except DocumentError as error:
        raise DocumentError(str(file), error.problem) from None
    if not isinstance(data, dict):
        raise DocumentError(str(file), f"a model config is a JSON object, not a "
                                       f"{type(data).__name__}")
    return data, file


def _number(value: object) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    return float(value) if math.isfinite(value) else None


def context_length(config: Mapping[str, object]) -> tuple[int, str] | None:
    """The context SGLang gives a model of this config (module docstring) and the keys it
    came from (`text_config.max_position_embeddings x rope_scaling.factor 4`); None when
    the config declares none."""
    text, prefix = config, ""
    text_config = config.get("text_config")
    if isinstance(text_config, Mapping):
        text, prefix = text_config, "text_config."
    factor = 1.0
    scaling = text.get("rope_scaling")
    if isinstance(scaling, Mapping) and "original_max_position_embeddings" not in scaling \
            and scaling.get("rope_type") != "llama3":
        factor = _number(scaling.get("factor", 1)) or 1.0
    for key in CONTEXT_KEYS:
        if text.get(key) is not None:
            length = _number(text[key])
            if length is None:
                return None
            scaled = f" x {prefix}rope_scaling.factor {factor:g}" if factor != 1 else ""
            return int(factor * length), f"{prefix}{key}{scaled}"
    return None


def model_context(name: str) -> tuple[int, str] | None:
    """The context of the local checkpoint `name` and where it is stated
    (`max_position_embeddings in PATH`); None when `name` is no local checkpoint or its
    config states no context. DocumentError for a config that cannot be read."""
    found = read_config(name)
    if found is None:
        return None
    config, file = found
    context = context_length(config)
    return None if context is None else (context[0], f"{context[1]} in {file}")


def context_limit(name: str | None) -> tuple[int, str]:
    """The context `max_tokens` must leave room in, and where it is stated: the local
    config's of the target `name`, else `MAX_CONTEXT_TOKENS`. DocumentError for a local
    config that cannot be read."""
    found = model_context(name) if name and not name.startswith("tiny:") else None
    return found or (MAX_CONTEXT_TOKENS, "the cap where no local config of the target "
                                         "states its context")


def max_tokens_problem(max_tokens: int, context: tuple[int, str]) -> str | None:
    """Why `max_tokens` cannot be generated in `context` (`context_limit`), or None: the
    prompt needs at least one token of it."""
    limit, where = context
    if max_tokens < limit:
        return None
    return f"{max_tokens} leaves no room for a prompt in a context of {limit} tokens ({where})"
