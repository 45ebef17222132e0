"""The suite's [gate] table: what it accepts, what it refuses, and how a run uses it."""

from __future__ import annotations

import pytest

from harness.errors import SuiteError
from harness.protocols.pairing import tolerance_of
from harness.suite.model import load_suite, parse_suite, suite_entries
from tests.fixtures.suites_and_host import loaded_from_text
from tests.tiny_variants import tiny_variant


def suite_with(gate: str, extra: str = "") -> str:
    text = tiny_variant("gated").split("[gate]")[0]
    return text + "\n[gate]\n" + gate + "\n" + extra


def test_shipped_tiny_suite_declares_a_relative_gate_against_the_fixed_policy() -> None:
    suite = load_suite("tiny_dflash_cpu").suite
    assert suite.gate is not None and suite.gate.against == "reference:policy=fixed"
    tolerance = tolerance_of(suite.gate, suite)
    assert tolerance.relative and tolerance.drop == 0.02 and tolerance.metric == "server_avg"


@pytest.mark.parametrize("gate, problem", [
    ("alpha = 0.05", "exactly one of relative_drop and absolute_drop"),
    ("relative_drop = 0.02\nabsolute_drop = 0.1", "exactly one"),
    ("relative_drop = 1.5", "gate.relative_drop"),
    ("absolute_drop = -0.1", "gate.absolute_drop"),
    ("relative_drop = 0.02\nalpha = 0.7", "gate.alpha"),
    ("relative_drop = 0.02\ninconclusive = 'maybe'", "gate.inconclusive"),
    ("relative_drop = 0.02\nmetric = 'per_request'", "differs from floors.metric"),
    ("relative_drop = 0.02\nagainst = ''", "gate.against"),
    ("relative_drop = 0.02\ntolerance = 3", "gate.tolerance: unknown field"),
])
def test_bad_gate_tables_name_the_field(gate: str, problem: str) -> None:
    with pytest.raises(SuiteError) as error:
        parse_suite(suite_with(gate), "gated.toml")
    assert problem in error.value.message


def test_absolute_gate_in_the_floors_definition_reaches_every_entry() -> None:
    text = suite_with("absolute_drop = 0.1\nmetric = 'server_avg'", """
[[workloads]]
name = "t06"
kind = "gsm8k"
questions = 10
temperature = 0.6
[workloads.floors]
accept_length = 1.2
""")
    loaded = loaded_from_text(text, "gated.toml")
    for entry in suite_entries(loaded):
        gate = entry.loaded.suite.gate
        assert gate is not None
        tolerance = tolerance_of(gate, entry.loaded.suite)
        assert not tolerance.relative and tolerance.threshold(5.0) == 0.1
