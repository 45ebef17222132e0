"""A forced-acceptance ladder's record read back through the door (`readers.read_forced`):
what `harness forced` wrote reads as it was; any other bytes, deep nesting, numbers as
strings, impossible values (an accept length above the block or below 1, a speedup of 0,
a CI that does not hold its figure) are refused as a BadRecord naming the file, and
`harness plot` of a damaged ladder ends with exit 2 and one line, never a traceback."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.results.forced import (
    FORCED,
    FORCED_FILE,
    BreakEven,
    DraftFinding,
    ForcedPoint,
    ForcedRecord,
    ForcedSplit,
    SystemFinding,
)
from harness.results.readers import BadRecord, read_forced
from tests.results.record_fuzz import (
    any_bytes,
    assert_plot_refuses,
    read_or_refused,
    replaced,
    written_then_read,
)


def _record() -> ForcedRecord:
    return ForcedRecord(
        forced_id="ab12cd34", suite="tiny", engine="reference",
        knob="REFERENCE_SIMULATE_ACC_LEN (environment; decoding.py)", block_size=8,
        started_at=datetime(2026, 1, 2, tzinfo=UTC), metric="server_avg",
        definitions={"achieved": "tokens per verify step"},
        points=[ForcedPoint(achieved=3.2, speedup_tpot=0.8, speedup_tpot_ci=(0.7, 0.9),
                            series="tiny-forced-real", run_id="aa", run_dir="runs/x",
                            status="pass"),
                ForcedPoint(forced=8.0, achieved=8.0, speedup_tpot=1.9,
                            speedup_throughput=2.0, speedup_throughput_ci=(1.8, 2.2),
                            series="tiny-forced-8", settings={"X": "8"}, status="pass"),
                ForcedPoint(forced=1.0, series="tiny-forced-1", status="error",
                            reasons=["measurement: server exited"])],
        break_even=[BreakEven(figure="speedup_tpot", accept_length=4.1, note="interpolated")],
        split=ForcedSplit(
            against_spec="reference:noise=0", against_forced_id="ef56", against_dir="forced/x",
            system_max_drop=0.1, draft_tolerance="5.0% of A (server_avg)", alpha=0.05,
            inconclusive="pass", system_status="pass", draft_status="fail", status="fail",
            blamed=["draft"],
            system=[SystemFinding(forced=8.0, figure="speedup_tpot", status="pass",
                                  decision="not_worse", n=4, a=1.9, b=1.9, ratio=1.0,
                                  ratio_ci=(0.95, 1.05), level=0.975, alpha=0.0125)],
            draft=DraftFinding(status="fail", decision="worse", n=4, a=3.2, b=2.1,
                               difference=-1.1, difference_ci=(-1.3, -0.9)),
            reasons=["whose fault: the draft lost the speedup"]),
        status="fail")


def test_written_then_read(tmp_path: Path) -> None:
    record = _record()
    folder = FORCED.new_folder(tmp_path, "tiny", record.started_at, record.forced_id)
    assert written_then_read(record, folder, tmp_path, FORCED.write, read_forced) == record
    assert read_forced(folder / FORCED_FILE) == record


def _replaced(path: tuple[str | int, ...], value: str) -> bytes:
    return replaced(_record().model_dump_json(), path, value)


PATHS: list[tuple[str | int, ...]] = [
    ("points",), ("block_size",), ("status",), ("forced_id",), ("points", 0, "achieved"),
    ("points", 1, "forced"), ("points", 1, "speedup_tpot"), ("points", 0, "speedup_tpot_ci"),
    ("split", "blamed"), ("split", "system", 0, "ratio_ci"), ("split", "draft", "status"),
]


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(any_bytes(
    st.sampled_from(PATHS).flatmap(
        lambda path: st.sampled_from(['"1"', "-1", "0", "null", "[[[[[]]]]]", '"pass"',
                                      "1e999", "9", '["x"]', "[2, 1]"])
        .map(lambda value, path=path: _replaced(path, value))),
    st.just(json.dumps({"a": "x" * 200_000}).encode()),
))
def test_any_bytes_read_or_refused(tmp_path: Path, data: bytes) -> None:
    record = read_or_refused(tmp_path / FORCED_FILE, data, read_forced)
    if record is None:
        return
    assert isinstance(record, ForcedRecord)
    for point in record.points:  # what a reader gets is possible
        for value in (point.forced, point.achieved):
            assert value is None or 1.0 <= value <= record.block_size
        for value in (point.speedup_tpot, point.speedup_throughput):
            assert value is None or value > 0


@pytest.mark.parametrize(("path", "value", "named"), [
    (("block_size",), '"8"', "block_size"),  # a number as a string
    (("points", 0, "achieved"), "9", "above the block size"),
    (("points", 0, "achieved"), "0.5", "points.0.achieved"),
    (("points", 1, "forced"), '"8"', "points.1.forced"),
    (("points", 1, "speedup_tpot"), "0", "points.1.speedup_tpot"),
    (("points", 0, "speedup_tpot_ci"), "[0.9, 1.0]", "does not hold"),
    (("split", "blamed"), '["kernel"]', "split.blamed"),
    (("status",), '"maybe"', "status"),
])
def test_impossible_values_are_named(tmp_path: Path, path: tuple[str | int, ...], value: str,
                                     named: str) -> None:
    file = tmp_path / FORCED_FILE
    file.write_bytes(_replaced(path, value))
    with pytest.raises(BadRecord, match=named.replace(".", r"\.")):
        read_forced(file)


@pytest.mark.parametrize("damage", ['{"forced_id": 3', "", "[]", "not json"])
def test_plot_of_a_damaged_ladder_is_bad_input(tmp_path: Path, damage: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert_plot_refuses(tmp_path / "results" / "forced" / "tiny" / "20260102T000000Z-ab12cd34",
                        FORCED_FILE, damage, capsys)


def test_plot_redraws_a_stored_ladder_and_refuses_a_reference_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    record = _record()
    folder = FORCED.new_folder(results, "tiny", record.started_at, record.forced_id)
    split = record.split
    assert split is not None
    theirs = record.model_copy(update={"forced_id": "ef56", "split": None, "status": "pass"})
    their_folder = FORCED.new_folder(results, "tiny", record.started_at, "ef56")
    FORCED.write(their_folder, theirs, results)
    here = split.model_copy(update={"against_dir": str(their_folder.relative_to(results))})
    FORCED.write(folder, record.model_copy(update={"split": here}), results)
    assert main(["plot", str(folder)]) == 0
    assert (folder / "forced.png").stat().st_size > 0

    outside = split.model_copy(update={"against_dir": "../../etc"})
    other = FORCED.new_folder(results, "tiny", record.started_at, "gh78")
    FORCED.write(other, record.model_copy(update={"split": outside}), results)
    assert main(["plot", str(other)]) == 2
    err = capsys.readouterr().err
    assert "outside" in err and "Traceback" not in err
