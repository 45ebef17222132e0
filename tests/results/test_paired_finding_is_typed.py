"""A run record's `paired` block (`harness run --against`) is read once, by the door
(`harness.results.readers`), into a typed, frozen `PairedFinding`: every reader uses its
attributes. A malformed block (a wrong type, a number as a string, NaN, deep nesting, an
impossible figure) is refused by the door with one line naming the file and field, as
any damaged record is; a bound of exactly 0.0 and a sequential run's "open" floors are
findings like any other."""

from __future__ import annotations

import json
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis import paired_report
from harness.analysis.paired_report import Latest
from harness.results.layout import RUN_FILE
from harness.results.readers import BadRecord, read_run
from harness.results.record import PairedFinding
from tests.results.records import make_run
from tests.results.test_every_reader_fuzz import _rich
from tests.results.test_record_reader_fuzz import _paths

FUZZ = settings(max_examples=60, deadline=timedelta(seconds=10), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def paired_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    run_dir = make_run(tmp_path_factory.mktemp("paired") / "results", n=6)
    data = _rich(json.loads((run_dir / RUN_FILE).read_text()))
    data["paired"]["gate"] = {"against": "reference", "relative_drop": 0.02,
                              "absolute_drop": None, "metric": None, "alpha": 0.05,
                              "beta": 0.2, "inconclusive": "pass", "paired_sd": None,
                              "calibration": None}
    return data


def _read(data: dict[str, Any] | str) -> Any:
    """read_run of `data` (a document, or the raw text of one); the record or BadRecord."""
    with tempfile.TemporaryDirectory() as folder:
        text = data if isinstance(data, str) else json.dumps(data)
        (Path(folder) / RUN_FILE).write_text(text)
        try:
            return read_run(folder)
        except BadRecord as error:
            assert "\n" not in error.message and RUN_FILE in error.message
            return error


def _printed(finding: PairedFinding) -> None:
    """What every reader prints of a finding the door let through."""
    paired_report.finding_line(finding)


def test_the_door_gives_a_typed_frozen_finding(paired_run: dict[str, Any]) -> None:
    record = _read(paired_run)
    finding = record.paired
    assert isinstance(finding, PairedFinding)
    assert finding.against.run_id == "ref" and finding.against.reused is True
    assert finding.result.decision == "not_worse" and finding.result.n == 40
    assert finding.gate is not None and finding.gate.relative_drop == 0.02
    with pytest.raises(pydantic.ValidationError):
        finding.status = "fail"  # type: ignore[misc]
    with pytest.raises(pydantic.ValidationError):
        finding.result.a = 9.0  # type: ignore[misc]
    table = paired_report.rows({"s": Latest(Path("x"), record)})
    assert table[0]["against_run"] == "ref" and table[0]["gate_status"] == "pass"
    assert "against run ref (reference)" in paired_report.finding_line(finding)


def test_a_bound_of_zero_and_open_floors_are_findings(paired_run: dict[str, Any]) -> None:
    data = json.loads(json.dumps(paired_run))
    result = data["paired"]["result"]
    result["a"] = result["b"]
    result["difference"], result["relative_change"] = 0.0, 0.0
    result["difference_ci"] = [0.0, 0.0]
    data["paired"]["floors_status"] = "open"  # the judge's word for floors still open
    finding = _read(data).paired
    assert finding.result.difference_ci == (0.0, 0.0) and finding.floors_status == "open"
    data["paired"]["result"]["difference_ci"] = None  # a finding recorded without its CI
    assert "no CI" in paired_report.finding_line(_read(data).paired)


WRONG = st.sampled_from(["2.5", "NaN", "inf", "", "true", True, None, [], {}, [1.0], {"a": 1},
                         -1.0, 1e308, 0, 2**63 - 1])


@FUZZ
@given(data=st.data())
def test_a_malformed_paired_block_is_refused_by_the_door(paired_run: dict[str, Any],
                                                         data: st.DataObject) -> None:
    document = json.loads(json.dumps(paired_run))
    path = data.draw(st.sampled_from([p for p in _paths(document["paired"]) if p]))
    value = data.draw(WRONG)
    target = document["paired"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    found = _read(document)
    if isinstance(found, BadRecord):
        assert "paired" in found.reason, found.reason
        return
    # let through: then it is a whole, typed finding every reader prints
    assert isinstance(found.paired, PairedFinding)
    _printed(found.paired)


@pytest.mark.parametrize("edit", [
    lambda p: p["result"].update(a="2.6"),  # a number as a string
    lambda p: p["result"].update(n=40.0),  # a count as a float
    lambda p: p["result"].update(n="40"),
    lambda p: p["against"].update(reused="true"),
    lambda p: p["against"].update(run_id=7),
    lambda p: p.update(status="PASS"),
    lambda p: p.update(floors_status="maybe"),
    lambda p: p["result"].update(decision="better"),
    lambda p: p["result"].update(level=0.0),  # a level of 0 is no interval
    lambda p: p["result"].update(tolerance=None),
    lambda p: p["gate"].update(alpha="0.05"),
    lambda p: p["gate"].update(relative_drop=2.0),
    lambda p: p["gate"].update(inconclusive="maybe"),
    lambda p: p.update(gate=[1, 2]),
    lambda p: p.update(result=[]),
    lambda p: p.update(against="ref"),
])
def test_each_wrong_type_is_named(paired_run: dict[str, Any], edit: Any) -> None:
    document = json.loads(json.dumps(paired_run))
    edit(document["paired"])
    found = _read(document)
    assert isinstance(found, BadRecord) and "paired" in found.reason, found


def test_nan_and_deep_nesting_in_the_paired_block_are_refused(
        paired_run: dict[str, Any]) -> None:
    text = json.dumps(paired_run).replace('"margin_sd": 0.3', '"margin_sd": NaN')
    assert "NaN" in text
    assert isinstance(_read(text), BadRecord)
    for depth in (50, 5000):
        deep = "[" * depth + "]" * depth
        text = json.dumps(paired_run).replace('"n": 40', f'"n": {deep}')
        assert isinstance(_read(text), BadRecord)
        text = json.dumps(paired_run).replace('"tolerance": "2.0% of A"',
                                              f'"extra": {deep}, "tolerance": "2.0% of A"')
        found = _read(text)  # an extra field nested deep: refused, or kept as data
        assert isinstance(found, BadRecord) or isinstance(found.paired, PairedFinding)
