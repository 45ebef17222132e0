"""The tiny DFlash draft SGLang can serve (reference_engine/capturable.py): derived
bit for bit from the shipped draft, reading only target layers SGLang captures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from harness.errors import EngineError
from reference_engine import capturable


def test_the_shipped_draft_is_its_build_bit_for_bit() -> None:
    assert capturable.verify_capturable() == []


def test_rebuilt_twice_the_same_bytes(tmp_path: Path) -> None:
    first = capturable.build_capturable_draft(tmp_path / "one")
    second = capturable.build_capturable_draft(tmp_path / "two")
    for name in (*capturable.FILES, capturable.MANIFEST):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
        assert (first / name).read_bytes() == (capturable.SHIPPED / name).read_bytes(), name


def test_it_reads_no_last_layer_and_folds_it_below() -> None:
    config = json.loads((capturable.SHIPPED / "config.json").read_text())
    target = json.loads((capturable.TINY / "target" / "config.json").read_text())
    ids = config["dflash_config"]["target_layer_ids"]
    assert ids == [0, 1, 2] and max(ids) < target["num_hidden_layers"] - 1
    source = capturable.read_safetensors(capturable.SOURCE / "model.safetensors")
    derived = capturable.read_safetensors(capturable.SHIPPED / "model.safetensors")
    hidden = config["hidden_size"]
    fc, old = derived["fc.weight"], source["fc.weight"]
    assert fc.shape == (hidden, 3 * hidden)
    assert np.array_equal(fc[:, :2 * hidden], old[:, :2 * hidden])
    assert np.array_equal(fc[:, 2 * hidden:], old[:, 2 * hidden:3 * hidden]
                          + old[:, 3 * hidden:])
    assert all(np.array_equal(source[k], derived[k]) for k in source if k != "fc.weight")


def test_a_tampered_draft_is_named(tmp_path: Path) -> None:
    copy = capturable.build_capturable_draft(tmp_path / "d")
    (copy / "config.json").write_text((copy / "config.json").read_text() + " ")
    [problem] = capturable.verify_capturable(copy)
    assert problem.startswith("files config.json: manifest ")


def test_a_draft_reading_only_the_last_layer() -> None:
    with pytest.raises(EngineError, match="only the target's last layer"):
        capturable.capturable_layers([3], 4)
    assert capturable.capturable_layers([0, 2, 3], 4) == [0, 2]
