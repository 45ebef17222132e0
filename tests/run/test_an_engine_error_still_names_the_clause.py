"""A run that ends in an engine error still compares what its engine recorded reaching the
draft with the audit: a defect that crashes the engine (vLLM with a forward-time block
width other than the audit's dies in its warm-up on a reshape) is named by its clause,
beside the crash, and the record keeps what was recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import EngineError
from harness.results.readers import read_run
from harness.results.record import ClauseRow, LayerRow, utc_now
from harness.run import runtime_attention, runtime_contract
from harness.run.entry_run import EntryRun
from harness.run.judge import RUNTIME_CONTRACT_DIFFERS
from harness.run.outcome import RunOptions
from harness.suite.model import load_suite

CRASH = EngineError("the server exited with code 1 during warm-up: RuntimeError: shape "
                    "'[-1, 7]' is invalid for input of size 6")
AUDIT = {"block_size": ClauseRow(value=8, source="--speculative-num-draft-tokens"),
         "mask_token_id": ClauseRow(value=2, source="dflash_config")}


def _run(tmp_path: Path) -> EntryRun:
    loaded = load_suite("tiny_dflash_sglang_cpu")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run = EntryRun(loaded, RunOptions(results_dir=tmp_path), run_dir, "r1", utc_now())
    run.stage, run.draft_contract = "warm-up", dict(AUDIT)
    run.contract_record = run_dir / runtime_contract.RECORD_FILE
    return run


def _lines(path: Path, *items: dict[str, object]) -> None:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))


def test_a_clause_recorded_before_the_crash_is_named_first(tmp_path: Path) -> None:
    run = _run(tmp_path)
    run.draft_contract = {**AUDIT, "taps": ClauseRow(value=[1, 2, 3], source="dflash_config")}
    _lines(run.contract_record,  # type: ignore[arg-type]  (taps: never recorded, not named)
           {"clause": "block_size", "value": 8, "where": "draft config"},
           {"clause": "block_size", "value": 7, "where": "the draft forward's block"},
           {"clause": "mask_token_id", "value": 2, "where": "draft config"})
    record = run.failed(CRASH)
    assert record.verdict is not None and record.verdict.status == "error"
    reasons = record.verdict.reasons
    assert reasons[0] == RUNTIME_CONTRACT_DIFFERS  # as the judge says it of a measured run
    assert reasons[1] == ("block_size: reached the model as 7 (the draft forward's block); "
                          "the audit says 8 (--speculative-num-draft-tokens)")
    assert reasons[-1].startswith("warm-up: the server exited with code 1")
    assert len(reasons) == 3  # mask_token_id agreed: not named
    kept = read_run(run.run_dir)
    assert kept.draft_contract_runtime is not None
    assert kept.draft_contract_runtime["block_size"].note is not None  # both values kept


@pytest.mark.parametrize("content", ["", None, "not json\n", "\x00\xff" * 40])
def test_nothing_recorded_or_an_unreadable_record_leaves_the_error_alone(
    tmp_path: Path, content: str | None
) -> None:
    run = _run(tmp_path)
    if content is not None:
        run.contract_record.write_text(content)  # type: ignore[union-attr]
    record = run.failed(CRASH)
    assert record.verdict is not None
    assert record.verdict.reasons == [f"warm-up: {CRASH.message}"]


def test_a_kernel_call_recorded_before_the_crash_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path)
    # layer 1 never ran before the crash: what the crash cut short is not named
    run.attention = [LayerRow(index=0, window=16, causal=True),
                     LayerRow(index=1, window=16, causal=True)]
    run.runtime_record = run.run_dir / "attention-runtime.jsonl"
    line = {"model": runtime_attention.DRAFT_MODEL, "layer": 0, "kernel": "extend",
            "causal": False, "window": 16}
    run.runtime_record.write_text(json.dumps(line) + "\n")
    assert runtime_attention.read_runtime(run.runtime_record)  # the kernel stand-in's format
    record = run.failed(CRASH)
    assert record.verdict is not None
    assert record.verdict.reasons[1].startswith("draft layer 0")
    assert "warm-up:" in record.verdict.reasons[-1] and len(record.verdict.reasons) == 3
