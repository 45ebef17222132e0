"""Preflight of an SGLang run checks the draft's attention contract with the build's own code.

The engine environment is the SGLang test double, with the resolver files of a real SGLang
wheel (0.5.17 or 0.5.23, from the cache `nox -s tests` fills) laid in beside it, so the
contract is evaluated from that version's source exactly as on a GPU host.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zipfile
from pathlib import Path

import pytest

from harness.audit.extract import LOADER_COMMON, LOADER_FILE
from harness.audit.source import PATCHES_FILE, RESOLVER_FILES, VERSION_FILE
from harness.cli import main
from tests.audit.conftest import wheel_for
from tests.fixtures.sglang_double import FAKE_SGLANG


def engine_with_resolver(tmp_path: Path, version: str) -> Path:
    """A copy of the test double whose `sglang/` also holds that version's resolver, config
    loading and transformers-patch files, and its dist-info (the transformers it pins)."""
    root = tmp_path / f"sglang-{version}"
    shutil.copytree(FAKE_SGLANG, root)
    with zipfile.ZipFile(wheel_for(version)) as wheel:
        names = (*RESOLVER_FILES, VERSION_FILE, PATCHES_FILE, LOADER_FILE, LOADER_COMMON)
        for name in names:
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(wheel.read(name))
        metadata = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        (root / metadata).parent.mkdir(parents=True, exist_ok=True)
        (root / metadata).write_bytes(wheel.read(metadata))  # its transformers pin
    return root


def draft_declaring_not_causal(tmp_path: Path) -> Path:
    """4 sliding + 1 full layers with `is_causal: false` (a Muse-Glimmer-style draft)."""
    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "qwen3", "use_sliding_window": True,
        "num_hidden_layers": 5, "sliding_window": 2048, "is_causal": False,
        "layer_types": ["sliding_attention"] * 4 + ["full_attention"]}))
    # A safetensors file holding no tensors: the checkpoint check wants weights to be there.
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    return folder


def suite_expecting_fixed(tmp_path: Path, draft: Path) -> Path:
    # Since the fix (0.5.18+) an explicit is_causal = false wins on every layer.
    layers = ", ".join(["{ causal = false, window = 2048 }"] * 4 + ["{ causal = false }"])
    path = tmp_path / "contract.toml"
    path.write_text(f"""
name = "contract_check"
[engine]
kind = "sglang"
launch_timeout_s = 180  # a loaded 2-core CI host: the double is up in seconds when idle
[target]
model = "google/gemma-4-31B-it"
[draft]
model = "{draft}"
expected_layers = [{layers}]
[speculative]
num_draft_tokens = 16
[topology]
gpus = 1
[workload]
questions = 4
concurrency = 2
max_tokens = 32
[floors]
accept_length = 1.0
""")
    return path


@pytest.fixture
def use_engine(monkeypatch: pytest.MonkeyPatch, fake_env: dict[str, str]):
    def use(root: Path) -> None:
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ["PYTHONPATH"]]))

    return use


def test_legacy_build_fails_preflight_naming_the_layers(
    tmp_path: Path, use_engine, capsys: pytest.CaptureFixture[str]
) -> None:
    use_engine(engine_with_resolver(tmp_path, "0.5.17"))
    suite = suite_expecting_fixed(tmp_path, draft_declaring_not_causal(tmp_path))
    results = tmp_path / "results"
    assert main(["run", str(suite), "--results", str(results), "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "draft contract differs" in out
    for layer in range(4):
        assert f"layer {layer}: expected bidirectional, got causal" in out
    run_dir = next(results.glob("runs/contract_check/*/run.json")).parent
    assert not (run_dir / "server.log").exists(), "preflight must stop before any launch"
    record = json.loads((run_dir / "run.json").read_text())
    assert [layer["causal"] for layer in record["attention"]] == [True] * 4 + [False]


def test_fixed_build_passes_preflight_and_records_the_table(tmp_path: Path, use_engine) -> None:
    use_engine(engine_with_resolver(tmp_path, "0.5.23"))
    suite = suite_expecting_fixed(tmp_path, draft_declaring_not_causal(tmp_path))
    results = tmp_path / "results"
    assert main(["run", str(suite), "--results", str(results), "--no-progress",
                 "--no-plot"]) == 0
    record = json.loads(next(results.glob("runs/contract_check/*/run.json")).read_text())
    assert [layer["causal"] for layer in record["attention"]] == [False] * 5
    assert all(layer["explicit"] for layer in record["attention"])
