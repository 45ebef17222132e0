"""The paired speedup gate's inputs and findings as stored: per-question sums and each
figure's finding. An impossible value (a negative time, a repeated question, a count as
a string, a ratio that is not B / A, a status that contradicts its decision, a figure
twice) is refused by every reader, naming the field; any value is judged without a crash."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.results.checks import BadFile
from harness.results.possible import check_paired, check_speedup

QUESTION = {"question_index": 0, "speculative_tpot_sum_s": 0.01, "speculative_tpot_n": 1,
            "speculative_tokens": 11, "speculative_e2e_s": 0.2,
            "target_alone_tpot_sum_s": 0.03, "target_alone_tpot_n": 1,
            "target_alone_tokens": 11, "target_alone_e2e_s": 0.4}
SPEEDUP = {"n_prompts": 2, "tpot": 3.0, "speculative_in_flight": 1.0,
           "target_alone_in_flight": 1.0,
           "per_question": [QUESTION, {**QUESTION, "question_index": 1}]}
FINDING = {"figure": "speedup_tpot", "status": "pass", "decision": "not_worse", "n": 8,
           "a": 3.0, "b": 2.97, "ratio": 0.99, "ratio_ci": [0.95, 1.02], "max_drop": 0.1,
           "alpha": 0.05, "level": 0.9, "definition": "..."}
PAIRED = {"status": "pass", "floors_status": "pass",
          "against": {"run_id": "ref", "reused": False},
          "result": {"decision": "not_worse", "n": 8, "a": 4.0, "b": 4.0, "difference": 0.0,
                     "relative_change": 0.0, "tolerated_drop": 0.08, "level": 0.9,
                     "tolerance": "2.0% of A (server_avg)"},
          "speedup": [FINDING, {**FINDING, "figure": "speedup_throughput"}]}


def test_honest_sums_and_findings_pass() -> None:
    check_speedup("measurement.speedup", SPEEDUP)
    check_paired(PAIRED, 100.0)
    check_paired({**PAIRED, "speedup": [{"figure": "speedup_tpot", "status": "error",
                                         "reason": "A has no per-question speedup sums"}]},
                 100.0)
    check_paired({k: v for k, v in PAIRED.items() if k != "speedup"}, 100.0)


@pytest.mark.parametrize(("change", "field"), [
    ({"speculative_tpot_sum_s": -0.1}, "speculative_tpot_sum_s"),
    ({"target_alone_e2e_s": float("nan")}, "target_alone_e2e_s"),
    ({"speculative_tokens": "11"}, "speculative_tokens"),
    ({"speculative_tpot_n": 1.5}, "speculative_tpot_n"),
    ({"target_alone_tpot_n": 0}, "target_alone_tpot_n"),
    ({"question_index": -1}, "question_index"),
    ({"speculative_e2e_s": None}, "speculative_e2e_s"),
])
def test_an_impossible_question_sum_is_refused_naming_it(change: dict[str, Any],
                                                          field: str) -> None:
    rows = [{**QUESTION, **change}, {**QUESTION, "question_index": 1}]
    with pytest.raises(BadFile, match=rf"per_question\[0\]\.{field}"):
        check_speedup("measurement.speedup", {**SPEEDUP, "per_question": rows})


@pytest.mark.parametrize(("change", "field"), [
    ({"per_question": [QUESTION, QUESTION]}, "repeated"),
    ({"per_question": [QUESTION]}, "n_prompts says 2"),
    ({"per_question": {"0": QUESTION}}, "expected a list"),
    ({"per_question": [QUESTION, 7]}, "expected an object"),
    ({"speculative_in_flight": 0.0}, "speculative_in_flight"),
    ({"target_alone_in_flight": -1.0}, "target_alone_in_flight"),
])
def test_impossible_sums_as_a_whole_are_refused(change: dict[str, Any], field: str) -> None:
    with pytest.raises(BadFile, match=field):
        check_speedup("measurement.speedup", {**SPEEDUP, **change})


@pytest.mark.parametrize(("change", "field"), [
    ({"figure": "accept_length"}, "figure"),
    ({"status": "skipped"}, "status"),
    ({"status": "fail"}, "contradicts"),
    ({"status": "error"}, "cannot be error"),
    ({"decision": "maybe"}, "decision"),
    ({"ratio": 1.5}, "not b / a"),
    ({"ratio_ci": [1.0, 1.1]}, "outside its own interval"),
    ({"a": 0.0}, "above 0"),
    ({"b": "2.97"}, r"\.b"),
    ({"n": 1}, r"\.n"),
    ({"max_drop": 1.0}, "max_drop"),
    ({"alpha": 0.7}, "alpha"),
    ({"decision": None, "reason": None, "status": "error"}, "reason"),
    ({"decision": None, "status": "pass"}, "without a test"),
])
def test_an_impossible_finding_is_refused_naming_it(change: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(BadFile, match=field):
        check_paired({**PAIRED, "speedup": [{**FINDING, **change}]}, 100.0)


def test_a_figure_twice_or_too_many_findings_are_refused() -> None:
    with pytest.raises(BadFile, match="given twice"):
        check_paired({**PAIRED, "speedup": [FINDING, FINDING]}, 100.0)
    with pytest.raises(BadFile, match="at most 2"):
        check_paired({**PAIRED, "speedup": [FINDING] * 3}, 100.0)
    with pytest.raises(BadFile, match="expected a list"):
        check_paired({**PAIRED, "speedup": FINDING}, 100.0)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(FINDING)), json_values, max_size=6),
       st.dictionaries(st.sampled_from(sorted(QUESTION)), json_values, max_size=4))
def test_any_value_is_accepted_or_refused_never_a_crash(finding: dict[str, Any],
                                                        question: dict[str, Any]) -> None:
    for check, value in ((lambda v: check_paired({**PAIRED, "speedup": [v]}, 100.0),
                          {**FINDING, **finding}),
                         (lambda v: check_speedup("measurement.speedup", {
                             **SPEEDUP, "per_question": [v, {**QUESTION, "question_index": 9}]}),
                          {**QUESTION, **question})):
        with contextlib.suppress(BadFile):  # refused, naming the field: never a crash
            check(json.loads(json.dumps(value, allow_nan=True)))
