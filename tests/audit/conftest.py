"""Draft configs shaped like the published DFlash drafts, and the cached SGLang wheels."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.audit.source import cached_archive

REPO_ROOT = Path(__file__).resolve().parents[2]
WHEEL_VERSIONS = ("0.5.17", "0.5.23")


def wheels_dir() -> Path:
    """Where `nox -s tests` puts the wheels (fetch_wheels); tests never download."""
    return Path(os.environ.get("HARNESS_SGLANG_WHEELS", REPO_ROOT / ".cache" / "sglang-wheels"))


def wheel_for(version: str) -> Path:
    archive = cached_archive(version, wheels_dir())
    if archive is None:
        pytest.skip(
            f"sglang {version} wheel not in {wheels_dir()} (set HARNESS_SGLANG_WHEELS, or run "
            "`nox -s tests`, which fetches it with harness.audit.source.fetch_wheels)"
        )
    return archive


def gemma4_dflash() -> dict[str, Any]:
    """Like z-lab/gemma-4-31B-it-DFlash: 4 sliding + 1 full, window 2048, no is_causal."""
    return {
        "architectures": ["DFlashDraftModel"],
        "num_hidden_layers": 5,
        "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
        "sliding_window": 2048,
        "dflash_config": {"block_size": 16},
    }


def muse_glimmer_assistant() -> dict[str, Any]:
    """Like Muse Glimmer's DFlash assistant: declares is_causal false."""
    return {
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "sliding_window": 2048,
        "is_causal": False,
    }


def qwen3_8b_dflash() -> dict[str, Any]:
    """Like z-lab/Qwen3-8B-DFlash-b16: all full attention, no is_causal."""
    return {
        "architectures": ["DFlashDraftModel"],
        "num_hidden_layers": 5,
        "layer_types": ["full_attention"] * 5,
        "sliding_window": None,
        "block_size": 16,
    }


def dflash2_draft() -> dict[str, Any]:
    """A DFlash 2 draft: every layer sliding, is_causal false."""
    return {
        "num_hidden_layers": 4,
        "layer_types": ["sliding_attention"] * 4,
        "sliding_window": 4096,
        "is_causal": False,
    }


def nested_text_config() -> dict[str, Any]:
    """A multimodal wrapper: the attention fields live in text_config."""
    return {
        "architectures": ["DFlashDraftModel"],
        "text_config": {
            "num_hidden_layers": 3,
            "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
            "sliding_window": 1024,
            "is_causal": True,
        },
    }


@pytest.fixture
def write_config(tmp_path: Path):
    def write(config: Any, name: str = "config.json") -> Path:
        path = tmp_path / name
        path.write_text(config if isinstance(config, str) else json.dumps(config))
        return path

    return write
