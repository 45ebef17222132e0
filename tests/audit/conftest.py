"""Draft configs shaped like the published DFlash drafts, the cached SGLang wheels, and the
transformers environments the version tests build configs in."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.audit.wheels import cached_archive

REPO_ROOT = Path(__file__).resolve().parents[2]
# Every release the audit tests read; `nox -s tests` fetches them (noxfile AUDITED_SGLANG).
RELEASES = ("0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23")
WHEEL_VERSIONS = RELEASES


def wheels_dir() -> Path:
    """Where `nox -s tests` puts the wheels (fetch_wheels); tests never download."""
    return Path(os.environ.get("HARNESS_SGLANG_WHEELS", REPO_ROOT / ".cache" / "sglang-wheels"))


def wheel_for(version: str) -> Path:
    archive = cached_archive(version, wheels_dir())
    if archive is None:
        pytest.skip(
            f"sglang {version} wheel not in {wheels_dir()} (set HARNESS_SGLANG_WHEELS, or run "
            "`nox -s tests`, which fetches it with harness.audit.wheels.fetch_wheels)"
        )
    return archive


def gemma4_dflash() -> dict[str, Any]:
    """Like z-lab/gemma-4-31B-it-DFlash: 4 sliding + 1 full, window 2048, no is_causal.

    A Qwen3-architecture draft (as the DFlash reference code builds them), so transformers
    keeps the window only with use_sliding_window true.
    """
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "use_sliding_window": True,
        "num_hidden_layers": 5,
        "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
        "sliding_window": 2048,
        "dflash_config": {"block_size": 16},
    }


def muse_glimmer_assistant() -> dict[str, Any]:
    """Like Muse Glimmer's DFlash assistant: declares is_causal false."""
    return {
        "model_type": "qwen3",
        "use_sliding_window": True,
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "sliding_window": 2048,
        "is_causal": False,
    }


def qwen3_8b_dflash() -> dict[str, Any]:
    """Like z-lab/Qwen3-8B-DFlash-b16: all full attention, no is_causal."""
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 5,
        "layer_types": ["full_attention"] * 5,
        "sliding_window": None,
        "block_size": 16,
    }


def dflash2_draft() -> dict[str, Any]:
    """A DFlash 2 draft: every layer sliding, is_causal false."""
    return {
        "model_type": "qwen3",
        "use_sliding_window": True,
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


def nemotron_35_draft() -> dict[str, Any]:
    """Like the Nemotron 3.5 DFlash draft: no top-level sliding_window, the window in
    dflash_config.swa_window_size; the fields SGLang's is_nemotron_35_draft_config checks."""
    return {
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 3,
        "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
        "has_embed_tokens": True,
        "has_lm_head": False,
        "quantization_config": {"quant_algo": "W4A16_NVFP4"},
        "eagle_aux_hidden_state_layer_ids": [2, 12, 22],
        "dflash_config": {
            "swa_window_size": 512,
            "target_layer_ids": [1, 11, 21],
            "sample_from_anchor": False,
            "block_size": 16,
        },
    }


def with_is_causal(config: dict[str, Any], value: bool | None) -> dict[str, Any]:
    return {**config, **({} if value is None else {"is_causal": value})}


@pytest.fixture(scope="session", autouse=True)
def fresh_audit_answers(tmp_path_factory):
    """Each test session evaluates for real: cached answers go to a session folder, shared
    by the session's xdist workers (an answer one worker evaluated, the other reads)."""
    from tests.shared import session_shared_dir

    before = os.environ.get("HARNESS_AUDIT_RESULTS")
    os.environ["HARNESS_AUDIT_RESULTS"] = str(session_shared_dir(tmp_path_factory,
                                                                 "audit-answers"))
    yield
    if before is None:
        os.environ.pop("HARNESS_AUDIT_RESULTS", None)
    else:
        os.environ["HARNESS_AUDIT_RESULTS"] = before


def transformers_env(requirement: str) -> Path:
    """The cached environment for this pin, made once (file-locked) or the test skips."""
    from harness.audit.envs import ensure_env
    from harness.errors import HarnessError

    try:
        return ensure_env(requirement)
    except HarnessError as error:
        pytest.skip(f"no {requirement} environment and it cannot be made here: {error.message}")


def release_sources(*versions: str) -> list[Any]:
    """The releases' sources from the wheel cache, their transformers environments ready."""
    from harness.audit.source import archive_source

    sources = [archive_source(wheel_for(version)) for version in versions]
    for requirement in sorted({source.transformers for source in sources}):
        transformers_env(requirement)
    return sources


@pytest.fixture
def write_config(tmp_path: Path):
    def write(config: Any, name: str = "config.json") -> Path:
        path = tmp_path / name
        path.write_text(config if isinstance(config, str) else json.dumps(config))
        return path

    return write
