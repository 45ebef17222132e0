"""The draft's contract as data (harness/suite/draft_contract.py): what a checkpoint
declares, what a suite may expect, and differences named by clause. No engine needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.suite.attention import DraftConfigError
from harness.suite.draft_contract import (
    Clause,
    clause_differences,
    declared_contract,
    expectation_from_declared,
    validate_draft_config,
    validate_expected_contract,
)

CORPUS = Path(__file__).with_name("corpus")


def corpus_config(name: str) -> dict:
    return json.loads((CORPUS / name / "config.json").read_text())


def test_declared_taps_are_layer_outputs_plus_one_in_declared_order() -> None:
    declared = declared_contract(corpus_config("specforge-qwen3-8b-dflash"))
    assert declared["taps"] == Clause((2, 10, 18, 26, 34), "dflash_config.target_layer_ids",
                                      note="target_layer_ids [1, 9, 17, 25, 33] + 1")
    assert declared["block_size"].value == 16 and declared["block_size"].source == "block_size"
    assert declared["mask_token_id"].source == "dflash_config.mask_token_id"
    assert declared["fc_input_width"].value == 5 * 4096
    assert declared["mask_token"] is None and declared["embeddings"] is None


def test_top_level_taps_and_nemotron_borrowing_are_declared() -> None:
    muse = declared_contract(corpus_config("zlab-muse-glimmer-assistant"))
    assert muse["taps"].value == (2, 14, 26, 38, 50)
    assert muse["taps"].source == "target_layer_ids"
    nemotron = declared_contract(corpus_config("nemotron-3.5-dflash"))
    assert nemotron["embeddings"].value == "draft" and nemotron["lm_head"].value == "target"


def test_a_draft_without_taps_declares_none() -> None:
    declared = declared_contract(corpus_config("seed-gemma-4-31b-it-dflash"))
    assert declared["taps"] is None and declared["fc_input_width"] is None


@pytest.mark.parametrize(("change", "field"), [
    ({"dflash_config": {"block_size": -4}}, "dflash_config.block_size"),
    ({"block_size": "16"}, "block_size"),
    ({"block_size": True}, "block_size"),
    ({"dflash_config": {"target_layer_ids": [1, 99]}, "num_target_layers": 36},
     "dflash_config.target_layer_ids[1]"),
    ({"dflash_config": {"target_layer_ids": "1,2"}}, "dflash_config.target_layer_ids"),
    ({"dflash_config": {"target_layer_ids": []}}, "dflash_config.target_layer_ids"),
    ({"dflash_config": {"target_layer_ids": [-1]}}, "dflash_config.target_layer_ids[0]"),
    ({"mask_token": ""}, "mask_token"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"dflash_config": [1]}, "dflash_config"),
    ({"layer_types": "sliding_attention"}, "layer_types"),
    ({"is_causal": "false"}, "is_causal"),
    ({"sliding_window": 0}, "sliding_window"),
])
def test_a_malformed_contract_field_is_refused_by_name(change: dict, field: str) -> None:
    config = {**corpus_config("tiny-draft-capturable"), **change}
    with pytest.raises(DraftConfigError, match="draft config " + re.escape(field)):
        validate_draft_config(config)


@pytest.mark.parametrize("value", ["2", 2.0, -1, True, [2]])
def test_a_mask_token_id_of_any_type_is_left_to_the_engine(value: object) -> None:
    """Its type and sign are SGLang's own check (parse_dflash_draft_config, every audited
    release): loaded, shown as declared, judged by each release's code
    (test_audit_messages)."""
    config = {**corpus_config("tiny-draft-capturable"),
              "dflash_config": {"mask_token_id": value}}
    validate_draft_config(config)
    declared = declared_contract(config)["mask_token_id"]
    assert declared is not None and declared.source == "dflash_config.mask_token_id"
    assert declared.value == (value if value == -1 else repr(value))


def test_every_corpus_draft_is_well_formed() -> None:
    for folder in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        validate_draft_config(json.loads((folder / "config.json").read_text()))


def test_expected_contract_is_validated_by_clause() -> None:
    assert validate_expected_contract("declared") == "declared"
    assert validate_expected_contract({"taps": [1, 2], "lm_head": "target"}) == {
        "taps": (1, 2), "lm_head": "target"}
    for bad, named in [({"tap": [1]}, "unknown clauses"), ({"taps": []}, "taps"),
                       ({"block_size": 0}, "block_size"), ({"embeddings": "mine"}, "embeddings"),
                       ({"mask_token_id": "2"}, "mask_token_id"), ([1], "table")]:
        with pytest.raises(DraftConfigError, match=named):
            validate_expected_contract(bad)


def test_differences_name_the_clause_and_a_missing_figure_is_one() -> None:
    resolved = {"taps": Clause((0, 1, 2), "dflash_config"),
                "block_size": Clause(None, error="ValueError: DFLASH block_size must be ..."),
                "mask_token_id": Clause(None, "tokenizer", note="no tokenizer given"),
                "draft_layers": Clause(5, "num_hidden_layers")}
    expected = {"taps": (1, 2, 3), "block_size": 8, "mask_token_id": 2, "draft_layers": 5,
                "lm_head": "target"}
    lines = clause_differences(expected, resolved, "sglang 0.5.23")
    assert lines == [
        "taps: expected [1,2,3], sglang 0.5.23 resolves [0,1,2] (from dflash_config)",
        "block_size: expected 8, sglang 0.5.23 refuses: ValueError: DFLASH block_size must "
        "be ...",
        "mask_token_id: expected 2, sglang 0.5.23 resolved none (no tokenizer given)",
        "lm_head: expected target, sglang 0.5.23 resolved none",
    ]


def test_declared_expectation_is_every_declared_clause() -> None:
    expected = expectation_from_declared(corpus_config("tiny-draft-capturable"))
    assert expected == {"taps": (1, 2, 3), "block_size": 8, "mask_token_id": 2,
                        "draft_layers": 5, "fc_input_width": 384}


@pytest.mark.parametrize(("old", "new", "hint"), [
    ("expected_contract = { taps = [1, 2, 3],", "expected_contract = { tap = [1, 2, 3],",
     "unknown clauses ['tap']"),
    ("block_size = 8, mask_token_id", "block_size = 0, mask_token_id",
     "expected_contract.block_size must be an integer from 1"),
    ('lm_head = "target" }', 'lm_head = "mine" }', 'lm_head must be "target" or "draft"'),
])
def test_a_suites_expected_contract_is_validated_naming_the_clause(
        tmp_path: Path, old: str, new: str, hint: str) -> None:
    from harness.errors import SuiteError
    from harness.suite.model import load_suite

    text = (Path(__file__).parents[2] / "suites" / "tiny_dflash_sglang_cpu.toml").read_text()
    assert old in text
    path = tmp_path / "tiny_dflash_sglang_cpu.toml"
    path.write_text(text.replace(old, new))
    with pytest.raises(SuiteError) as raised:
        load_suite(path)
    assert "draft.expected_contract" in raised.value.message and hint in raised.value.message


def test_the_shipped_cpu_suite_expects_every_clause() -> None:
    from harness.suite.model import load_suite

    expected = load_suite("tiny_dflash_sglang_cpu").suite.draft.expected_contract
    assert expected == {"taps": (1, 2, 3), "block_size": 8, "mask_token_id": 2,
                        "draft_layers": 5, "fc_input_width": 384, "embeddings": "target",
                        "lm_head": "target"}
