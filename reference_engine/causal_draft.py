"""The tiny causal draft that SGLang's STANDALONE suite serves, made by the harness.

A STANDALONE draft is an ordinary causal LM with the target's tokenizer. The project
ships none: the harness cuts it from the shipped tiny target (`tiny/target`): the
embedding, the first `LAYERS` decoder layers, the final norm and lm_head, with the config
saying `num_hidden_layers = LAYERS`. The cut slices the safetensors file's bytes (an
8-byte header length, a JSON header of tensor offsets, the raw tensors), so it needs no
torch, and the same target gives the same draft bit for bit on every machine: the cut of
the shipped target has the files' sha256 `SHIPPED_SHA256` (`harness reference verify`
checks it; a maintainer who reships the target updates them).

It is written once into the cache, `<cache>/reference/causal-<layers>-<hash of the
target>/`, under a lock, staged and renamed into place (as `uniform_draft`). A suite names
it as `model = { env = "VAR", default = "tiny:causal" }`: the variable, when set, wins.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import tempfile
from pathlib import Path

from harness.builds import bounded_lock, file_sha256
from harness.errors import EngineError
from harness.files import cache_root as harness_cache_root
from reference_engine.checkpoints import shipped_checkpoints

LAYERS = 2
NAME = "tiny:causal"  # how a suite names it (`EnvModel.default`)
COPIED = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
DRAFT_FILES = ("config.json", "model.safetensors", *COPIED)
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")
SHIPPED_SHA256 = {
    "config.json": "0039941c96765283e4068ae08c2995d13931f72a96011d360595a221291e9602",
    "model.safetensors": "efcee67179158392205761d59c92bf0d5e631777a9a07110d726b538e9d2be12",
    "tokenizer.json": "0c9633545fbf2db72be78ac611e0b2e230451502c6492e2c7fa94c8d4ffb6469",
    "tokenizer_config.json": "9364f3d094d97fa8e4db037f7cb02943429b74f93d2277e83b3327b8f596736c",
    "generation_config.json": "04907497f706b1c3b1dfbb2c9c8771421bdf64dd05d1c6ca7884d06c0514bedf",
}


def cut_layers(target: Path, out: Path, layers: int = LAYERS) -> Path:
    """Write the first `layers` layers of the model folder `target` as a model folder at
    `out` (bytes sliced, never loaded)."""
    raw = (target / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    data = raw[8 + size:]
    kept: dict[str, object] = {}
    blobs, offset = [], 0
    for name in sorted(k for k in header if k != "__metadata__"):
        found = _LAYER.match(name)
        if found and int(found.group(1)) >= layers:
            continue
        entry = header[name]
        start, end = entry["data_offsets"]
        blobs.append(data[start:end])
        kept[name] = {**entry, "data_offsets": [offset, offset + end - start]}
        offset += end - start
    if "__metadata__" in header:
        kept["__metadata__"] = header["__metadata__"]
    text = json.dumps(kept, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the format pads the header to 8 bytes
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text
                                            + b"".join(blobs))
    config = json.loads((target / "config.json").read_text())
    config["num_hidden_layers"] = layers
    if isinstance(config.get("layer_types"), list):
        config["layer_types"] = config["layer_types"][:layers]
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in COPIED:
        if (target / name).is_file():
            shutil.copyfile(target / name, out / name)
    return out


def shipped_target() -> Path:
    shipped = shipped_checkpoints()
    if shipped is None:
        raise EngineError("the shipped reference checkpoints are missing "
                          "(reference_engine/tiny)")
    return shipped[0]


def causal_draft_dir(cache_root: Path | None = None, target: Path | None = None,
                     layers: int = LAYERS) -> Path:
    """Where the causal draft of `target` (default: the shipped tiny target) lies in the
    cache, made or not (for plans and dry runs)."""
    target = target or shipped_target()
    digest = (file_sha256(target / "config.json")[:8]
              + file_sha256(target / "model.safetensors")[:8])
    return (cache_root or harness_cache_root()) / "reference" / f"causal-{layers}-{digest}"


def causal_draft(cache_root: Path | None = None, target: Path | None = None,
                 layers: int = LAYERS) -> Path:
    """The causal draft's folder, cut into the cache the first time it is asked for."""
    target = target or shipped_target()
    out = causal_draft_dir(cache_root, target, layers)
    if (out / "config.json").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with bounded_lock(Path(str(out) + ".lock"), "writing the tiny causal draft"):
        if (out / "config.json").is_file():
            return out
        staging = out.with_name(f"{out.name}.building-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        try:
            cut_layers(target, staging, layers)
            staging.rename(out)  # config.json appears only with every other file
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return out


def draft_hashes(folder: Path) -> dict[str, str]:
    """sha256 of each file of a draft folder (the bit-for-bit check)."""
    return {name: file_sha256(folder / name) for name in DRAFT_FILES
            if (folder / name).is_file()}


def verify_causal_draft() -> list[str]:
    """The files whose cut of the shipped target differs from `SHIPPED_SHA256` (made in
    a scratch folder, the cache left alone)."""
    with tempfile.TemporaryDirectory(prefix="causal-draft-") as scratch:
        made = draft_hashes(cut_layers(shipped_target(), Path(scratch) / "draft"))
    return sorted(name for name in set(made) | set(SHIPPED_SHA256)
                  if made.get(name) != SHIPPED_SHA256.get(name))
