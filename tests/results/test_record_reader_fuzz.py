"""Property-based (issue 20, case 8; issue 37): the door's run-record reader (`read_run`) and
requests reader (`read_requests`, `iter_request_rows`), fed any bytes, any mutation of a
valid document, numbers as strings or values nested past any depth, give a typed object
(`RunRecord`, `RequestRow`) or one clean line (`BadRecord` naming the file, a skip line
naming the file and line), never another exception and never a hang (each example has a
deadline). Seeded and small, so CI stays fast."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.errors import BadInput
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from harness.results.readers import (
    BadRecord,
    iter_request_rows,
    read_requests,
    read_run,
    request_problem,
)
from harness.results.record import RequestRow, RunRecord
from tests.results.record_fuzz import cut_or_spliced, json_trees
from tests.results.records import make_run

FUZZ = settings(max_examples=120, deadline=timedelta(seconds=5), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

values = json_trees(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats() | st.sampled_from([0, -3.0, 42, 10**30, math.nan, math.inf, 2**63])
    | st.text(max_size=8),
    3, 5,
)  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("readers") / "results", n=6)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> bytes:
    data = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(values)
    text = json.dumps(data).encode()
    cut = draw(st.sampled_from(["none", "none", "truncate", "splice", "duplicate"]))
    if cut == "duplicate" and text.startswith(b"{") and len(text) > 2:
        return b'{"measurement": {}, ' + text[1:]
    return cut_or_spliced(draw, text, cut, most_spliced=6)


def _check_record(folder: Path, text: bytes) -> None:
    (folder / RUN_FILE).write_bytes(text)
    try:
        record = read_run(folder)
    except BadInput as error:
        assert error.message and "\n" not in error.message, error.message
        assert str(folder / RUN_FILE) in error.message
        return
    assert isinstance(record, RunRecord)
    m = record.measurement
    if m is not None and m.accept_length is not None:  # what was accepted is possible
        assert math.isfinite(m.accept_length) and m.accept_length >= 1


@FUZZ
@given(data=st.data())
def test_record_reader_on_mutations(run_dir: Path, data: st.DataObject) -> None:
    document = json.loads((run_dir / RUN_FILE).read_text())
    with tempfile.TemporaryDirectory() as folder:
        _check_record(Path(folder), data.draw(mutated(document)))




def _check_requests(folder: Path, text: bytes) -> None:
    file = folder / REQUESTS_FILE
    file.write_bytes(text)
    skipped: list[str] = []
    rows = list(iter_request_rows(file, skipped))
    for row in rows:
        assert isinstance(row, RequestRow) and request_problem(row.model_dump()) is None
    for message in skipped:
        assert "\n" not in message and str(file) in message
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(rows) + len(skipped) <= max(len(lines), 1)
    try:  # strict (a reused reference): all of them, or the first bad one named
        assert read_requests(folder, strict=True) == rows
    except BadRecord as error:
        assert skipped and error.message in skipped[0].removeprefix("skipped ")
        assert "\n" not in error.message and str(file) in error.message


@FUZZ
@given(data=st.data())
def test_requests_reader_on_mutations(run_dir: Path, data: st.DataObject) -> None:
    first = json.loads((run_dir / REQUESTS_FILE).read_text().splitlines()[0])
    lines = [data.draw(mutated(first)) for _ in range(data.draw(st.integers(1, 3)))]
    with tempfile.TemporaryDirectory() as folder:
        _check_requests(Path(folder), b"\n".join(lines))


@pytest.mark.parametrize("check", [_check_record, _check_requests], ids=["record", "requests"])
@FUZZ
@given(text=st.binary(max_size=200))
def test_record_and_requests_readers_on_any_bytes(check: Callable[[Path, bytes], None],
                                                  text: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        check(Path(folder), text)


def _nested(depth: int, leaf: Any) -> Any:
    for i in range(depth):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


@FUZZ
@given(data=st.data(), depth=st.integers(1, 3000))
def test_record_reader_on_any_nesting(run_dir: Path, data: st.DataObject, depth: int) -> None:
    """A value nested to any depth anywhere in a record: a record or one clean line (a
    RecursionError once ended `harness` with a traceback)."""
    document = json.loads((run_dir / RUN_FILE).read_text())
    path = data.draw(st.sampled_from([p for p in _paths(document) if p]))
    parent = document
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = _nested(depth, data.draw(values))
    try:
        text = json.dumps(document).encode()
    except RecursionError:
        return  # deeper than this Python writes: no file to read
    with tempfile.TemporaryDirectory() as folder:
        _check_record(Path(folder), text)


@FUZZ
@given(data=st.data())
def test_requests_reader_on_numbers_as_strings(run_dir: Path, data: st.DataObject) -> None:
    """A count or figure of a request row given as a string is never read as a number."""
    row = json.loads((run_dir / REQUESTS_FILE).read_text().splitlines()[0])
    key = data.draw(st.sampled_from(sorted(k for k, v in row.items()
                                           if isinstance(v, int | float)
                                           and not isinstance(v, bool))))
    row[key] = data.draw(st.sampled_from([str(row[key]), "NaN", "-1", " 3", "1e9"]))
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / REQUESTS_FILE).write_text(json.dumps(row) + "\n")
        skipped: list[str] = []
        assert list(iter_request_rows(Path(folder) / REQUESTS_FILE, skipped)) == []
        assert len(skipped) == 1 and key in skipped[0]
