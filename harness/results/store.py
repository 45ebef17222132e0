"""`results/` is the database: load its run records into pandas in one call.

Layout in `harness.results.layout`; the writer is `harness.results.writer`; each file is
read through the door (`harness.results.readers`).
Loading never fails on a bad file: any file under `runs/` or `baselines/` is a valid
record or is reported (path and reason, once per command: `harness.results.skips`) and skipped,
never rewritten; the reasons are also listed in `DataFrame.attrs["skipped"]`. Rows come
from each suite's index (`harness.results.index`), kept fresh against the run folders, so a
load parses only runs it has not seen; the run folders stay the source of truth. A run
folder without a readable record (a harness killed before it wrote run.json, a damaged
run.json) is no row but an `UnrecordedRun` in `DataFrame.attrs["unrecorded"]`: every
report counts it as a night that errored (`latest_unrecorded`).
"""

from __future__ import annotations

import logging
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.files import default_results_dir
from harness.results.index import INDEXED, Report, scan_suite
from harness.results.layout import (
    BASELINES_DIR,
    PLOTS_DIR,
    REQUESTS_FILE,
    RUN_FILE,
    RUNS_DIR,
    started_from_name,
)
from harness.results.readers import (
    BadRecord,
    iter_request_rows,
    misplaced,
    read_record,
    read_run,
    step_of_record,
)
from harness.results.rows import (
    COUNTS,
    FLAGS,
    FLOATS,
    RUN_COLUMNS,
    Skip,
    flatten_record,
    is_number,
)
from harness.results.skips import report, reporting

__all__ = [
    "PLOTS_DIR", "RUN_COLUMNS", "Skip", "UnrecordedRun", "default_results_dir", "flatten_record",
    "is_number", "latest_unrecorded", "load_requests", "load_runs", "reporting",
]  # fmt: skip

log = logging.getLogger("harness.results.store")


# ---------------------------------------------------------------- runs without a record


@dataclass(frozen=True)
class UnrecordedRun:
    """A run folder without a readable run.json: a harness killed before it wrote its
    record, a damaged record, or a run still running. Never a pass: the night errored."""

    suite: str  # its suite folder's name (the series)
    path: str  # the run folder
    reason: str  # why there is no record ("no run.json", or what is wrong with it)
    started_at: datetime  # from the folder's name, else its last change

    def describe(self) -> str:
        return f"{self.path}: no readable record ({self.reason})"


def unrecorded_run(suite: str, folder: Path, reason: str) -> UnrecordedRun:
    started = started_from_name(folder.name)
    if started is None:
        try:
            started = datetime.fromtimestamp(os.stat(folder).st_mtime, UTC)
        except OSError:
            started = datetime.now(UTC)
    return UnrecordedRun(suite, str(folder), reason, started)


def latest_unrecorded(unrecorded: Sequence[UnrecordedRun], suite: str,
                      after: datetime | None = None) -> UnrecordedRun | None:
    """The newest of `suite`'s unrecorded runs that started after `after` (a time: the
    latest record's start; None, or a missing cell of the runs' frame (NaN, NaT): any),
    else None."""
    found = [run for run in unrecorded if run.suite == suite
             and (after is None or after != after or run.started_at > after)]
    return max(found, key=lambda run: run.started_at, default=None)


# ---------------------------------------------------------------- bulk loading


Chunks = list[list[Any]]  # per RUN_COLUMNS column, its chunks (lists, or arrays of numbers)


def _runs(root: Path, suite: str | None, skipped: list[str], use_index: bool,
          unrecorded: list[UnrecordedRun]) -> Chunks:
    """Every run under root/runs, column by column (path relative to root); the folders
    without a readable record go to `unrecorded`."""
    runs = root / RUNS_DIR
    def note(path: Path | str, reason: str) -> None:
        report(skipped, path, reason)

    folders = []
    if suite is not None:
        folders = [runs / suite] if (runs / suite).is_dir() else []
    elif runs.is_dir():
        for entry in sorted(_listing(runs, note), key=lambda e: e.name):
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                folders.append(Path(entry.path))
            else:
                note(entry.path, "not a suite folder (ignored)")
    chunks: Chunks = [[] for _ in RUN_COLUMNS]
    suite_at = INDEXED.index("suite")
    for folder in folders:
        try:
            found = scan_suite(folder, note, use_index)
        except OSError as error:  # an unreadable suite folder: one line, the rest loads
            note(folder, f"cannot read: {error.strerror or error}")
            continue
        columns, own = found.columns, folder.name
        unrecorded += [unrecorded_run(own, folder / name, reason)
                       for name, reason in found.unrecorded]
        elsewhere = {i: reason for i, name in enumerate(columns[suite_at])
                     if (reason := misplaced(name, folder)) is not None}
        for i, reason in elsewhere.items():
            note(folder / found.names[i] / RUN_FILE, reason)
        if elsewhere:
            kept = sorted(set(range(len(found.names))) - set(elsewhere))
            columns = [[column[i] for i in kept] for column in columns]
            found.names = [found.names[i] for i in kept]
        paths = [f"{RUNS_DIR}/{own}/{name}" for name in found.names]
        for target, values in zip(chunks, [*columns, paths], strict=True):
            target.append(values)
    return chunks


def _listing(folder: Path, note: Report) -> list[os.DirEntry[str]]:
    """A folder's entries; none (and one line) when it cannot be read."""
    try:
        with os.scandir(folder) as entries:
            return list(entries)
    except FileNotFoundError:
        return []
    except OSError as error:
        note(folder, f"cannot read: {error.strerror or error}")
        return []


def _baselines(root: Path, skipped: list[str]) -> Chunks:
    folder = root / BASELINES_DIR
    rows = []
    listing = _listing(folder, lambda path, reason: report(skipped, path, reason))
    for entry in sorted(listing, key=lambda e: e.name) if folder.is_dir() else []:
        if entry.name.startswith("."):
            continue
        if not entry.name.endswith(".json") or not entry.is_file():
            report(skipped, entry.path, "not a baseline record (*.json): ignored")
            continue
        try:
            row = read_record(Path(entry.path))[0].row
        except FileNotFoundError:
            continue
        except Skip as why:
            report(skipped, entry.path, str(why))
            continue
        row["path"] = f"{BASELINES_DIR}/{entry.name}"
        rows.append(row)
    return [[[row[name] for row in rows]] for name in RUN_COLUMNS]


def load_runs(
    root: Path | str | None = None,
    *,
    suite: str | None = None,
    kind: str | None = None,
    use_cache: bool = True,
) -> pd.DataFrame:
    """One row per run record (runs and baselines) under `root`, columns `RUN_COLUMNS`.

    `suite` and `kind` ("run" / "baseline") filter rows (`suite` reads only
    runs/<suite>/). Unusable files are listed in `df.attrs["skipped"]` (and reported),
    never fatal. Sorted by `started_at`. `use_cache=False` ignores the suite indexes and
    parses every record (and leaves the indexes alone).
    """
    root = Path(root) if root is not None else default_results_dir()
    skipped: list[str] = []
    unrecorded: list[UnrecordedRun] = []
    with reporting():
        chunks = _runs(root, suite, skipped, use_cache, unrecorded) if kind != "baseline" \
            else [[] for _ in RUN_COLUMNS]  # fmt: skip
        if kind != "run":
            for column, extra in zip(chunks, _baselines(root, skipped), strict=True):
                column.extend(extra)
    frame = _frame(dict(zip(RUN_COLUMNS, chunks, strict=True)), str(root).rstrip("/") + "/")
    if suite is not None:
        frame = frame[frame["suite"] == suite]
    if kind is not None:
        frame = frame[frame["kind"] == kind]
    frame = frame.sort_values(["started_at", "path"], kind="stable").reset_index(drop=True)
    frame.attrs["skipped"] = skipped
    frame.attrs["unrecorded"] = unrecorded
    return frame


def _frame(table: dict[str, list[Any]], base: str) -> pd.DataFrame:
    """The loader's DataFrame from each column's chunks, with fixed conversions, so that a
    row has the same types whether it came from an index or from its run.json: numbers
    float64 (NaN for none), counts int64 (float64 when one is missing), flags bool
    (object when one is missing), times UTC timestamps, text as pandas infers it."""
    def floats(chunk: Any) -> Any:
        if isinstance(chunk, array):
            return np.frombuffer(chunk, dtype=float)
        return np.array([np.nan if v is None else v for v in chunk], dtype=float)

    data: dict[str, Any] = {}
    for name, chunks in table.items():
        if name in FLOATS:
            data[name] = np.concatenate([floats(chunk) for chunk in chunks] or [floats([])])
            continue
        values = list(chain.from_iterable(chunks))
        if name in COUNTS or name in FLAGS:
            try:
                data[name] = np.array(values, dtype=np.int64 if name in COUNTS else bool)
                if name in FLAGS and None in values:
                    raise TypeError
            except (TypeError, OverflowError):  # one is missing
                data[name] = (floats(values) if name in COUNTS
                              else np.array(values, dtype=object))  # fmt: skip
        elif name in ("started_at", "finished_at"):
            data[name] = pd.to_datetime(values, utc=True, format="ISO8601")
        elif name == "path":
            data[name] = [base + rel for rel in values]
        else:
            data[name] = values
    return pd.DataFrame(data, columns=list(RUN_COLUMNS))


# ---------------------------------------------------------------- request rows


def _request_files(sources: Path | str | Iterable[Path | str]) -> Iterator[Path]:
    items = [sources] if isinstance(sources, str | Path) else list(sources)
    for item in items:
        path = Path(item)
        if path.name == REQUESTS_FILE:
            yield path
        elif (path / REQUESTS_FILE).exists() or (path / RUN_FILE).exists():
            yield path / REQUESTS_FILE  # a run folder
        else:  # a results root
            yield from sorted((path / RUNS_DIR).glob(f"*/*/{REQUESTS_FILE}"))


def load_requests(sources: Path | str | Iterable[Path | str]) -> pd.DataFrame:
    """One row per measured request, with `suite`, `run_id` and `run_dir` of its run.

    `sources`: a results root, run folders, or requests.jsonl files. The rows of a run
    whose record the door refuses, bad lines and unreadable files are listed in
    `df.attrs["skipped"]` and skipped.
    """
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    with reporting():
        for file in _request_files(sources):
            run_dir = file.parent
            try:
                record = read_run(run_dir)
            except BadRecord as error:
                report(skipped, error.path, f"{error.reason}: its requests are skipped")
                continue
            for row in iter_request_rows(file, skipped, step_of_record(record)):
                rows.append({**row.model_dump(exclude_unset=True), "suite": record.suite.name,
                             "run_id": record.run_id, "run_dir": str(run_dir)})
    frame = pd.DataFrame(rows)
    frame.attrs["skipped"] = skipped
    return frame
