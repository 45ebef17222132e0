"""Issue 11 defect 2: with no ../shared, each workload loads through `datasets` (hub id,
config, split; offline from the Hugging Face cache), and the data hash is the one the
shared JSON-lines files give, because it is taken over canonical rows, not file bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.suite.model import GSM8KWorkload, HumanEvalWorkload, SpecBenchWorkload
from harness.workloads import prepare
from harness.workloads.gsm8k import load_gsm8k

from .conftest import (
    GSM8K_ROWS_SHA256,
    GSM8K_TEST,
    HUMANEVAL_ROWS_SHA256,
    SPEC_BENCH,
    SPEC_BENCH_ROWS_SHA256,
    humaneval_file,
    needs,
)


def test_gsm8k_from_datasets_has_the_jsonl_hash(hub_only: Path) -> None:
    from_hub = load_gsm8k()
    from_file = load_gsm8k(needs(GSM8K_TEST))
    assert from_hub.source == "hf:openai/gsm8k/main/test"
    assert from_hub.sha256 == from_file.sha256 == GSM8K_ROWS_SHA256
    assert from_hub.file_sha256 is None and from_file.file_sha256 is not None
    assert from_hub.rows == from_file.rows  # the same 1,319 rows, in order
    # and the protocol built from them is byte for byte the same
    assert prepare(GSM8KWorkload()).prompts == prepare(
        GSM8KWorkload(data=str(GSM8K_TEST))).prompts


def test_the_hub_download_lands_in_the_usual_cache(hub_only: Path, tmp_path: Path) -> None:
    load_gsm8k()
    import datasets

    cache = Path(datasets.config.HF_DATASETS_CACHE)
    assert cache.is_dir() and any(cache.rglob("*.arrow"))  # datasets' own cache


def test_spec_bench_and_humaneval_from_datasets(hub_only: Path) -> None:
    spec = prepare(SpecBenchWorkload(kind="spec_bench"))
    assert spec.source.startswith("datasets:json https://raw.githubusercontent.com/hemingkx")
    assert spec.sha256 == SPEC_BENCH_ROWS_SHA256
    assert spec.prompts == prepare(SpecBenchWorkload(kind="spec_bench",
                                                     data=str(SPEC_BENCH))).prompts
    human = prepare(HumanEvalWorkload(kind="humaneval"))
    assert human.source == "hf:openai/openai_humaneval/test"
    assert human.sha256 == HUMANEVAL_ROWS_SHA256
    assert human.prompts == prepare(HumanEvalWorkload(kind="humaneval",
                                                      data=str(humaneval_file()))).prompts


def test_offline_without_the_data_is_a_clear_error(
    hub_only: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_HF_MIRROR", str(tmp_path / "empty"))
    with pytest.raises(BadInput) as caught:
        load_gsm8k()
    message = caught.value.message
    assert message.startswith("cannot load hf:openai/gsm8k/main/test with `datasets`")
    assert "HF_DATASETS_OFFLINE" in message  # says why the hub was not asked
