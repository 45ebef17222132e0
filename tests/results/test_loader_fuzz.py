"""The loader never crashes: any mutation of a record is a valid row or reported once.

Hypothesis mutates a real run record (any field replaced by any JSON value, removed, the
text truncated or garbled) and a request row; the properties: `load_runs` returns, the
file is either a row or reported exactly once (path and reason); an accepted record is one
every reader of single records accepts too (`readers.read_run`, the record model); the
index gives back what parsing gives; `harness compare`, `trend` and `plot` end with an
exit code and no exception; each skip is reported once per command.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from harness.results import readers, store
from harness.results.layout import REQUESTS_FILE, RUN_FILE
from tests.results.record_fuzz import cut_or_spliced, json_trees
from tests.results.records import make_history

SUITE = "tiny_dflash_cpu"
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

json_values = json_trees(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats() | st.sampled_from([math.inf, -math.inf, math.nan, 0, -1, 2**63])
    | st.text(max_size=12)
    | st.sampled_from(["yesterday", "2025-13-01", "0001-01-01T00:00:00", "9999-12-31",
                       "2025-01-01", "pass", "server_avg", "per_request", "baseline", ""]),
    3, 6,
)  # fmt: skip


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A results folder with a short history of valid runs (copied per example)."""
    root = tmp_path_factory.mktemp("fuzz") / "results"
    make_history(root, nights=3)
    return root


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _mutate(data: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    if not path:
        return value
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if action == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


# what the loader reads: mutated more often than the rest of the record
READ = [("schema_version",), ("kind",), ("run_id",), ("label",), ("started_at",),
        ("finished_at",), ("suite",), ("suite", "name"), ("suite", "sha256"),
        ("suite", "document"), ("suite", "document", "floors"),
        ("suite", "document", "floors", "accept_length"), ("build",), ("build", "engine"),
        ("build", "options"), ("provenance",), ("provenance", "gpus"),
        ("provenance", "harness_version"), ("measurement",), ("verdict",),
        ("verdict", "status"), ("verdict", "reasons")]  # fmt: skip


@st.composite
def mutated_records(draw: st.DrawFn, template: dict[str, Any]) -> bytes:
    data = json.loads(json.dumps(template))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(data))
        read = [p for p in paths if p in READ or (len(p) == 2 and p[0] == "measurement")]
        path = draw(st.sampled_from(read) if read and draw(st.booleans()) else
                    st.sampled_from(paths))
        action = draw(st.sampled_from(["replace", "replace", "delete"])) if path else "replace"
        data = _mutate(data, path, action, draw(json_values))
    text = json.dumps(data).encode()
    garble = draw(st.sampled_from(["none", "none", "none", "truncate", "splice"]))
    return cut_or_spliced(draw, text, garble, most_spliced=4)


def _template(base: Path) -> dict[str, Any]:
    return json.loads(next((base / "runs" / SUITE).glob(f"*/{RUN_FILE}")).read_text())


@contextmanager
def _results(base: Path, text: bytes, name: str = "20990101T000000Z-mutant") -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "results"
        shutil.copytree(base, root)
        mutant = root / "runs" / SUITE / name
        mutant.mkdir()
        (mutant / RUN_FILE).write_bytes(text)
        yield root


class _Reports(logging.Handler):
    """Skip reports, as the CLI prints them (logger `harness.results.store`)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _reports() -> Iterator[_Reports]:
    handler = _Reports()
    logger = logging.getLogger("harness.results.store")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _run(argv: list[str]) -> tuple[int, str]:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)  # any exception but a HarnessError escapes here and fails
    return code, err.getvalue()


@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_any_mutated_record_is_a_row_or_reported_once(base: Path, data: st.DataObject) -> None:
    text = data.draw(mutated_records(_template(base)))
    with _results(base, text) as root, _reports() as reports:
        runs = store.load_runs(root)
        mutant = root / "runs" / SUITE / "20990101T000000Z-mutant"
        reported = [m for m in runs.attrs["skipped"] if str(mutant) in m]
        assert len(reported) + (mutant.name in "".join(runs["path"])) == 1
        assert len(runs) == 3 + (not reported)
        assert [m for m in reports.messages if str(mutant) in m] == reported
        if reported:
            assert reported[0].startswith(f"skipped {mutant / RUN_FILE}: ")
            assert reported[0].split(": ", 1)[1].strip()
            return
        row = runs[runs["path"] == str(mutant)].iloc[0]
        readers.read_run(mutant)  # what the loader accepts, the record model accepts
        assert isinstance(row["started_at"], pd.Timestamp) and row["started_at"].tz is not None
        for column in ("accept_length", "ci_low", "ci_high", "accuracy", "floor"):
            assert isinstance(row[column], float) and not math.isinf(row[column])
        # what the index gives back is what parsing gives
        pd.testing.assert_frame_equal(store.load_runs(root), store.load_runs(root, use_cache=False))


EDGE = [math.inf, -math.inf, math.nan, None, True, False, 0, -1, 2**64, 1.5, "1.5", "",
        "yesterday", "2025-01-01", "0001-01-01T00:00:00Z", "server_avg", [1, 2, 3], [], {},
        {"a": 1}]  # fmt: skip


def test_every_field_read_with_every_wrong_type(base: Path, tmp_path: Path) -> None:
    """Exhaustive: each field the loader reads, replaced by each edge value or removed, in
    one folder; every mutant is a row that the record model accepts, or reported once."""
    template = _template(base)
    root = tmp_path / "results"
    shutil.copytree(base, root)
    paths = [p for p in _paths(template) if p in READ or (len(p) == 2 and p[0] == "measurement")]
    mutants = {}
    for i, path in enumerate(paths):
        for j, value in enumerate([*EDGE, "delete"]):
            data = _mutate(json.loads(json.dumps(template)), path,
                           "delete" if value == "delete" else "replace", value)  # fmt: skip
            folder = root / "runs" / SUITE / f"20990101T000000Z-m{i:02d}-{j:02d}"
            folder.mkdir()
            (folder / RUN_FILE).write_text(json.dumps(data))
            mutants[str(folder)] = (path, value)
    with _reports() as reports:
        runs = store.load_runs(root)
    accepted = set(runs["path"]) & set(mutants)
    for folder in mutants:
        about = [m for m in runs.attrs["skipped"] if folder + "/" in m]
        assert len(about) + (folder in accepted) == 1, mutants[folder]
        assert [m for m in reports.messages if folder + "/" in m] == about
    for folder in accepted:
        readers.read_run(Path(folder))
    numbers = runs[["accept_length", "ci_low", "ci_high", "accuracy", "floor"]].to_numpy(float)
    assert not pd.isna(runs["started_at"]).any() and not (abs(numbers) == math.inf).any()
    assert len(accepted) > len(paths)  # null in optional fields, equivalent values, ...
    pd.testing.assert_frame_equal(store.load_runs(root), store.load_runs(root, use_cache=False))


def _commands_read_it_once(root: Path, reports: _Reports) -> None:
    """compare (by selectors, by a glob) and trend end with an exit code, no traceback, and
    at most one report of the mutant each."""
    mutant = str(root / "runs" / SUITE / "20990101T000000Z-mutant")
    commands = [
        ["compare", f"{SUITE}@previous", f"{SUITE}@latest", "--results", str(root), "--json"],
        ["compare", str(root / "runs" / SUITE / "*"), f"{SUITE}@latest",
         "--results", str(root), "--json"],
        ["trend", "--results", str(root), "--json"],
    ]  # fmt: skip
    for argv in commands:
        reports.messages.clear()
        code, err = _run(argv)
        assert code in (0, 1, 2, 3), (argv, code, err)
        assert "Traceback" not in err
        about = [m for m in reports.messages if mutant in m]
        assert len(about) <= 1, (argv, about)  # once per command, whoever reads it
        if argv[1].endswith("*"):
            assert code != 2 or "usable" in err  # a bad folder in a glob is skipped


def test_a_run_filed_under_another_suite_is_reported_once_by_a_glob(base: Path) -> None:
    """The index refuses a record whose suite.name is not its folder's; the glob's reader
    refuses it alike (readers.read_placed_run), not for its missing rows: one report."""
    data = _template(base)
    data["suite"]["name"] = "1.5"
    with _results(base, json.dumps(data).encode()) as root, _reports() as reports:
        _commands_read_it_once(root, reports)
        reports.messages.clear()
        code, _ = _run(["compare", str(root / "runs" / SUITE / "*"), f"{SUITE}@latest",
                        "--results", str(root), "--json"])
        assert code in (0, 1)
        mutant = root / "runs" / SUITE / "20990101T000000Z-mutant"
        assert [m for m in reports.messages if str(mutant) in m] == [
            f"skipped {mutant / RUN_FILE}: suite.name '1.5' is not its folder's "
            f"('{SUITE}')"]


# 20 random mutants: test_every_field_read_with_every_wrong_type covers each field with each
# edge value for the loader the commands share, and the case a glob read twice is above.
@settings(FUZZ, max_examples=20)
@given(data=st.data())
def test_commands_never_crash_on_a_mutated_record(base: Path, data: st.DataObject) -> None:
    text = data.draw(mutated_records(_template(base)))
    with _results(base, text) as root, _reports() as reports:
        _commands_read_it_once(root, reports)


@settings(FUZZ, max_examples=12)
@given(data=st.data())
def test_plot_never_crashes_on_a_mutated_record(base: Path, data: st.DataObject) -> None:
    text = data.draw(mutated_records(_template(base)))
    with _results(base, text) as root:
        code, err = _run(["plot", SUITE, "--results", str(root)])
        assert code in (0, 2) and "Traceback" not in err
        code, err = _run(["plot", str(root / "runs" / SUITE / "20990101T000000Z-mutant")])
        assert code in (0, 2) and "Traceback" not in err


@settings(FUZZ, max_examples=60)
@given(data=st.data())
def test_mutated_request_rows_are_skipped(base: Path, data: st.DataObject) -> None:
    run_dir = next((base / "runs" / SUITE).glob("*/"))
    lines = (run_dir / REQUESTS_FILE).read_text().splitlines()
    number = data.draw(st.integers(0, len(lines) - 1))
    row = json.loads(lines[number])
    row = _mutate(row, data.draw(st.sampled_from(list(_paths(row)))), "replace",
                  data.draw(json_values))  # fmt: skip
    lines[number] = json.dumps(row)
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / run_dir.name
        shutil.copytree(run_dir, copy)
        (copy / REQUESTS_FILE).write_text("\n".join(lines) + "\n")
        frame = store.load_requests(copy)
        assert len(frame) + len(frame.attrs["skipped"]) == len(lines)
        code, err = _run(["compare", str(copy), str(run_dir), "--json"])
        assert code == 0 and "Traceback" not in err
