"""The tiny DFlash draft SGLang's own DFLASH worker can serve: target layers it captures.

The shipped draft (`tiny/draft`) reads the target's features at `target_layer_ids`
[0, 1, 2, 3], the last of them the target's last layer. SGLang captures layer k's output
as the input of layer k + 1 (`layers_to_capture = id + 1`), so the last layer's output is
never captured and SGLang 0.5.23 cannot serve that draft; real DFlash drafts never read
the last layer. This draft reads [0, 1, 2]. It is derived from the shipped draft, not
trained: its input projection `fc` ([hidden, hidden x layers], one column block per
target layer) keeps the blocks of the layers it still reads and folds each dropped
layer's block into the nearest kept layer below it (the residual stream of layer 3 is
layer 2's plus one layer's update: fc [W0 W1 W2 W3] [h0 h1 h2 h3] ~ [W0 W1 W2+W3] [h0 h1
h2]). Everything else is copied byte for byte. The fold is one float32 addition per
weight, which rounds the same on every CPU, and the files are written in a fixed layout,
so the build is bit for bit: `build_capturable_draft` remakes the shipped
`tiny/draft-capturable/` exactly, and `verify_capturable` checks it against its manifest
(`MANIFEST.json`: the source draft's sha256 and each file's).

Torch-free (numpy reads and writes the safetensors file): the harness process may run it.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np

from harness.builds import file_sha256
from harness.errors import EngineError

TINY = Path(__file__).resolve().parent / "tiny"
SOURCE = TINY / "draft"
SHIPPED = TINY / "draft-capturable"
MANIFEST = "MANIFEST.json"
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
COPIED = ("tokenizer.json", "tokenizer_config.json")
_DTYPES = {"F32": "<f4"}


def capturable_layers(target_layer_ids: list[int], target_layers: int) -> list[int]:
    """The target layers SGLang can capture: every one but the target's last."""
    kept = [i for i in target_layer_ids if i < target_layers - 1]
    if not kept:
        raise EngineError(f"draft reads only the target's last layer ({target_layer_ids})")
    return kept


def read_safetensors(path: Path) -> dict[str, object]:
    """name -> numpy array (float32 tensors only: the tiny checkpoints hold no other)."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors: dict[str, object] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise EngineError(f"{path}: tensor {name} is {info['dtype']}, not float32")
        start, end = info["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], dtype=_DTYPES[info["dtype"]]).reshape(
            info["shape"])
    return tensors


def write_safetensors(path: Path, tensors: dict[str, object]) -> None:
    """The safetensors layout in a fixed form: names sorted, data in that order, the
    header JSON compact and padded with spaces to 8 bytes (the same bytes every time)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    chunks, offset = [], 0
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name], dtype="<f4")
        raw = array.tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def derive(source: Path, out: Path) -> None:
    """Write the capturable draft derived from the DFlash draft in `source` into `out`."""
    config = json.loads((source / "config.json").read_text())
    ids = list(config["dflash_config"]["target_layer_ids"])
    kept = capturable_layers(ids, int(config["num_target_layers"]))
    tensors = read_safetensors(source / "model.safetensors")
    fc = tensors["fc.weight"]
    hidden = int(config["hidden_size"])
    if fc.shape != (hidden, hidden * len(ids)):
        raise EngineError(f"{source}: fc.weight is {fc.shape}, expected "
                          f"({hidden}, {hidden * len(ids)}) for target layers {ids}")
    blocks = {layer: fc[:, n * hidden:(n + 1) * hidden] for n, layer in enumerate(ids)}
    folded = {layer: blocks[layer].copy() for layer in kept}
    for layer in ids:
        if layer not in kept:  # into the nearest kept layer below it
            into = max(k for k in kept if k < layer)
            folded[into] = np.add(folded[into], blocks[layer], dtype=np.float32)
    tensors["fc.weight"] = np.concatenate([folded[layer] for layer in kept], axis=1)
    config["dflash_config"] = {**config["dflash_config"], "target_layer_ids": kept}
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", tensors)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    for name in COPIED:
        shutil.copyfile(source / name, out / name)


def manifest(folder: Path, source: Path = SOURCE) -> dict[str, object]:
    return {"source": {f"draft/{name}": file_sha256(source / name)
                       for name in ("config.json", "model.safetensors")},
            "files": {name: file_sha256(folder / name) for name in FILES
                      if (folder / name).is_file()}}


def build_capturable_draft(out: Path = SHIPPED, source: Path = SOURCE) -> Path:
    """Derive the draft into `out` (the shipped folder by default) with its manifest."""
    out = out.resolve()
    staging = Path(tempfile.mkdtemp(prefix=".capturable-", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the shipped folder is not
    try:
        derive(source, staging)
        (staging / MANIFEST).write_text(
            json.dumps(manifest(staging, source), indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def verify_capturable(folder: Path = SHIPPED, source: Path = SOURCE) -> list[str]:
    """Differences between the shipped draft, its manifest, and a fresh derivation from
    the shipped source draft ([] when all three agree)."""
    if not (folder / MANIFEST).is_file():
        return [f"{folder / MANIFEST} is missing"]
    expected = json.loads((folder / MANIFEST).read_text())
    problems = []
    with tempfile.TemporaryDirectory(prefix="harness-capturable-") as scratch:
        rebuilt = Path(scratch) / "draft"
        derive(source, rebuilt)
        fresh = manifest(rebuilt, source)
    shipped = manifest(folder, source)
    for part in ("source", "files"):
        for name in sorted(set(expected[part]) | set(fresh[part]) | set(shipped[part])):
            values = {expected[part].get(name), fresh[part].get(name), shipped[part].get(name)}
            if len(values) != 1:
                problems.append(f"{part} {name}: manifest {expected[part].get(name)}, "
                                f"rebuilt {fresh[part].get(name)}, shipped "
                                f"{shipped[part].get(name)}")
    return problems


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["verify"]:
        found = verify_capturable()
        print("\n".join(found) or f"{SHIPPED}: matches its manifest and a fresh build")
        raise SystemExit(1 if found else 0)
    print(build_capturable_draft(Path(sys.argv[1]) if sys.argv[1:] else SHIPPED))
