"""The planted defects (tests/audit/planted.py) the static contract sees, judged as the
preflight judges them, without a launch: SGLang 0.5.23's wheel with each defect's patch (or
the edited draft, or the edited suite), audited against the tiny target served beside the
draft, compared with the suite's expected contract by the preflight's own function. A
configuration or resolver defect is named by its clause; a forward-time one changes
nothing here (the runtime record catches it: tests/sglang_dflash_cpu). docs/audit.md
("Planted defects") holds the table; every defect listed here is in it."""

from __future__ import annotations

import pytest

from harness.audit.evaluate import evaluate_many
from harness.audit.source import patched_source
from harness.audit.target import load_target
from harness.results.record import LayerRow
from harness.run.draft_attention import Preflight, contract_differences, served_clauses
from harness.suite.draft_contract import clause_differences
from harness.suite.model import load_suite
from tests.audit.conftest import REPO_ROOT, release_sources
from tests.audit.planted import DEFECTS, DRAFT, STATIC_LEVELS, SUITE, edited_draft, edited_suite

TARGET = REPO_ROOT / "reference_engine" / "tiny" / "target"
DOCS = REPO_ROOT / "docs" / "audit.md"


@pytest.fixture(scope="module")
def release():
    [source] = release_sources("0.5.23")
    return source


@pytest.fixture(scope="module")
def planted(release, tmp_path_factory: pytest.TempPathFactory):
    """name -> (the planted suite, the build's answer on the planted draft), every defect
    evaluated in one batch (one worker process for every patched tree and edited draft)."""
    out = tmp_path_factory.mktemp("planted")
    target = load_target(TARGET)
    setups = {}
    for name, defect in DEFECTS.items():
        folder = out / name
        source = release if defect.patch is None else patched_source(release, defect.patch)
        draft = edited_draft(defect.draft_edit, folder) if defect.draft_edit else DRAFT
        suite = edited_suite(defect.suite_edit, folder) if defect.suite_edit else SUITE
        setups[name] = (load_suite(suite).suite, draft / "config.json", source)
    configs = sorted({config for _, config, _ in setups.values()})
    sources = list({source.label: source for _, _, source in setups.values()}.values())
    answers = evaluate_many(configs, sources, targets=[target] * len(configs))
    found = {}
    for name, (suite, config, source) in setups.items():
        [result] = [r for r in answers[configs.index(config)]
                    if r.source.label == source.label]
        found[name] = (suite, result)
    return found


def preflight_differences(planted, name: str) -> tuple[list[str], list[str]]:
    """(the preflight's differences for the planted suite and build, the audit's own
    differences from the suite's expectation without the server's block-size flag)."""
    suite, result = planted[name]
    assert result.error is None and result.layers is not None, result.error
    layers = [LayerRow.model_validate(layer.to_dict()) for layer in result.layers]
    checked = Preflight(layers, served_clauses(suite, result.contract))
    assert suite.draft is not None and isinstance(suite.draft.expected_contract, dict)
    unserved = clause_differences(suite.draft.expected_contract, result.contract, "the build")
    return contract_differences(suite, layers, checked), unserved


STATIC = sorted(name for name, defect in DEFECTS.items() if defect.level in STATIC_LEVELS)
SHOWN = {  # the preflight's line for each, as a run prints it
    "attention": "layer 0: expected causal, got bidirectional",
    "taps": "taps: expected [1,2,3], the build resolves [0,1,2] (from dflash_config)",
    "mask_token_id": "mask_token_id: expected 2, the build resolves 1 (from dflash_config)",
    "block_size": "block_size: expected 8, the build resolves 4 (from "
                  "--speculative-num-draft-tokens)",
    "fc_input_width": "fc_input_width: expected 384, the build resolves 640",
    "mask_token_id_resolver": "mask_token_id: expected 2, the build refuses: ValueError: "
                              "DFLASH mask_token_id is outside the target vocab size",
    "embeddings_resolver": "embeddings: expected target, the build resolves draft (from "
                           "_resolve_dflash_embedding_module)",
}


@pytest.mark.parametrize("name", [n for n in STATIC if n != "block_size_resolver"])
def test_a_configuration_or_resolver_defect_is_named_by_the_preflight(
        planted, name: str) -> None:
    found, _ = preflight_differences(planted, name)
    clause = DEFECTS[name].clause
    assert found, name
    named = {line.split(":")[0] for line in found}
    assert named == ({f"layer {i}" for i in range(4)} if clause == "attention"
                     else {clause} | ({"taps"} if clause == "fc_input_width" else set())), found
    assert any(line.startswith(SHOWN[name]) for line in found), found


def test_a_refused_mask_token_id_names_the_release_and_its_message(planted) -> None:
    """dflash_config's id ignored: SGLang's own _resolve_mask_token_id, given the target's
    tokenizer, finds no <|MASK|> in its 1024 ids and refuses; the preflight names it."""
    found, _ = preflight_differences(planted, "mask_token_id_resolver")
    assert len(found) == 1 and "DFLASH mask_token_id is outside the target vocab size" \
        in found[0], found


def test_a_block_size_resolver_defect_is_named_without_the_server_flag(planted) -> None:
    """The draft's top-level block_size no longer read: the audit resolves the engine's
    default 16 and names it against the suite's 8 (`harness audit --expect`, `--change`);
    the suite's own launch passes --speculative-num-draft-tokens 8, which wins, so its
    preflight passes and its run is unaffected."""
    served, unserved = preflight_differences(planted, "block_size_resolver")
    assert served == []
    assert unserved == ["block_size: expected 8, the build resolves 16 (from engine default)"]


def test_the_forward_defects_change_nothing_the_static_contract_sees(planted) -> None:
    """The worker's draft step planted four ways (tests/audit/changes/
    dflash_forward_defects.diff): the preflight passes on the planted suite, which serves
    and expects blocks of 4; only the runtime record names them."""
    served, _ = preflight_differences(planted, "forward")
    assert served == []


def test_every_planted_defect_is_in_the_docs_table() -> None:
    table = DOCS.read_text().split("### Planted defects", 1)[1].split("\n### ", 1)[0]
    for name, defect in DEFECTS.items():
        where = defect.patch.name if defect.patch is not None else None
        assert where is None or where in table, (name, where)
        assert f"| {defect.level} |" in table or defect.level in table, name
