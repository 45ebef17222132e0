"""The STANDALONE suite's tiny causal draft: the shipped tiny target's first layers.

A STANDALONE draft is an ordinary causal LM with the target's tokenizer. None is shipped,
so this one is cut from the tiny target (`harness/engines/reference/tiny/target`): its
embedding, its first `LAYERS` decoder layers, its final norm and lm_head, with the config
saying `num_hidden_layers = LAYERS`. The cut is byte slicing of the safetensors file (an
8-byte header length, a JSON header of tensor offsets, the raw tensors), so it needs no
torch, and the same target gives the same draft bit for bit.

    python -m tests.sglang_cpu.tiny_causal_draft OUT   # writes the draft folder to OUT
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import sys
from pathlib import Path

from harness.build import REPO_ROOT

TARGET = REPO_ROOT / "harness" / "engines" / "reference" / "tiny" / "target"
LAYERS = 2
COPIED = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")
_LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def cut(target: Path, out: Path, layers: int = LAYERS) -> Path:
    """Write the first `layers` layers of `target` as a model folder at `out`."""
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


if __name__ == "__main__":
    print(cut(TARGET, Path(sys.argv[1])))
