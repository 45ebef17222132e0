"""The expected per-layer contract and its differences."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.audit.contract import (
    ContractError,
    check_contract,
    expected_from_layers,
    load_expected,
    validate_expected,
)
from harness.suite.attention import resolve_layers

from .conftest import gemma4_dflash

GEMMA4_CONTRACT = [{"causal": True, "window": 2048}] * 4 + [{"causal": False}]


def test_fixed_behaviour_meets_the_gemma4_contract() -> None:
    assert check_contract(GEMMA4_CONTRACT, resolve_layers(gemma4_dflash(), "fixed")) == []


def test_regression_is_named_layer_by_layer() -> None:
    differences = check_contract(GEMMA4_CONTRACT, resolve_layers(gemma4_dflash(), "regressed"))
    assert differences == [f"layer {i}: expected causal, got bidirectional" for i in range(4)]


def test_window_and_layer_count_differences() -> None:
    actual = resolve_layers(gemma4_dflash(), "fixed")
    expected = [{"causal": True, "window": 1024}, *GEMMA4_CONTRACT[1:], {"causal": False}]
    assert check_contract(expected, actual) == [
        "expected 6 draft layers, got 5",
        "layer 0: expected window 1024, got window 2048",
    ]
    assert check_contract([{"causal": False, "window": 8}], actual[4:]) == [
        "layer 0: expected window 8, got full attention"
    ]


def test_expected_from_layers_round_trips() -> None:
    layers = resolve_layers(gemma4_dflash(), "fixed")
    assert expected_from_layers(layers) == GEMMA4_CONTRACT
    assert check_contract(expected_from_layers(layers), layers) == []


@pytest.mark.parametrize(
    ("expected", "message"),
    [
        ({"causal": True}, "must be a list"),
        (["causal"], r"expected_layers\[0\] must be a table"),
        ([{"window": 8}], r"expected_layers\[0\]\.causal must be true or false"),
        ([{"causal": True, "window": 0}], "window must be a positive integer"),
        ([{"causal": True, "sliding": 8}], "unknown keys"),
    ],
)
def test_malformed_expectations(expected, message) -> None:
    with pytest.raises(ContractError, match=message):
        check_contract(expected, [])


def test_load_from_suite_toml_json_and_name(tmp_path: Path) -> None:
    suite = tmp_path / "gemma4.toml"
    suite.write_text(
        'name = "gemma4"\n[draft]\nmodel = "z-lab/gemma-4-31B-it-DFlash"\n'
        "expected_layers = [\n"
        + "".join("  {causal = true, window = 2048},\n" for _ in range(4))
        + "  {causal = false},\n]\n"
    )
    normalised = validate_expected(GEMMA4_CONTRACT)  # window None filled in for full layers
    assert load_expected(str(suite)) == (normalised, str(suite))
    assert load_expected("gemma4", suites_dir=tmp_path)[0] == normalised
    bare = tmp_path / "contract.json"
    bare.write_text('{"expected_layers": [{"causal": false}]}')
    assert load_expected(str(bare))[0] == [{"causal": False, "window": None}]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("bad.toml", "[draft\n", "not valid TOML"),
        ("bad.json", "{", "not valid JSON"),
        ("empty.toml", 'name = "x"\n', "declares no draft.expected_layers"),
    ],
)
def test_unreadable_expectations(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ContractError, match=message):
        load_expected(str(path))


def test_unknown_suite_lists_known_ones(tmp_path: Path) -> None:
    (tmp_path / "qwen3.toml").write_text("")
    known = r"no suite file or suite name matches.*known suites: qwen3"
    with pytest.raises(ContractError, match=known):
        load_expected("gemma4", suites_dir=tmp_path)
