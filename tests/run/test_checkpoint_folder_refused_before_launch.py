"""A local checkpoint folder is checked before any build or launch: exit 2 naming the file
and the field, never a traceback (harness/run/checkpoint_folder.py)."""

from __future__ import annotations

import contextlib
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import BadInput
from harness.run.checkpoint_folder import check_folder
from reference_engine.checkpoints import SEED_DIR

TINY = Path("reference_engine/tiny")
SHIPPED = [TINY / "target", TINY / "draft", TINY / "draft-capturable",
           *(SEED_DIR / pair / role for pair in ("gemma4", "muse_glimmer")
             for role in ("target", "draft"))]


def _write_weights(path: Path, shapes: dict[str, list[int]]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in shapes.items():
        size = 4
        for dim in shape:
            size *= dim
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * offset)


def _folder(tmp_path: Path, config: dict, shapes: dict[str, list[int]]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    _write_weights(folder / "model.safetensors", shapes)
    return folder


CONFIG = {"model_type": "qwen3", "hidden_size": 8, "intermediate_size": 16,
          "num_hidden_layers": 2, "vocab_size": 10}
SHAPES = {"model.embed_tokens.weight": [10, 8], "model.layers.1.mlp.up_proj.weight": [16, 8],
          "model.layers.1.mlp.down_proj.weight": [8, 16],
          "model.layers.0.self_attn.q_proj.weight": [12, 8],
          "model.layers.0.input_layernorm.weight": [8]}


@pytest.mark.parametrize("folder", SHIPPED, ids=str)
def test_every_shipped_checkpoint_passes(folder: Path) -> None:
    check_folder(folder, "target")


def test_a_consistent_folder_passes(tmp_path: Path) -> None:
    check_folder(_folder(tmp_path, CONFIG, SHAPES), "target")


@pytest.mark.parametrize(("change", "message"), [
    ({"intermediate_size": 12},
     "mlp.up_proj.weight is [16, 8]; config.json intermediate_size says 12"),
    ({"hidden_size": 6}, "is [10, 8]; config.json hidden_size says 6"),
    ({"vocab_size": 11}, "embed_tokens.weight is [10, 8]; config.json vocab_size says 11"),
    ({"num_hidden_layers": 1}, "model.layers.1.mlp.up_proj.weight is layer 1, but "
                               "num_hidden_layers says 1"),
])
def test_a_shape_the_config_contradicts_is_named(tmp_path: Path, change: dict,
                                                  message: str) -> None:
    folder = _folder(tmp_path, {**CONFIG, **change}, SHAPES)
    with pytest.raises(BadInput, match=r"config\.json") as raised:
        check_folder(folder, "draft")
    assert message in str(raised.value)
    assert str(folder / "model.safetensors") in str(raised.value)


def test_a_dflash_projection_must_read_its_target_layers(tmp_path: Path) -> None:
    config = {**CONFIG, "dflash_config": {"target_layer_ids": [0, 1, 2]}}
    folder = _folder(tmp_path, config, {"fc.weight": [8, 16]})
    with pytest.raises(BadInput, match=r"fc\.weight is \[8, 16\]; config.json hidden_size x "
                                       r"len\(target_layer_ids\) says 24"):
        check_folder(folder, "draft")


def test_a_nested_text_config_is_the_one_checked(tmp_path: Path) -> None:
    config = {"model_type": "gemma4", "text_config": {**CONFIG, "hidden_size": 9}}
    folder = _folder(tmp_path, config, {"model.language_model.embed_tokens.weight": [10, 8],
                                        "model.vision_tower.encoder.layers.7.mlp.up_proj.weight":
                                            [3, 3]})
    with pytest.raises(BadInput, match="hidden_size says 9"):
        check_folder(folder, "target")


@pytest.mark.parametrize(("damage", "message"), [
    (lambda f: (f / "config.json").unlink(), "config.json is missing"),
    (lambda f: (f / "model.safetensors").unlink(), "no weights"),
    (lambda f: (f / "config.json").write_text("{"), "not a readable JSON config"),
    (lambda f: (f / "config.json").write_text("[]"), "a config is a JSON object, got list"),
    (lambda f: (f / "config.json").write_text('{"hidden_size": 8}'), "model_type is missing"),
    (lambda f: (f / "model.safetensors").write_bytes(b"\x01"), "not a safetensors file"),
    (lambda f: (f / "model.safetensors").write_bytes(struct.pack("<Q", 2**40)),
     "header length 1099511627776 is not plausible"),
])
def test_a_broken_folder_is_named(tmp_path: Path, damage, message: str) -> None:
    folder = _folder(tmp_path, CONFIG, SHAPES)
    damage(folder)
    with pytest.raises(BadInput, match=message):
        check_folder(folder, "target")


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=64))
def test_any_bytes_as_weights_end_in_bad_input(tmp_path: Path, data: bytes) -> None:
    folder = _folder(tmp_path, CONFIG, SHAPES)
    (folder / "model.safetensors").write_bytes(data)
    try:
        check_folder(folder, "target")
    except BadInput:
        return
    raise AssertionError(f"{data!r} was taken as a safetensors file")


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=20))
def test_any_json_as_a_header_or_config_never_crashes(tmp_path: Path, value) -> None:
    folder = _folder(tmp_path, CONFIG, SHAPES)
    text = json.dumps(value).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text)
    with contextlib.suppress(BadInput):
        check_folder(folder, "target")
    (folder / "config.json").write_text(json.dumps(value))
    _write_weights(folder / "model.safetensors", SHAPES)
    with contextlib.suppress(BadInput):
        check_folder(folder, "target")


def test_harness_run_refuses_it_before_any_build(tmp_path: Path) -> None:
    """`harness run` with a draft whose config contradicts its weights: exit 2, the file
    and the field named, no traceback, nothing built or launched."""
    draft = tmp_path / "draft"
    shutil.copytree(SEED_DIR / "muse_glimmer" / "draft", draft)
    config = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**config, "intermediate_size": 256}))
    done = subprocess.run(
        [sys.executable, "-m", "harness", "run", "muse_glimmer_dflash_sglang_cpu",
         "--draft-model", str(draft), "--results", str(tmp_path / "results"),
         "--no-progress"], capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "HARNESS_SGLANG_DEVICE": "cpu",
             "HARNESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "config.json intermediate_size says 256" in done.stderr
    assert str(draft / "model.safetensors") in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cache").exists()
