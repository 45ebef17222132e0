"""A sweep's record read back: what the sweep wrote reads as it was; any other bytes,
deep nesting, numbers as strings or impossible values are refused as a BadRecord naming
the file (exit 2 in `harness plot`), never a traceback."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.results.readers import BadRecord
from harness.results.sweeps import (
    SWEEP_FILE,
    SWEEPS,
    GateFinding,
    SweepGate,
    SweepPoint,
    SweepRecord,
    read_sweep,
)
from tests.results.record_fuzz import (
    any_bytes,
    assert_plot_refuses,
    read_or_refused,
    replaced,
    written_then_read,
)


def _record() -> SweepRecord:
    return SweepRecord(
        sweep_id="ab12cd34", suite="tiny", started_at=datetime(2026, 1, 2, tzinfo=UTC),
        concurrencies=[1, 4], metric="server_avg", definition="tokens per verify step",
        points=[SweepPoint(concurrency=1, series="tiny.c1", run_id="aa", run_dir="runs/x",
                           status="pass"),
                SweepPoint(concurrency=4, series="tiny.c4", status="error",
                           reasons=["measurement: server exited"])],
        gate=SweepGate(max_drop=0.05, alpha=0.05, inconclusive="pass",
                       findings=[GateFinding(concurrency=4, status="error",
                                             reasons=["no gate: no record"])]),
        status="error")


def test_written_then_read(tmp_path: Path) -> None:
    record = _record()
    folder = SWEEPS.new_folder(tmp_path, "tiny", record.started_at, record.sweep_id)
    assert written_then_read(record, folder, tmp_path, SWEEPS.write, read_sweep) == record


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(any_bytes(
    st.sampled_from(["concurrencies", "points", "status", "metric", "sweep_id"]).flatmap(
        lambda key: st.sampled_from(['"1"', "-1", "null", "[[[[[]]]]]", '"pass"', "1e999"])
        .map(lambda value, key=key: _replaced(key, value))),
))
def test_any_bytes_read_or_refused(tmp_path: Path, data: bytes) -> None:
    record = read_or_refused(tmp_path / SWEEP_FILE, data, read_sweep)
    if record is not None:
        assert isinstance(record, SweepRecord)
        assert all(point.concurrency >= 1 for point in record.points)


@pytest.mark.parametrize(("key", "value"), [
    ("concurrencies", '["1", 4]'), ("concurrencies", "[0, 4]"), ("points", '"x"'),
    ("status", '"maybe"'), ("metric", '"mean"'), ("sweep_id", "7")])
def test_strings_for_numbers_and_impossible_values_refused(tmp_path: Path, key: str,
                                                           value: str) -> None:
    file = tmp_path / SWEEP_FILE
    file.write_bytes(_replaced(key, value))
    with pytest.raises(BadRecord, match=key):
        read_sweep(file)


def _replaced(key: str, value: str) -> bytes:
    return replaced(_record().model_dump_json(), (key,), value)


def test_plot_of_a_damaged_sweep_is_bad_input(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert_plot_refuses(tmp_path / "results" / "sweeps" / "tiny" / "20260102T000000Z-ab12cd34",
                        SWEEP_FILE, '{"sweep_id": 3', capsys)
