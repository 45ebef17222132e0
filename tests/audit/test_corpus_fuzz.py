"""The corpus loader on any input: bytes that are not UTF-8 JSON, wrong types, absurd values,
deep nesting, numbers as strings. Each is bad input naming the file (and the field), exit 2,
never a traceback; a well-formed draft loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.audit.corpus import load_corpus, load_draft
from harness.cli import main
from harness.suite.attention import DraftConfigError

CORPUS = Path(__file__).with_name("corpus")
FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) \
    | st.text(max_size=20)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                           max_leaves=12)
CONTRACT_KEYS = ("block_size", "mask_token_id", "mask_token", "target_layer_ids",
                 "num_hidden_layers", "num_target_layers", "hidden_size", "layer_types",
                 "sliding_window", "is_causal", "dflash_config", "text_config")


def _entry(root: Path, name: str, data: bytes) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_bytes(data)
    return folder


def _load_or_refuse(folder: Path) -> None:
    try:
        load_draft(folder)
    except DraftConfigError as error:
        assert str(folder / "config.json") in error.message
        assert "Traceback" not in error.message


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_load_or_are_refused_naming_the_file(tmp_path: Path, data: bytes) -> None:
    _load_or_refuse(_entry(tmp_path, "draft", data))


@FUZZ
@given(document=json_values)
def test_any_json_document_loads_or_is_refused(tmp_path: Path, document: Any) -> None:
    _load_or_refuse(_entry(tmp_path, "draft", json.dumps(document).encode()))


@FUZZ
@given(key=st.sampled_from(CONTRACT_KEYS), value=json_values,
       nested=st.booleans())
def test_any_value_of_a_contract_field_loads_or_is_refused_by_name(
        tmp_path: Path, key: str, value: Any, nested: bool) -> None:
    config = json.loads((CORPUS / "tiny-draft-capturable" / "config.json").read_text())
    if nested and key not in ("dflash_config", "text_config"):
        config["dflash_config"] = {**config["dflash_config"], key: value}
    else:
        config[key] = value
    folder = _entry(tmp_path, "draft", json.dumps(config).encode())
    try:
        load_draft(folder)
    except DraftConfigError as error:
        assert key in error.message or "dflash_config" in error.message \
            or "text_config" in error.message, error.message


@pytest.mark.parametrize("value", [-1, 0, 10**30, "16", 16.0, True, None, [], {}])
def test_absurd_or_mistyped_block_size(tmp_path: Path, value: Any) -> None:
    config = {"num_hidden_layers": 2, "dflash_config": {"block_size": value}}
    folder = _entry(tmp_path, "draft", json.dumps(config).encode())
    if value is None:
        assert load_draft(folder).declared["block_size"] is None  # left to the engine
        return
    with pytest.raises(DraftConfigError, match=r"dflash_config\.block_size"):
        load_draft(folder)


def test_taps_out_of_range_name_the_entry(tmp_path: Path) -> None:
    config = {"num_target_layers": 4, "dflash_config": {"target_layer_ids": [0, 1, 4]}}
    with pytest.raises(DraftConfigError, match=r"target_layer_ids\[2\].*0 to 3"):
        load_draft(_entry(tmp_path, "draft", json.dumps(config).encode()))


def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(DraftConfigError, match=r"nest too deep|not valid JSON"):
        load_draft(_entry(tmp_path, "draft", deep))


def test_a_bad_target_is_refused_naming_it(tmp_path: Path) -> None:
    folder = shutil.copytree(CORPUS / "tiny-draft-capturable", tmp_path / "tiny")
    (folder / "target" / "config.json").write_text('{"model_type": "qwen3", '
                                                   '"num_hidden_layers": "4"}')
    with pytest.raises(DraftConfigError, match="target num_hidden_layers"):
        load_draft(folder)


def test_cli_corpus_with_a_bad_draft_exits_2_before_any_engine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS / "tiny-draft-capturable", root / "good")
    _entry(root, "bad", json.dumps({"dflash_config": {"block_size": -1}}).encode())
    assert main(["audit", "--corpus", str(root), "--sglang", "9.9.9"]) == 2
    err = capsys.readouterr().err
    assert "bad/config.json" in err and "dflash_config.block_size" in err
    assert "Traceback" not in err


def test_cli_corpus_needs_a_folder_with_drafts(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--corpus", str(tmp_path)]) == 2
    assert "no draft folder" in capsys.readouterr().err
    assert main(["audit", "--corpus", str(tmp_path / "missing")]) == 2


def test_the_project_corpus_loads() -> None:
    drafts = load_corpus(CORPUS)
    assert len(drafts) >= 10
    assert {d.name for d in drafts if d.target is not None} >= {
        "specforge-qwen3-8b-dflash", "zlab-muse-glimmer-assistant", "tiny-draft-capturable"}


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1" * 30])
def test_a_number_no_engine_can_mean_is_refused_naming_the_field(tmp_path: Path,
                                                                   literal: bytes) -> None:
    """Python's json reads NaN, Infinity and integers of any size; a checkpoint means none
    of them, and the corpus refuses them by name, as a suite file does."""
    data = b'{"num_hidden_layers": 2, "rope_parameters": {"rope_theta": ' + literal + b"}}"
    with pytest.raises(DraftConfigError, match=r"draft/config\.json: rope_parameters\.rope_theta"):
        load_draft(_entry(tmp_path, "draft", data))


TARGET_KEYS = ("model_type", "architectures", "num_hidden_layers", "text_config")


def _load_target_or_refuse(root: Path, data: bytes) -> None:
    folder = shutil.copytree(CORPUS / "tiny-draft-capturable", root / "tiny",
                             dirs_exist_ok=True)
    (folder / "target" / "config.json").write_bytes(data)
    try:
        draft = load_draft(folder)
    except DraftConfigError as error:
        assert str(folder / "target" / "config.json") in error.message
        assert len(error.message) < 1000, error.message[:200]  # a huge value is not echoed
        return
    assert draft.target is not None and 0 < draft.target.num_layers <= 4096


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_target_bytes_load_or_are_refused_naming_the_target(tmp_path: Path,
                                                                 data: bytes) -> None:
    _load_target_or_refuse(tmp_path, data)


@FUZZ
@given(key=st.sampled_from(TARGET_KEYS),
       value=json_values | st.text(min_size=2000, max_size=3000)
       | st.lists(st.integers(), min_size=500, max_size=600))
def test_any_value_of_a_target_field_loads_or_is_refused_briefly(tmp_path: Path, key: str,
                                                                 value: Any) -> None:
    config = json.loads((CORPUS / "tiny-draft-capturable" / "target" / "config.json")
                        .read_text())
    config[key] = value
    _load_target_or_refuse(tmp_path, json.dumps(config).encode())
