"""Property-based, over every reader behind the one door (`harness.results.readers`):
numbers given as strings, file types and sizes, the readers other than the loader (run
records for the paired gate, calibrations), impossible request rows, forged index lines
and entry-count blow-ups. A reader gives a value whose figures are possible, or one clean
line, never another exception and never a hang. Seeded (derandomize) and small: the whole
corpus of `tests/results/test_*fuzz.py` stays inside a minute on one core."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.analysis import paired_report
from harness.analysis.paired_report import Latest
from harness.results import possible, store
from harness.results.checks import MOST_ACCEPT_LENGTH
from harness.results.index import INDEXED
from harness.results.layout import INDEX_FILE, REQUESTS_FILE, RUN_FILE, SNAPSHOT_FILE
from harness.results.readers import (
    BadRecord,
    iter_request_rows,
    read_calibration,
    read_requests,
    read_run,
)
from harness.results.record import RunRecord
from harness.speculation.bounds import StepBound, step_bound
from tests.results.records import make_run
from tests.results.test_record_reader_fuzz import FUZZ as RECORD_FUZZ
from tests.results.test_record_reader_fuzz import _paths, mutated, values

FUZZ = settings(RECORD_FUZZ, max_examples=40, deadline=timedelta(seconds=10))
SUITE = "tiny_dflash_cpu"


def _rich(data: dict[str, Any]) -> dict[str, Any]:
    """A record with every kind of figure a reader prints: categories, positions, the
    paired finding, floors and baselines."""
    m = data["measurement"]
    value = m["accept_length"]
    m["categories"] = {"math": {"n_prompts": 3, "n_requests": 3, "accept_length": value,
                                "accept_length_ci": [value - 0.1, value + 0.1],
                                "accuracy": 0.5, "per_position_acceptance": [0.5, 0.25],
                                "per_position_ci": [[0.4, 0.6], [0.2, 0.3]]}}
    m["per_position_ci"] = [[max(0.0, p - 0.1), min(1.0, p + 0.1)]
                            for p in m["per_position_acceptance"]]
    a = 2.6
    data["paired"] = {
        "against": {"run_id": "ref", "spec": "reference", "reused": True, "path": "x"},
        "status": "pass", "floors_status": "pass",
        "result": {"decision": "not_worse", "n": 40, "a": a, "b": value,
                   "difference": value - a, "difference_ci": [value - a - 0.1, value - a + 0.1],
                   "level": 0.9, "relative_change": (value - a) / a, "tolerated_drop": 0.05,
                   "alpha": 0.05, "tolerance": "2.0% of A", "margin_sd": 0.3}}
    return data


@pytest.fixture(scope="module")
def rich_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = make_run(tmp_path_factory.mktemp("door") / "results", n=6)
    data = _rich(json.loads((run_dir / RUN_FILE).read_text()))
    (run_dir / RUN_FILE).write_text(json.dumps(data))
    read_run(run_dir)  # the fixture itself is a valid record
    return run_dir


def _numeric_paths(value: Any) -> list[tuple[Any, ...]]:
    found = []
    for path in _paths(value):
        leaf = value
        for key in path:
            leaf = leaf[key]
        if isinstance(leaf, int | float) and not isinstance(leaf, bool):
            found.append(path)
    return found


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _printed(record: RunRecord) -> None:
    """What every reader of a run record prints of it: none may fail on what passed."""
    if record.paired is not None:
        table = paired_report.rows({SUITE: Latest(Path("x"), record)})
        paired_report.markdown(table)
        paired_report.finding_line(record.paired)


@FUZZ
@given(data=st.data())
def test_a_number_given_as_a_string_is_never_read_as_one(rich_dir: Path,
                                                         data: st.DataObject) -> None:
    document = json.loads((rich_dir / RUN_FILE).read_text())
    path = data.draw(st.sampled_from(_numeric_paths(document)))
    leaf = document
    for key in path:
        leaf = leaf[key]
    text = data.draw(st.sampled_from([str(leaf), "NaN", "inf", "-3", " 2.5", "1e308"]))
    _set(document, path, text)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / RUN_FILE).write_text(json.dumps(document))
        try:
            record = read_run(folder)
        except BadRecord as error:
            assert "\n" not in error.message and str(Path(folder) / RUN_FILE) in error.message
        else:  # only where the model keeps free text (a label, the suite document's prose)
            _printed(record)
            assert not _is_figure_path(path), path


def _is_figure_path(path: tuple[Any, ...]) -> bool:
    head = path[0]
    return head in ("measurement", "paired", "schema_version") or (
        head == "suite" and "document" in path and any(
            key in ("floors", "baselines") for key in path))


@FUZZ
@given(data=st.data())
def test_the_paired_readers_on_mutations(rich_dir: Path, data: st.DataObject) -> None:
    """Whatever the door lets through, `harness paired`, power and compare print."""
    document = json.loads((rich_dir / RUN_FILE).read_text())
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / RUN_FILE).write_bytes(data.draw(mutated(document)))
        try:
            record = read_run(folder)
        except BadRecord:
            return
        _printed(record)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("indexed") / "results"
    make_run(root, n=3)
    return root, store.load_runs(root, use_cache=False)


KINDS = ["fifo", "folder", "dev_zero", "sparse", "empty", "deep", "bytes", "link_loop"]


def _plant(file: Path, kind: str, payload: bytes) -> None:
    if kind == "fifo":
        os.mkfifo(file)
    elif kind == "folder":
        file.mkdir()
    elif kind == "dev_zero":
        file.symlink_to("/dev/zero")
    elif kind == "sparse":
        with open(file, "wb") as handle:
            handle.truncate(64 * 2**20 + 1)
    elif kind == "empty":
        file.write_bytes(b"")
    elif kind == "deep":
        file.write_bytes(b"[" * 200_000)
    elif kind == "link_loop":
        file.symlink_to(file)
    else:
        file.write_bytes(payload)


@settings(max_examples=60, deadline=timedelta(seconds=20), derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), payload=st.binary(max_size=64),
       which=st.sampled_from([RUN_FILE, REQUESTS_FILE, INDEX_FILE, SNAPSHOT_FILE,
                              "calibration"]))
def test_every_reader_on_every_file_type(indexed: tuple[Path, Any], kind: str, payload: bytes,
                                         which: str) -> None:
    import shutil

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        shutil.copytree(indexed[0], root)
        run_dir = next((root / "runs" / SUITE).glob("*/run.json")).parent
        calibration = root / "calibrations" / SUITE / "c.json"
        calibration.parent.mkdir(parents=True)
        target = {RUN_FILE: run_dir / RUN_FILE, REQUESTS_FILE: run_dir / REQUESTS_FILE,
                  INDEX_FILE: run_dir.parent / INDEX_FILE,
                  SNAPSHOT_FILE: run_dir.parent / SNAPSHOT_FILE,
                  "calibration": calibration}[which]
        if target.exists() or target.is_symlink():
            target.unlink()
        _plant(target, kind, payload)
        frame = store.load_runs(root)
        assert len(frame) <= 1
        if which in (INDEX_FILE, SNAPSHOT_FILE):
            assert len(frame) == 1  # the index is only a copy: the run is read anyway
        read_requests(run_dir)
        with contextlib.suppress(BadRecord):
            read_requests(run_dir, strict=True)
        store.load_requests(root)
        for read in (lambda: read_run(run_dir), lambda: read_calibration(calibration)):
            with contextlib.suppress(BadRecord, FileNotFoundError):
                read()
        paired_report.latest_paired(root, [SUITE])


STEPS = [None, step_bound("DFLASH", 1, None, None), step_bound("DFLASH", 8, None, None),
         step_bound("EAGLE", 8, 3, None), step_bound("UNO", 4, None, None),
         step_bound("UNO", None, 3, 2), step_bound("EAGLE", 4, 5, None, "vllm")]


@FUZZ
@given(tokens=st.integers(0, 2000), steps=st.integers(0, 300), correct=st.integers(0, 3000),
       step=st.sampled_from(STEPS),
       stated=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)))
def test_request_rows_kept_are_possible(tokens: int, steps: int, correct: int,
                                        step: StepBound | None, stated: float | None) -> None:
    """A row is kept exactly when a verify step of the settings (`step`; None: unknown,
    the loosest) could make it: its correct drafts at most T - k a step, its tokens at
    least one a step and at most T a step and the prefill token."""
    row = {"index": 0, "question_index": 0, "completion_tokens": tokens, "verify_steps": steps,
           "correct_drafts": correct, "spec_accept_length": stated, "latency_s": 0.5}
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / REQUESTS_FILE
        try:
            file.write_text(json.dumps(row, allow_nan=True) + "\n")
        except ValueError:
            return
        kept = list(iter_request_rows(file, [], step))
    bound = step or possible.UNKNOWN
    possible_row = (correct <= steps * bound.drafts
                    and steps <= tokens <= steps * bound.tokens + 1
                    and (stated is None or math.isclose(stated, tokens / steps if steps else 0.0,
                                                        rel_tol=1e-6, abs_tol=1e-9)))
    assert bool(kept) == possible_row  # every possible row kept, as typed rows
    if kept:
        assert kept[0].spec_accept_length == (tokens / steps if steps else 0.0) or stated


@FUZZ
@given(data=st.data())
def test_a_forged_index_line_never_reaches_a_reader(indexed: tuple[Path, Any],
                                                    data: st.DataObject) -> None:
    import shutil

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        shutil.copytree(indexed[0], root)
        (root / "runs" / SUITE / SNAPSHOT_FILE).unlink(missing_ok=True)
        log = root / "runs" / SUITE / INDEX_FILE
        stat = next((root / "runs" / SUITE).glob("*/run.json")).stat()
        line = json.loads(log.read_text().splitlines()[-1])
        line[2:4] = [stat.st_mtime_ns, stat.st_size]  # the copy's stamp: the line is current
        truth = indexed[1]
        for _ in range(data.draw(st.integers(1, 3))):
            at = data.draw(st.integers(4, len(line) - 1))
            line[at] = data.draw(values | st.sampled_from([-7.5, 1e308, "3.5", "pass", 99]))
        log.write_text(json.dumps(line) + "\n")
        frame = store.load_runs(root)
        assert len(frame) == 1
        row = frame.iloc[0]
        for column in ("accept_length", "ci_low", "ci_high", "accuracy", "verdict", "suite",
                       "completion_tokens", "verify_steps", "started_at"):
            forged, real = row[column], truth.iloc[0][column]
            same = (forged == real) or (isinstance(real, float) and math.isnan(real)
                                        and isinstance(forged, float) and math.isnan(forged))
            if not same:  # a forged value may pass only where it is possible
                if column in ("accept_length", "ci_low", "ci_high"):
                    assert 1 <= forged <= MOST_ACCEPT_LENGTH
                elif column == "accuracy":
                    assert 0 <= forged <= 1
                elif column == "verdict":
                    assert forged in ("pass", "fail", "error", "skipped", None)
        assert set(INDEXED) <= set(frame.columns)


LIMITS = {("measurement", "per_position_acceptance"): possible.MAX_POSITIONS,
          ("measurement", "categories"): possible.MAX_CATEGORIES,
          ("suite", "document", "baselines"): possible.MAX_BASELINES,
          ("measurement", "accept_histogram"): possible.MAX_POSITIONS}


@settings(max_examples=16, deadline=timedelta(seconds=20), derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(sorted(LIMITS)), extra=st.sampled_from([-1, 0, 1, 10**4]))
def test_entry_counts_are_bounded(rich_dir: Path, where: tuple[str, ...], extra: int) -> None:
    """10^5 per-position entries hung `plot` (400 s), 20,000 categories took 187 s."""
    document = json.loads((rich_dir / RUN_FILE).read_text())
    n = LIMITS[where] + extra
    entries: Any = {
        "per_position_acceptance": [0.5] * n, "accept_histogram": [1] * n,
        "categories": {f"c{i}": {"n_prompts": 1, "n_requests": 1} for i in range(n)},
        "baselines": [{"label": "b", "accept_length": 2.0}] * n}[where[-1]]
    if where[-1] == "per_position_acceptance":
        document["measurement"].pop("per_position_ci", None)
    _set(document, where, entries)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / RUN_FILE).write_text(json.dumps(document))
        if extra > 0:
            with pytest.raises(BadRecord, match="entries"):
                read_run(folder)
        else:
            read_run(folder)


@pytest.mark.parametrize("key", ["spec", "path"])
def test_an_optional_field_of_the_paired_finding_may_be_missing(
        rich_dir: Path, tmp_path: Path, key: str) -> None:
    """The door lets a record without `paired.against.spec` (or `.path`) through, as the
    model has them optional: every printer reads it with .get (hypothesis once found the
    report's KeyError on a missing spec)."""
    document = json.loads((rich_dir / RUN_FILE).read_text())
    del document["paired"]["against"][key]
    (tmp_path / RUN_FILE).write_text(json.dumps(document))
    record = read_run(tmp_path)
    _printed(record)
    assert paired_report.rows({SUITE: Latest(Path("x"), record)})[0]["against_run"] == "ref"
