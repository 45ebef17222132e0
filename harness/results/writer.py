"""Writing run folders: each run in its own folder, created exclusively, files atomic.

`write_run` writes the files (`requests.jsonl`, then `run.json` last) and indexes the
record for the loader (`index.note_written`); `RowLog` appends each request's row as it
finishes; `save_run` adds the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.mask import mask
from harness.results.index import note_written  # the loader's index: a copy, never fails
from harness.results.layout import (
    REQUESTS_FILE,
    RUN_FILE,
    RUNS_DIR,
    atomic_write_text,
    check_inside,
)
from harness.results.record import RequestRow, RunRecord


def run_dir_name(started_at: datetime, run_id: str) -> str:
    return f"{started_at.strftime('%Y%m%dT%H%M%SZ')}-{run_id}"


def create_run_dir(root: Path, suite: str, started_at: datetime, run_id: str) -> Path:
    """Create a run's folder exclusively: two writers can never share one."""
    folder = Path(root) / RUNS_DIR / suite / run_dir_name(started_at, run_id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    check_inside(folder.parent, root)  # a suite folder linked to /etc gets nothing
    folder.mkdir()  # FileExistsError on a (practically impossible) id collision: never merge
    return folder


class RowLog:
    """`requests.jsonl`, one row appended (and flushed) as each request finishes, so that
    whatever ends a run, every finished request is on disk."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / REQUESTS_FILE
        self._file: Any = None

    def __enter__(self) -> RowLog:
        self._file = open(self.path, "a", encoding="utf-8")  # closed in __exit__
        return self

    def append(self, row: RequestRow) -> None:
        self._file.write(mask(json.dumps(row.model_dump(mode="json"))) + "\n")
        self._file.flush()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            os.fsync(self._file.fileno())
        self._file.close()


def write_run(folder: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run folder's records; `run.json` goes last so its presence means complete."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is not None:
        lines = "".join(json.dumps(row.model_dump(mode="json")) + "\n" for row in rows)
        atomic_write_text(folder / REQUESTS_FILE, lines)
    text = mask(record.model_dump_json(indent=2)) + "\n"  # as written: the index's copy too
    atomic_write_text(folder / RUN_FILE, text)
    note_written(folder / RUN_FILE, text)
    return folder / RUN_FILE


def new_run_dir(root: Path, record: RunRecord) -> Path:
    """Create this run's folder exclusively: two writers can never share one."""
    return create_run_dir(root, record.suite.name, record.started_at, record.run_id)


def save_run(root: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run into a fresh folder under `root`; returns the folder."""
    folder = new_run_dir(root, record)
    write_run(folder, record, rows)
    return folder
