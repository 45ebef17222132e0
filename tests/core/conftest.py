"""Shared helpers for the core-stage tests: shipped suites, a minimal valid suite, a clean env."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SUITES_DIR = REPO_ROOT / "suites"
SHIPPED_SUITES = sorted(SUITES_DIR.glob("*.toml"))
GSM8K_TEST = REPO_ROOT.parent / "shared" / "data" / "gsm8k" / "test.jsonl"

# The smallest document that validates: a CPU reference-engine suite.
MINIMAL_SUITE = """\
name = "tiny"

[engine]
kind = "reference"

[topology]
gpus = 0

[floors]
accept_length = 2.0
"""

# A complete sglang suite used as the seed of mutations (every section present).
FULL_SGLANG_SUITE = """\
name = "full_sglang"
description = "a complete sglang suite"
nightly = false

[engine]
kind = "sglang"
default_build = "sglang==0.5.23"
launch_timeout_s = 600
extra_args = ["--trust-remote-code"]
env = { SGLANG_FOO = "1" }

[target]
model = "org/target"
revision = "main"

[draft]
model = "org/draft"
expected_layers = [{ causal = true, window = 2048 }, { causal = false }]

[speculative]
algorithm = "DFLASH"
num_draft_tokens = 16
block_size = 16
draft_attention_backend = "flashinfer"

[topology]
gpus = 2
gpu_types = ["H100"]
min_memory_gib = 80
tp_size = 2

[workload]
kind = "gsm8k"
questions = 200
shots = 5
max_tokens = 512
concurrency = 128
temperature = 0.0
top_p = 1.0
seed = 0

[floors]
accept_length = 5.4
accuracy = 0.75
strict = false

[[baselines]]
label = "post-fix"
accept_length = 5.62
source = "somewhere"
external = true
"""


@pytest.fixture
def no_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This host as the harness sees it: no simulated inventory and no nvidia-smi."""
    import shutil

    real_which = shutil.which
    monkeypatch.delenv("HARNESS_GPU_INVENTORY", raising=False)

    def which(name: str, *args: object, **kwargs: object) -> str | None:
        return None if name == "nvidia-smi" else real_which(name, *args, **kwargs)

    monkeypatch.setattr(shutil, "which", which)


@pytest.fixture
def harness_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE", str(cache))
    return cache
