"""The target a draft is audited against: its config (and tokenizer, when there is one).

Which hidden states a draft reads is decided by the target's side of the engine: the model
runner resolves the taps against the target's layer count, and the target's class
(`Qwen3ForCausalLM`, `Gemma4ForCausalLM`, ...) maps them to capture points. The mask
token's id, when the draft declares none, comes from the target's tokenizer. So the audit
takes the target's folder (a config.json, optionally a tokenizer) or a config.json alone.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.suite.attention import DraftConfigError
from harness.suite.document import DocumentError, load_json
from harness.suite.draft_contract import brief

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "special_tokens_map.json")


@dataclass(frozen=True)
class AuditTarget:
    """A target checkpoint's folder as the audit reads it."""

    folder: Path  # holds config.json (and the tokenizer files, when present)
    architecture: str | None  # config.json `architectures[0]`
    model_type: str
    num_layers: int
    tokenizer: bool  # tokenizer files beside the config
    fingerprint: str  # sha256 over config.json and the tokenizer files (cache key)

    def request(self) -> dict[str, object]:
        """What the audit worker is told."""
        return {"dir": str(self.folder), "architecture": self.architecture,
                "tokenizer": self.tokenizer}


def _layers(config: Mapping[str, object], where: str) -> int:
    text = config.get("text_config")
    holder = text if isinstance(text, Mapping) else config
    value = holder.get("num_hidden_layers", config.get("num_hidden_layers"))
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 4096:
        raise DraftConfigError(f"{where}: target num_hidden_layers must be an integer from 1 "
                               f"to 4096, got {brief(value)}")
    return value


def read_target(config: object, folder: Path, where: str) -> AuditTarget:
    """An AuditTarget from a parsed target config.json in `folder` (validated)."""
    if not isinstance(config, Mapping):
        raise DraftConfigError(f"{where}: a target config must be a JSON object, got "
                               f"{type(config).__name__}")
    architectures = config.get("architectures")
    if architectures is not None and (
            not isinstance(architectures, list)
            or not all(isinstance(a, str) and a for a in architectures)):
        raise DraftConfigError(f"{where}: target architectures must be a list of class names, "
                               f"got {brief(architectures)}")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise DraftConfigError(f"{where}: target model_type must be a non-empty string, got "
                               f"{brief(model_type)}")
    layers = _layers(config, where)
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    present = [name for name in TOKENIZER_FILES if (folder / name).is_file()]
    for name in present:
        digest.update(name.encode())
        digest.update((folder / name).read_bytes())
    return AuditTarget(folder, architectures[0] if architectures else None, model_type,
                       layers, bool(present), digest.hexdigest()[:24])


def load_target(reference: str | os.PathLike[str]) -> AuditTarget:
    """`--target PATH`: a target checkpoint folder, or its config.json."""
    path = Path(reference).expanduser()
    folder = path if path.is_dir() else path.parent
    file = folder / "config.json" if path.is_dir() else path
    if not file.is_file() or file.name != "config.json":
        raise DraftConfigError(f"--target {reference}: no such folder holding config.json, "
                               "nor a config.json file")
    try:
        config = load_json(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, DocumentError) as error:
        raise DraftConfigError(f"{file}: not a readable JSON target config ({error})") from None
    return read_target(config, folder, str(file))
