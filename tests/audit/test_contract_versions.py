"""Every clause of published drafts' contracts, by each SGLang release's own code (the wheels
0.5.17-0.5.23 `nox -s tests` fetches), checked against the wheels' text read independently."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.audit.corpus import audit_corpus, load_corpus, sglang_columns
from harness.audit.findings import Column
from tests.audit.conftest import RELEASES, release_sources, wheel_for

CORPUS = Path(__file__).with_name("corpus")
# The drafts whose clauses differ between releases, and two that never do.
DRAFTS = ("tiny-draft-capturable", "specforge-qwen3-8b-dflash", "specforge-qwen2.5-0.5b-dflash",
          "specforge-lfm2.5-1.2b-instruct-dflash", "zlab-dflash2-muse-glimmer",
          "zlab-muse-glimmer-assistant", "nemotron-3.5-dflash", "seed-gemma-4-31b-it-dflash")


@pytest.fixture(scope="module")
def columns(tmp_path_factory) -> dict[str, dict[str, Column]]:
    """Each draft's column per release, every release in one batch."""
    from filelock import FileLock

    from tests.shared import session_shared_dir

    drafts = [d for d in load_corpus(CORPUS) if d.name in DRAFTS]
    sources = release_sources(*RELEASES)
    with FileLock(str(session_shared_dir(tmp_path_factory, "audit-answers") / "corpus.lock")):
        found = sglang_columns(drafts, sources)
    return {d.name: dict(zip(RELEASES, row, strict=True)) for d, row in zip(drafts, found,
                                                                               strict=True)}


def value(column: Column, clause: str) -> Any:
    found = column.clause(clause)
    assert found is not None and found.error is None and found.limit is None, (clause, found)
    return found.value


def wheel_text(version: str, path: str) -> str:
    with zipfile.ZipFile(wheel_for(version)) as wheel:
        return wheel.read(path).decode()


def test_tiny_draft_every_clause_every_release(columns) -> None:
    for version, column in columns["tiny-draft-capturable"].items():
        # Read independently: Qwen3's capture adds one to each id ("before layer k + 1").
        assert "[val + 1 for val in layer_ids]" in wheel_text(version,
                                                              "sglang/srt/models/qwen3.py")
        assert value(column, "taps") == (1, 2, 3), version
        assert column.clause("taps").source == "dflash_config"
        assert value(column, "block_size") == 8
        assert column.clause("block_size").source == "top level"
        assert value(column, "mask_token_id") == 2
        assert value(column, "mask_token") == "<|MASK|>"
        assert column.clause("mask_token").source == "engine default"
        assert value(column, "draft_layers") == 5
        assert value(column, "fc_input_width") == 3 * 128
        assert value(column, "embeddings") == "target" and value(column, "lm_head") == "target"
        assert value(column, "attention") == "causal/16x4,bidir"


def test_muse_dflash2_draft_reads_one_layer_early_under_0_5_18(columns) -> None:
    """0.5.18 adds the Muse +1 only for MuseGlimmerAssistantModel drafts; from 0.5.19
    `_map_muse_target_layer_ids` adds it for DFlash2DraftModel too (read from the wheels)."""
    text_18 = wheel_text("0.5.18", "sglang/srt/model_executor/model_runner_components/"
                                   "spec_aux_hidden_state.py")
    text_19 = wheel_text("0.5.19", "sglang/srt/model_executor/model_runner_components/"
                                   "spec_aux_hidden_state.py")
    assert '"MuseGlimmerAssistantModel" in draft_architectures' in text_18
    assert '"DFlash2DraftModel"' not in text_18 and '"DFlash2DraftModel"' in text_19
    draft = columns["zlab-dflash2-muse-glimmer"]
    assert value(draft["0.5.18"], "taps") == (1, 13, 25, 37, 49)
    for version in RELEASES[2:]:
        assert value(draft[version], "taps") == (2, 14, 26, 38, 50), version
    assert draft["0.5.17"].clause("taps").error.startswith("TargetConfig")  # no muse_glimmer
    assistant = columns["zlab-muse-glimmer-assistant"]
    assert assistant["0.5.17"].refused is not None  # no muse_glimmer_assistant config class
    for version in RELEASES[1:]:
        assert value(assistant[version], "taps") == (2, 14, 26, 38, 50), version
        assert value(assistant[version], "attention") == "bidir/2048x5"


def test_a_target_without_a_capture_hook_is_refused_by_sglangs_own_message(columns) -> None:
    for version in RELEASES:
        taps = columns["specforge-qwen2.5-0.5b-dflash"][version].clause("taps")
        assert taps.error == ("ValueError: Model Qwen2ForCausalLM implements neither "
                              "set_dspark_layers_to_capture nor set_dflash_layers_to_capture, "
                              "one of which is required for DFLASH/DSPARK.")
    lfm2 = columns["specforge-lfm2.5-1.2b-instruct-dflash"]
    assert lfm2["0.5.18"].clause("taps").error is not None
    assert value(lfm2["0.5.19"], "taps") == (2, 5, 8, 11, 14)


def test_fallback_formula_when_no_taps_are_declared(columns) -> None:
    gemma = columns["seed-gemma-4-31b-it-dflash"]["0.5.23"]
    taps = gemma.clause("taps")
    assert taps.source == "fallback formula" and taps.value is None  # no target to capture
    # build_target_layer_ids(5 draft layers as the target count, 5): duplicates
    assert "[1, 1, 2, 2, 2]" in gemma.clause("fc_input_width").note
    assert gemma.clause("block_size").source == "dflash_config"


def test_nemotron_embeddings_and_early_refusals(columns) -> None:
    nemotron = columns["nemotron-3.5-dflash"]
    assert value(nemotron["0.5.23"], "embeddings") == "draft"
    assert value(nemotron["0.5.18"], "embeddings") == "target"
    assert "out-of-range layer id" in nemotron["0.5.17"].clause("fc_input_width").error
    # 3 taps x the hidden_size transformers' Qwen3Config fills in (the shape declares none)
    assert value(nemotron["0.5.18"], "fc_input_width") == 3 * 4096


def test_findings_flag_release_and_declaration_differences(columns) -> None:
    drafts = {d.name: d for d in load_corpus(CORPUS) if d.name in DRAFTS}
    audits = {a.draft.name: a for a in audit_corpus(
        [drafts[n] for n in DRAFTS], [list(columns[n].values()) for n in DRAFTS])}
    flags = {(f.clause, f.kind) for f in audits["zlab-dflash2-muse-glimmer"].flags}
    assert ("taps", "releases") in flags and ("taps", "declared") in flags
    assert not audits["specforge-qwen3-8b-dflash"].flags
    undeclared = {f.clause for f in audits["specforge-qwen3-8b-dflash"].found
                  if f.kind == "undeclared"}
    assert undeclared == {"attention", "mask_token", "embeddings", "lm_head"}
