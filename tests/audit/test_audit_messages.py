"""The audit's words for what SGLang's code did: a declared value equal to the engine's
default is shown as declared, and a bare `assert` SGLang fails is named by its file, line
and condition (not a bare "AssertionError:")."""

from __future__ import annotations

import json
from pathlib import Path

from harness.audit import worker
from harness.audit.clauses import error_message
from harness.audit.corpus import load_draft, sglang_columns
from tests.audit.conftest import release_sources

TINY = Path(__file__).with_name("corpus") / "tiny-draft-capturable"


def test_a_mask_token_declared_equal_to_the_default_is_declared(tmp_path: Path) -> None:
    sources = release_sources("0.5.23")
    for name, mask in (("declared", "<|MASK|>"), ("default", None)):
        folder = tmp_path / name
        (folder / "target").mkdir(parents=True)
        config = json.loads((TINY / "config.json").read_text())
        if mask is not None:
            config.setdefault("dflash_config", {})["mask_token"] = mask
        (folder / "config.json").write_text(json.dumps(config))
        (folder / "target" / "config.json").write_bytes(
            (TINY / "target" / "config.json").read_bytes())
    drafts = [load_draft(tmp_path / "declared"), load_draft(tmp_path / "default")]
    declared, default = (row[0] for row in sglang_columns(drafts, sources))
    assert declared.clause("mask_token").value == default.clause("mask_token").value \
        == "<|MASK|>"  # SGLang's DEFAULT_DFLASH_MASK_TOKEN
    assert declared.clause("mask_token").source == "dflash_config"
    assert declared.cell("mask_token") == "<|MASK|>"  # no default mark
    assert default.clause("mask_token").source == "engine default"
    assert default.cell("mask_token") == "<|MASK|>*"


def test_a_bare_assert_is_named_by_its_file_line_and_condition() -> None:
    """Loaded as the audit loads SGLang's modules (worker._module), so its text is where a
    traceback looks for it."""
    text = "def check(config):\n    # a release's check\n    assert config['layers'] > 0\n"
    module = worker._module("sglang.srt.configs.probe_assert", text)
    try:
        module.check({"layers": 0})
    except AssertionError as error:
        assert error_message(error) == ("assert config['layers'] > 0 failed "
                                        "(sglang/srt/configs/probe_assert.py:3)")
        assert worker._error("load", error)["message"] == error_message(error)
    else:
        raise AssertionError("the check passed")
    assert error_message(ValueError("its own words")) == "its own words"


def test_a_non_integer_mask_token_id_is_refused_by_the_release_itself(tmp_path: Path,
                                                                      capsys) -> None:
    """Not the harness's check (harness/suite/draft_contract.py leaves it): SGLang 0.5.23's
    own parse_dflash_draft_config refuses it, with its own message, exit 5."""
    from harness.cli import main

    release_sources("0.5.23")
    config = json.loads((TINY / "config.json").read_text())
    config["dflash_config"]["mask_token_id"] = "2"
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["audit", str(tmp_path), "--sglang", "0.5.23"]) == 5
    out = capsys.readouterr().out
    assert "refused: mask_token_id: 0.5.23 refuses: ValueError: DFLASH dflash_config." \
           "mask_token_id must be an integer, got '2' (type=str)." in out
