"""Run time = audit, for every clause: the stand-ins' record of what reached the draft
(tests/cpu_stand_ins/contract_record.py) and its comparison with the audit's clauses
(harness/run/runtime_contract.py), on SGLang-shaped objects (no engine needed)."""

from __future__ import annotations

import copy
import json
import sys
import types
import zipfile
from pathlib import Path

import pytest
import torch

from harness.errors import EngineError
from harness.results.record import ClauseRow
from harness.run import runtime_contract
from tests.audit.conftest import wheel_for

STAND_INS = Path(__file__).resolve().parents[1] / "cpu_stand_ins"
AUX = "sglang.srt.layers.aux_hidden_states"


class _Layer(torch.nn.Module):
    """A decoder layer shaped like SGLang 0.5.21+'s: it takes the capture at its input
    boundary (`attn_boundary.prepare(..., capture=capture_output)`), then adds one, so the
    value of hidden_states[c] is c (the embedding is 0)."""

    def forward(self, positions, hidden_states, forward_batch, capture_output=None):
        if capture_output is not None:
            capture_output(hidden_states)
        return hidden_states + 1


class _Inner(torch.nn.Module):
    """Qwen3Model.forward's loop (0.5.23), with `early` planting the capture one layer early
    at forward time (`if i + 1 in self.layers_to_capture`)."""

    def __init__(self, aux: types.ModuleType, early: bool = False) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(4))
        self.layers_to_capture: list[int] = []
        self.aux, self.early = aux, early

    def forward(self, input_ids):
        hidden_states = torch.zeros(len(input_ids), 2)
        captured = self.aux.AuxHiddenStateList()
        for i in range(len(self.layers)):
            hidden_states = self.layers[i](
                None, hidden_states, None,
                capture_output=captured.capture
                if (i + 1 if self.early else i) in self.layers_to_capture else None)
        return hidden_states, captured


@pytest.fixture(scope="module")
def aux_hidden_states() -> types.ModuleType:
    """SGLang 0.5.23's own capture list, from its wheel (it needs only torch), installed
    where the stand-in imports it."""
    with zipfile.ZipFile(wheel_for("0.5.23")) as wheel:
        source = wheel.read("sglang/srt/layers/aux_hidden_states.py").decode()
    module = types.ModuleType(AUX)
    exec(compile(source, f"sglang-0.5.23/{AUX}", "exec"), module.__dict__)
    return module


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aux_hidden_states):
    monkeypatch.syspath_prepend(str(STAND_INS))
    for name in ("sglang", "sglang.srt", "sglang.srt.layers"):
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, AUX, aux_hidden_states)
    monkeypatch.setattr(sys.modules["sglang.srt.layers"], "aux_hidden_states",
                        aux_hidden_states, raising=False)
    for cls in (aux_hidden_states.AuxHiddenStateList, aux_hidden_states.AuxHiddenStatePacker):
        monkeypatch.setattr(cls, "capture", cls.capture)  # the stand-in wraps it: undone
    import contract_record

    record = tmp_path / runtime_contract.RECORD_FILE
    monkeypatch.setenv(contract_record.RECORD_ENV, str(record))
    assert contract_record.RECORD_ENV == runtime_contract.RECORD_ENV
    yield contract_record, record
    sys.modules.pop("contract_record", None)


class Forward:
    """Forward-time plants in the worker's draft step (tests/audit/changes/
    dflash_forward_defects.diff, on SGLang-shaped objects): the block left at 0 instead of
    the mask id, the block embedded through the head's weight, the head a private copy of
    the target's, the draft's own block size left unset."""

    def __init__(self, *, zero_block: bool = False, embed_with_head: bool = False,
                 head_is_copy: bool = False, unset_block: bool = False) -> None:
        self.zero_block, self.embed_with_head = zero_block, embed_with_head
        self.head_is_copy, self.unset_block = head_is_copy, unset_block


def _sglang_shaped(captures: list[int], block: int = 8, mask_id: int = 2,
                   early: bool = False, forward: Forward | None = None, scale: float = 1.0):
    """A worker module, draft module and capture module shaped like SGLang 0.5.23's, the
    target a torch module whose forward loop captures like Qwen3Model's."""
    embed = torch.nn.Embedding(16, 2)
    inner = _Inner(sys.modules[AUX], early)
    target = types.SimpleNamespace(model=inner, lm_head=torch.nn.Linear(2, 16, bias=False),
                                   get_input_embeddings=lambda: embed)
    plant = forward or Forward()

    class DFlashDraftModel:
        embed_tokens = None

        def __init__(self) -> None:
            self.layers = [None] * 5
            self.fc = types.SimpleNamespace(in_features=384)
            self.block_size = 8  # the checkpoint's, until the worker's set_block_size

        def get_input_embeddings(self):
            return self.embed_tokens

        def forward(self, input_ids, positions, forward_batch, input_embeds=None):
            return input_embeds

        def project_target_hidden(self, target_hidden):
            return target_hidden

    class DFlashWorkerV2:
        def __init__(self, target_worker) -> None:
            self.target_worker = target_worker
            self.draft_model = DFlashDraftModel()
            self.block_size, self._mask_token, self._mask_token_id = block, "<|MASK|>", mask_id
            self._noise_embed_scale = scale  # gemma-4's sqrt(hidden_size)
            if not plant.unset_block:
                self.draft_model.block_size = block

        def _greedy_sample_from_vocab_parallel_head(self, *, hidden_states, lm_head):
            return torch.argmax(hidden_states @ lm_head.weight.T, dim=-1)

        def draft_step(self, anchors: torch.Tensor) -> None:
            """forward_batch_generation's draft block, as 0.5.23 writes it (eager path)."""
            model = self.target_worker.model_runner.model
            embed_module = worker._resolve_dflash_embedding_module(self.draft_model, model)
            lm_head = model.lm_head
            block_ids = torch.empty((len(anchors), self.block_size), dtype=torch.long)
            block_ids.fill_(0 if plant.zero_block else self._mask_token_id)
            block_ids[:, 0].copy_(anchors)
            noise = (torch.nn.functional.embedding(block_ids, lm_head.weight)
                     if plant.embed_with_head else embed_module(block_ids))
            if self._noise_embed_scale != 1.0:
                noise = noise * self._noise_embed_scale
            input_embeds = noise.view(-1, noise.shape[-1])
            batch = types.SimpleNamespace(batch_size=len(anchors), forward_mode=types.
                                          SimpleNamespace(name="TARGET_VERIFY"))
            hidden = self.draft_model.forward(block_ids.flatten(), None, batch,
                                              input_embeds=input_embeds)
            self._greedy_sample_from_vocab_parallel_head(
                hidden_states=hidden, lm_head=copy.deepcopy(lm_head) if plant.head_is_copy
                else lm_head)

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


def _run(contract_record, modules) -> list[list[float]]:
    """The worker built, then one target forward and one draft block, as SGLang runs them;
    the values of the captured tensors (c for hidden_states[c])."""
    worker, draft, capture, target, target_worker, captures = modules
    contract_record.install_worker(worker)
    contract_record.install_draft(draft)
    contract_record.install_capture(capture)
    capture.configure_aux_hidden_state_capture(
        model=target, dflash_use_aux_hidden_state=True, dflash_target_layer_ids=captures)
    built = worker.DFlashWorkerV2(target_worker)
    _, captured = target.model(torch.tensor([5, 6, 7]))  # the target's forward
    with torch.no_grad():
        built.draft_step(torch.tensor([5, 6]))  # the anchors (bonus tokens)
    built.draft_model.project_target_hidden(types.SimpleNamespace(shape=(7, 384)))
    return [float(tensor[0, 0]) for tensor in captured]


AUDIT = {"taps": ClauseRow(value=[1, 2, 3], source="dflash_config"),
         "block_size": ClauseRow(value=8, source="--speculative-num-draft-tokens"),
         "mask_token_id": ClauseRow(value=2, source="dflash_config"),
         "draft_layers": ClauseRow(value=5), "fc_input_width": ClauseRow(value=384),
         "embeddings": ClauseRow(value="target"), "lm_head": ClauseRow(value="target"),
         "mask_token": ClauseRow(value=None, limit="not resolved")}


def test_what_reached_the_draft_equals_the_audit(recorder) -> None:
    contract_record, record = recorder
    captured = _run(contract_record, _sglang_shaped([0, 1, 2]))
    rows, differences = runtime_contract.check(record, AUDIT)
    assert differences == []
    # observed when each capture was taken, and equal to what the captured tensors are
    assert rows["taps"].value == [1, 2, 3] == captured
    assert rows["taps"].source.startswith("target forward: captures taken after")
    assert rows["fc_input_width"].note is not None  # recorded twice: fc, and as received
    assert rows["block_size"].note is not None  # the worker's, and the block embedded
    assert "embed_module(block_ids)" in rows["mask_token_id"].note


def test_taps_one_layer_early_in_the_configuration_fail_naming_the_clause(recorder) -> None:
    contract_record, record = recorder
    modules = _sglang_shaped([0, 1, 2])
    modules[2].configure_aux_hidden_state_capture = (  # the +1 dropped
        lambda *, model, dflash_target_layer_ids, **_:
        setattr(model.model, "layers_to_capture", list(dflash_target_layer_ids)))
    assert _run(contract_record, modules) == [0, 1, 2]
    _, differences = runtime_contract.check(record, AUDIT)
    assert differences == ["taps: reached the model as [0,1,2] (target forward: captures "
                           "taken after that many target layers ran (hidden_states[c])); "
                           "the audit says [1,2,3] (dflash_config)"]


def test_taps_one_layer_early_at_forward_time_fail_naming_the_clause(recorder) -> None:
    """The capture moved in the forward loop, the configured list untouched ([1, 2, 3]):
    only what the forward did shows it."""
    contract_record, record = recorder
    modules = _sglang_shaped([0, 1, 2], early=True)
    assert _run(contract_record, modules) == [0, 1, 2]
    assert modules[3].model.layers_to_capture == [1, 2, 3]  # the configuration is right
    _, differences = runtime_contract.check(record, AUDIT)
    assert [d.split(":")[0] for d in differences] == ["taps"]
    assert "reached the model as [0,1,2]" in differences[0]


def test_a_release_whose_capture_cannot_be_observed_records_its_configured_list(
        recorder, monkeypatch) -> None:
    """0.5.20 and older append to a plain list in the loop: nothing to observe, so the
    configured list is recorded, saying so."""
    contract_record, record = recorder
    monkeypatch.setattr(contract_record, "_observe_captures", lambda holder: False)
    _run(contract_record, _sglang_shaped([0, 1, 2]))
    rows, differences = runtime_contract.check(record, AUDIT)
    assert differences == [] and "configured" in rows["taps"].source


def test_block_size_and_mask_id_differences_are_named(recorder) -> None:
    contract_record, record = recorder
    _run(contract_record, _sglang_shaped([0, 1, 2], block=16, mask_id=1))
    _, differences = runtime_contract.check(record, AUDIT)
    # each where it took effect: as the worker holds it, as the draft's block was embedded
    # and as the draft forward was given it (its block, and for block_size its own)
    assert [d.split(":")[0] for d in differences] == ["block_size"] * 4 + ["mask_token_id"] * 3
    assert any("embed_module(block_ids)" in d for d in differences)
    assert any("the draft forward's block" in d for d in differences)


@pytest.mark.parametrize("scale", [1.0, 11.3137])
def test_the_borrowed_modules_are_observed_where_the_draft_calls_them(recorder,
                                                                       scale: float) -> None:
    """The embeddings that made the draft forward's input_embeds (scaled by the worker or
    not) and the head the draft step called are the target's own modules (by identity)."""
    contract_record, record = recorder
    _run(contract_record, _sglang_shaped([0, 1, 2], scale=scale))
    rows, differences = runtime_contract.check(record, AUDIT)
    assert differences == []
    assert "the draft forward's input_embeds" in rows["embeddings"].note
    assert "_greedy_sample_from_vocab_parallel_head" in rows["lm_head"].note


@pytest.mark.parametrize(("plant", "clause", "shown"), [
    (Forward(zero_block=True), "mask_token_id", "reached the model as 0 (the draft forward's "
                                                "block"),
    (Forward(embed_with_head=True), "embeddings", "reached the model as other (no embedding "
                                                  "module's output) (the draft forward's "
                                                  "input_embeds"),
    (Forward(head_is_copy=True), "lm_head", "reached the model as other (Linear) (the "
                                           "draft step's head"),
    (Forward(unset_block=True, ), "block_size", "reached the model as 8 (the draft "
                                                "forward's own block_size"),
])
def test_a_forward_time_defect_in_a_borrowed_or_given_value_is_named(
        recorder, plant: Forward, clause: str, shown: str) -> None:
    """Each plant of tests/audit/changes/dflash_forward_defects.diff alone: the worker's
    configuration is right, what the draft forward was given or called is not."""
    contract_record, record = recorder
    block = 4 if plant.unset_block else 8  # served blocks of 4; the draft's own stays 8
    audit = {**AUDIT, "block_size": ClauseRow(value=block,
                                              source="--speculative-num-draft-tokens")}
    _run(contract_record, _sglang_shaped([0, 1, 2], block=block, forward=plant))
    _, differences = runtime_contract.check(record, audit)
    assert {d.split(":")[0] for d in differences} == {clause}, differences
    assert any(d.startswith(f"{clause}: {shown}") for d in differences), differences


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
