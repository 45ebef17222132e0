"""Issue 31: `tiny_standalone_sglang_cpu` runs from its README line: the harness cuts the
tiny causal draft bit for bit into its cache (`$HARNESS_TINY_CAUSAL_DRAFT` still wins)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import main
from harness.suite.model import load_suite
from reference_engine.causal_draft import (
    SHIPPED_SHA256,
    causal_draft,
    draft_hashes,
    verify_causal_draft,
)

OPTIONS = SimpleNamespace(target_model=None, draft_model=None)


def test_the_draft_is_cut_bit_for_bit_once(tmp_path: Path) -> None:
    folder = causal_draft(tmp_path)
    assert folder.parent == tmp_path / "reference"
    assert draft_hashes(folder) == SHIPPED_SHA256  # the same bytes on every machine
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert causal_draft(tmp_path) == folder  # reused, not rewritten
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert not [p for p in (tmp_path / "reference").iterdir() if ".building-" in p.name]
    raw = (folder / "model.safetensors").read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    layers = {name.split(".")[2] for name in json.loads(raw[8:8 + size])
              if name.startswith("model.layers.")}
    assert layers == {"0", "1"}
    assert json.loads((folder / "config.json").read_text())["num_hidden_layers"] == 2
    assert verify_causal_draft() == []


def test_the_suite_serves_it_unless_the_variable_names_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run.plan import models

    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.delenv("HARNESS_TINY_CAUSAL_DRAFT", raising=False)
    suite = load_suite("tiny_standalone_sglang_cpu").suite
    served = models(suite, OPTIONS)
    assert served is not None and Path(served.draft) == causal_draft(tmp_path)
    monkeypatch.setenv("HARNESS_TINY_CAUSAL_DRAFT", "/models/mine")
    assert models(suite, OPTIONS).draft == "/models/mine"
    assert models(suite, SimpleNamespace(target_model=None,
                                         draft_model="/models/flag")).draft == "/models/flag"


def test_an_unknown_tiny_name_is_bad_input(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parents[2] / "suites" /
            "tiny_standalone_sglang_cpu.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('"tiny:causal"', '"tiny:casual"'))
    assert main(["validate", str(bad)]) == 2
    assert "'tiny:casual': the harness makes no such checkpoint; known: tiny:causal" in \
        capsys.readouterr().err


def test_the_dry_run_names_the_draft_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path))
    monkeypatch.setenv("HARNESS_SGLANG_DEVICE", "cpu")
    monkeypatch.delenv("HARNESS_TINY_CAUSAL_DRAFT", raising=False)
    assert main(["run", "tiny_standalone_sglang_cpu", "--dry-run", "--sglang",
                 "sglang==0.5.23"]) == 0
    out = capsys.readouterr().out
    assert f"--speculative-draft-model-path {causal_draft(tmp_path)} " in out
    assert "draft      $HARNESS_TINY_CAUSAL_DRAFT when set, else tiny:causal" in out
