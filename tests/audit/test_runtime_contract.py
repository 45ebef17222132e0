"""Run time = audit, for every clause: the stand-ins' record of what reached the draft
(tests/cpu_stand_ins/contract_record.py) and its comparison with the audit's clauses
(harness/run/runtime_contract.py), on SGLang-shaped objects (no engine needed)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from harness.errors import EngineError
from harness.results.record import ClauseRow
from harness.run import runtime_contract

STAND_INS = Path(__file__).resolve().parents[1] / "cpu_stand_ins"


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(STAND_INS))
    import contract_record

    record = tmp_path / runtime_contract.RECORD_FILE
    monkeypatch.setenv(contract_record.RECORD_ENV, str(record))
    assert contract_record.RECORD_ENV == runtime_contract.RECORD_ENV
    yield contract_record, record
    sys.modules.pop("contract_record", None)


def _sglang_shaped(captures: list[int], block: int = 8, mask_id: int = 2):
    """A worker module, draft module and capture module shaped like SGLang 0.5.23's."""
    embed = object()
    inner = types.SimpleNamespace(layers_to_capture=[])
    target = types.SimpleNamespace(model=inner, lm_head=object(),
                                   get_input_embeddings=lambda: embed)

    class DFlashDraftModel:
        def __init__(self) -> None:
            self.layers = [None] * 5
            self.fc = types.SimpleNamespace(in_features=384)

        def project_target_hidden(self, target_hidden):
            return target_hidden

    class DFlashWorkerV2:
        def __init__(self, target_worker) -> None:
            self.target_worker = target_worker
            self.draft_model = DFlashDraftModel()
            self.block_size, self._mask_token, self._mask_token_id = block, "<|MASK|>", mask_id

    def configure_aux_hidden_state_capture(*, model, dflash_use_aux_hidden_state,
                                           dflash_target_layer_ids, **_):
        model.model.layers_to_capture = [i + 1 for i in dflash_target_layer_ids]

    worker = types.ModuleType("worker")
    worker.DFlashWorkerV2 = DFlashWorkerV2
    worker._resolve_dflash_embedding_module = lambda d, t: t.get_input_embeddings()
    draft = types.ModuleType("draft")
    draft.DFlashDraftModel = DFlashDraftModel
    capture = types.ModuleType("capture")
    capture.configure_aux_hidden_state_capture = configure_aux_hidden_state_capture
    target_worker = types.SimpleNamespace(model_runner=types.SimpleNamespace(model=target))
    return worker, draft, capture, target, target_worker, captures


def _run(contract_record, modules) -> None:
    worker, draft, capture, target, target_worker, captures = modules
    contract_record.install_worker(worker)
    contract_record.install_draft(draft)
    contract_record.install_capture(capture)
    capture.configure_aux_hidden_state_capture(
        model=target, dflash_use_aux_hidden_state=True, dflash_target_layer_ids=captures)
    built = worker.DFlashWorkerV2(target_worker)
    worker._resolve_dflash_embedding_module(built.draft_model, target)
    built.draft_model.project_target_hidden(types.SimpleNamespace(shape=(7, 384)))


AUDIT = {"taps": ClauseRow(value=[1, 2, 3], source="dflash_config"),
         "block_size": ClauseRow(value=8, source="--speculative-num-draft-tokens"),
         "mask_token_id": ClauseRow(value=2, source="dflash_config"),
         "draft_layers": ClauseRow(value=5), "fc_input_width": ClauseRow(value=384),
         "embeddings": ClauseRow(value="target"), "lm_head": ClauseRow(value="target"),
         "mask_token": ClauseRow(value=None, limit="not resolved")}


def test_what_reached_the_draft_equals_the_audit(recorder) -> None:
    contract_record, record = recorder
    _run(contract_record, _sglang_shaped([0, 1, 2]))
    rows, differences = runtime_contract.check(record, AUDIT)
    assert differences == []
    assert rows["taps"].value == [1, 2, 3] and rows["taps"].source == "target layers_to_capture"
    assert rows["fc_input_width"].note is not None  # recorded twice: fc, and as received


def test_taps_one_layer_early_fail_naming_the_clause(recorder) -> None:
    contract_record, record = recorder
    modules = _sglang_shaped([0, 1, 2])
    modules[2].configure_aux_hidden_state_capture = (  # the +1 dropped
        lambda *, model, dflash_target_layer_ids, **_:
        setattr(model.model, "layers_to_capture", list(dflash_target_layer_ids)))
    _run(contract_record, modules)
    _, differences = runtime_contract.check(record, AUDIT)
    assert differences == ["taps: reached the model as [0,1,2] (target layers_to_capture); "
                           "the audit says [1,2,3] (dflash_config)"]


def test_block_size_and_mask_id_differences_are_named(recorder) -> None:
    contract_record, record = recorder
    _run(contract_record, _sglang_shaped([0, 1, 2], block=16, mask_id=1))
    _, differences = runtime_contract.check(record, AUDIT)
    assert [d.split(":")[0] for d in differences] == ["block_size", "mask_token_id"]


def test_a_clause_recorded_nowhere_and_an_empty_record_are_differences(tmp_path: Path) -> None:
    record = tmp_path / "contract-runtime.jsonl"
    rows, differences = runtime_contract.check(record, AUDIT)
    assert rows == {} and "recorded none of the draft's clauses" in differences[0]
    record.write_text(json.dumps({"clause": "block_size", "value": 8, "where": "w"}) + "\n")
    _, differences = runtime_contract.check(record, AUDIT)
    assert "taps: the engine recorded nothing for it at run time (the audit says [1,2,3])" \
        in differences
    assert not any(d.startswith("mask_token:") for d in differences)  # not resolved: skipped


@pytest.mark.parametrize("line", ["not json", '{"clause": "taps"}',
                                  '{"clause": "taps", "value": [1, "x"], "where": "w"}',
                                  '{"clause": "taps", "value": 1.5, "where": "w"}'])
def test_a_corrupt_record_line_is_an_error_naming_the_line(tmp_path: Path, line: str) -> None:
    record = tmp_path / "contract-runtime.jsonl"
    record.write_text(json.dumps({"clause": "block_size", "value": 8, "where": "w"})
                      + "\n" + line + "\n")
    with pytest.raises(EngineError, match=r"contract-runtime\.jsonl:2"):
        runtime_contract.read_runtime(record)


def test_nothing_is_recorded_without_the_variable(recorder, monkeypatch) -> None:
    contract_record, record = recorder
    monkeypatch.delenv(contract_record.RECORD_ENV)
    _run(contract_record, _sglang_shaped([0, 1, 2]))
    assert not record.exists()


def test_what_reached_the_model_is_checked_against_the_suite_too() -> None:
    draft = types.SimpleNamespace(expected_contract={"taps": (1, 2, 3), "block_size": 8})
    suite = types.SimpleNamespace(draft=draft)
    runtime = {"taps": ClauseRow(value=[0, 1, 2], source="target layers_to_capture"),
               "block_size": ClauseRow(value=8, source="DFlashWorkerV2.__init__")}
    assert runtime_contract.expected_differences(suite, AUDIT, runtime) == [
        "taps: expected [1,2,3], the engine at run time resolves [0,1,2] (from target "
        "layers_to_capture)"]
    draft.expected_contract = "declared"  # the preflight compared the declared values
    assert runtime_contract.expected_differences(suite, AUDIT, runtime) == []
