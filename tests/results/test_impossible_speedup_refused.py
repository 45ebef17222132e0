"""An impossible speedup (negative, zero, NaN, infinite, a string, outside its own
interval) or an impossible target-alone row is refused by every reader, naming the field
(harness.results.possible), never plotted; any value is judged without a crash."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.results.checks import BadFile
from harness.results.layout import TARGET_ALONE_FILE
from harness.results.possible import check_speedup, check_target_alone, check_target_alone_row
from harness.results.readers import BadRecord, parse_run, read_run, read_target_alone
from harness.results.rows import Skip
from tests.results.records import make_run

GOOD = {"n_prompts": 4, "tpot": 2.0, "tpot_ci": [1.5, 2.5], "throughput": 1.8,
        "throughput_ci": [1.2, 2.2], "ci_level": 0.95, "target_alone_tpot_s": 0.02,
        "speculative_tpot_s": 0.01, "target_alone_output_tok_s": 50.0,
        "speculative_output_tok_s": 90.0, "definitions": {"speedup_tpot": "..."}}


def test_an_honest_speedup_passes() -> None:
    check_speedup("measurement.speedup", GOOD)
    check_speedup("measurement.speedup", {**GOOD, "tpot": None, "tpot_ci": None,
                                          "note": "the target-alone run failed"})


@pytest.mark.parametrize(("change", "field"), [
    ({"tpot": -1.0}, "speedup.tpot"),
    ({"tpot": 0.0, "tpot_ci": None}, "speedup.tpot"),
    ({"tpot": 0, "tpot_ci": None}, "speedup.tpot"),
    ({"throughput": float("nan")}, "speedup.throughput"),
    ({"throughput": float("inf")}, "speedup.throughput"),
    ({"throughput": "1.8"}, "speedup.throughput"),
    ({"tpot": True}, "speedup.tpot"),
    ({"tpot_ci": [2.5, 3.0]}, "outside its own interval"),
    ({"tpot_ci": [2.5, 1.5]}, "speedup.tpot_ci"),
    ({"throughput_ci": ["1", 2]}, "speedup.throughput_ci"),
    ({"n_prompts": -1}, "speedup.n_prompts"),
    ({"speculative_tpot_s": -0.1}, "speedup.speculative_tpot_s"),
    ({"tpot": 1e300, "tpot_ci": None}, "speedup.tpot"),
])
def test_an_impossible_speedup_is_refused_naming_it(change: dict[str, Any],
                                                     field: str) -> None:
    with pytest.raises(BadFile, match=field):
        check_speedup("measurement.speedup", {**GOOD, **change})


def test_the_target_alones_summary_is_checked() -> None:
    check_target_alone("target_alone", {"status": "measured", "n_requests": 4,
                                        "n_planned": 4})
    with pytest.raises(BadFile, match=r"target_alone\.n_requests"):
        check_target_alone("target_alone", {"n_requests": 5, "n_planned": 4})
    with pytest.raises(BadFile, match=r"target_alone\.latency\.output_tok_s"):
        check_target_alone("target_alone", {"latency": {"n_requests": 1, "n_timed": 1,
                                                        "output_tok_s": -3.0}})


@functools.cache
def honest_record() -> str:
    folder = make_run(Path(tempfile.mkdtemp(prefix="speedup-record-")))
    return (folder / "run.json").read_text()


def _with(folder: Path, section: str, value: Any) -> str:
    data = json.loads((folder / "run.json").read_text())
    if section == "speedup":
        data["measurement"]["speedup"] = value
    else:
        data[section] = value
    return json.dumps(data)


def test_every_reader_refuses_a_record_holding_an_impossible_speedup(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    (folder / "run.json").write_text(_with(folder, "speedup", {**GOOD, "tpot": -2.0}))
    with pytest.raises(BadRecord, match=r"measurement\.speedup\.tpot"):
        read_run(folder)


@settings(max_examples=150, deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["tpot", "tpot_ci", "throughput", "throughput_ci", "n_prompts",
                         "ci_level", "speculative_tpot_s", "definitions", "note"]),
        inner, max_size=6), max_leaves=16))
def test_any_speedup_value_is_refused_or_read_never_a_crash(value: Any) -> None:
    data = json.loads(honest_record())
    data["measurement"]["speedup"] = value
    try:
        record = parse_run(json.dumps(data)).record
    except Skip as error:  # refused, naming the field
        assert str(error)  # a reason (the field, or the document's own limits)
    else:  # read: then every figure in it is possible
        found = record.measurement.speedup if record.measurement else None
        for figure in (found.tpot, found.throughput) if found else ():
            assert figure is None or 0 < figure < float("inf")


@settings(max_examples=150, deadline=None)
@given(tpot=st.one_of(st.floats(), st.integers(-10**30, 10**30), st.text(max_size=5),
                      st.booleans()))
def test_a_speedup_is_kept_only_when_positive_and_finite(tpot: Any) -> None:
    honest = (isinstance(tpot, int | float) and not isinstance(tpot, bool)
              and 0 < tpot <= 1e6 and tpot == tpot)
    try:
        check_speedup("measurement.speedup", {"n_prompts": 3, "tpot": tpot})
    except BadFile as error:
        assert not honest, error
        assert "measurement.speedup.tpot" in str(error)
    else:
        assert honest


@pytest.mark.parametrize(("row", "says"), [
    ({"verify_steps": 3}, "verify_steps"),
    ({"correct_drafts": 2}, "spec counts"),
    ({"accept_histogram": [1, 2]}, "spec counts"),
    ({"spec_accept_length": 4.0}, "spec_accept_length"),
    ({"timing": {"chunk_s": [0.2, 0.1], "ttft_s": 0.2}}, "time order"),
])
def test_an_impossible_target_alone_row_is_skipped(row: dict[str, Any], says: str,
                                                    tmp_path: Path) -> None:
    honest = {"index": 0, "question_index": 0, "completion_tokens": 30, "verify_steps": 0,
              "spec_accept_length": 0.0, "latency_s": 1.0}
    assert check_target_alone_row(honest) is None
    assert says in (check_target_alone_row({**honest, **row}) or "")
    (tmp_path / TARGET_ALONE_FILE).write_text(json.dumps(honest) + "\n"
                                              + json.dumps({**honest, **row}) + "\n")
    assert len(read_target_alone(tmp_path)) == 1  # the honest row read, the other skipped
    with pytest.raises(BadRecord, match="line 2"):
        read_target_alone(tmp_path, strict=True)


@pytest.mark.parametrize("value", [-1.0, 0, "1.5", True, 1e9])
def test_a_record_whose_suite_holds_an_impossible_speedup_floor_is_refused(
        value: Any, tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    data = json.loads((folder / "run.json").read_text())
    data["suite"]["document"]["floors"]["speedup_tpot"] = value
    with pytest.raises(Skip, match=r"floors\.speedup_tpot"):
        parse_run(json.dumps(data))
