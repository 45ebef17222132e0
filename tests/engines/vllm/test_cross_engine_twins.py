"""Cross-engine pieces that need no engine: the paired suites, the uniform draft, the
cross-engine comparison's labels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands.ab import _same_workloads
from harness.errors import BadInput
from harness.suite.model import load_suite
from reference_engine.checkpoints import (
    SHIPPED_DIR,
    draft_files_sha256,
    uniform_draft,
)
from tests.shared import bare_environment

ROOT = Path(__file__).resolve().parents[3]


def test_the_reference_twin_of_the_vllm_suite_sends_the_same_workload() -> None:
    _same_workloads(load_suite("tiny_dflash_reference_uniform_cpu"),
                    load_suite("tiny_dflash_vllm_cpu"))
    with pytest.raises(BadInput, match="workloads differ"):
        _same_workloads(load_suite("tiny_dflash_cpu"), load_suite("tiny_dflash_vllm_cpu"))


def test_uniform_draft_is_the_same_bytes_on_every_rebuild(tmp_path: Path) -> None:
    target, first = uniform_draft("sliding", tmp_path / "a")
    _, second = uniform_draft("sliding", tmp_path / "b")
    assert target == SHIPPED_DIR / "target"
    assert draft_files_sha256(first) == draft_files_sha256(second)
    # the weights are the shipped draft's; only the layer types changed
    assert draft_files_sha256(first)["draft"] == draft_files_sha256(SHIPPED_DIR / "draft")["draft"]
    config = json.loads((first / "config.json").read_text())
    assert config["layer_types"] == ["sliding_attention"] * 5
    _, full = uniform_draft("full", tmp_path / "a")
    assert set(json.loads((full / "config.json").read_text())["layer_types"]) == \
        {"full_attention"}


@pytest.mark.parametrize("suite", ["tiny_dflash_reference_uniform_cpu", "tiny_dflash_vllm_cpu"])
def test_both_twins_serve_the_uniform_draft(suite: str, tmp_path: Path) -> None:
    env = bare_environment(PYTHONPATH=str(ROOT), HARNESS_CACHE=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "harness", "run", suite, "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert str(tmp_path / "reference" / "uniform-sliding-") in done.stdout


@pytest.mark.parametrize("suite", ["qwen3_8b_dflash_vllm", "gemma4_dflash_31b_vllm"])
def test_gpu_vllm_suites_print_their_command_and_skip_here(suite: str, tmp_path: Path) -> None:
    env = bare_environment(PYTHONPATH=str(ROOT), HARNESS_CACHE=str(tmp_path))
    dry = subprocess.run([sys.executable, "-m", "harness", "run", suite, "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=120, check=False)
    assert "/bin/vllm serve " in dry.stdout and "--per-request-spec-decode-metrics detailed" \
        in dry.stdout
    assert '"method":"dflash"' in dry.stdout
    run = subprocess.run([sys.executable, "-m", "harness", "run", suite, "--results",
                          str(tmp_path / "results")], capture_output=True, text=True, env=env,
                         timeout=120, check=False)
    assert run.returncode == 4, run.stderr
