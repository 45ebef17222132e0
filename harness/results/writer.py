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

from harness.files import atomic_write_text, check_inside
from harness.results.index import note_written  # the loader's index: a copy, never fails
from harness.results.layout import REQUESTS_FILE, RUN_FILE, RUNS_DIR, run_dir_name
from harness.results.record import RequestRow, RunRecord
from harness.secrets import redact_text


def create_run_dir(root: Path, suite: str, started_at: datetime, run_id: str) -> Path:
    """Create a run's folder exclusively: two writers can never share one."""
    folder = Path(root) / RUNS_DIR / suite / run_dir_name(started_at, run_id)
    folder.parent.mkdir(parents=True, exist_ok=True)
    check_inside(folder.parent, root)  # a suite folder linked to /etc gets nothing
    folder.mkdir()  # FileExistsError on a (practically impossible) id collision: never merge
    return folder


class RowLog:
    """`requests.jsonl`, one row appended (and flushed) as each request finishes, so that
    whatever ends a run, every finished request is on disk.

    `rows` (the caller's list, e.g. the run's) and the file hold the same rows whenever a
    signal lands: a row goes into the list first (one C call, so a signal's handler runs
    before or after it, never inside), then into the file; when the block ends by an
    exception (Ctrl-C, SIGTERM, a dead server) the file is rewritten from the list if the
    two differ, so a row whose write the signal cut short (or cut in half) is neither lost
    from the file nor missing from the record (issue 30: 6 rows on disk, 5 counted).
    """

    def __init__(self, folder: Path, rows: list[RequestRow] | None = None,
                 file_name: str = REQUESTS_FILE) -> None:
        self.path = Path(folder) / file_name
        self.rows: list[RequestRow] = rows if rows is not None else []
        self._file: Any = None
        self._kept = 0  # rows the list held at the start (not this log's)
        self._on_disk: list[str] = []  # lines the file held at the start

    def __enter__(self) -> RowLog:
        self._kept, self._on_disk = len(self.rows), self._lines()
        self._file = open(self.path, "a", encoding="utf-8")  # closed in __exit__
        return self

    def append(self, row: RequestRow) -> None:
        # may raise: nothing kept yet
        line = redact_text(json.dumps(row.model_dump(mode="json"))) + "\n"
        self.rows.append(row)
        self._file.write(line)
        self._file.flush()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._file.flush()
            os.fsync(self._file.fileno())
        self._file.close()
        if exc_type is not None:
            self.reconcile()

    def reconcile(self) -> None:
        """Make the file hold exactly its first lines plus this log's rows (atomically)."""
        new = self.rows[self._kept:]
        expected = self._on_disk + [redact_text(json.dumps(row.model_dump(mode="json"))) + "\n"
                                    for row in new]
        if self._lines() != expected:
            atomic_write_text(self.path, "".join(expected))

    def _lines(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").splitlines(keepends=True)
        except OSError:
            return []


def write_run(folder: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run folder's records; `run.json` goes last so its presence means complete."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is not None:
        lines = "".join(json.dumps(row.model_dump(mode="json")) + "\n" for row in rows)
        atomic_write_text(folder / REQUESTS_FILE, lines)
    # as written: the index's copy too
    text = redact_text(record.model_dump_json(indent=2)) + "\n"
    atomic_write_text(folder / RUN_FILE, text)
    note_written(folder / RUN_FILE, text)
    return folder / RUN_FILE


def new_run_dir(root: Path, record: RunRecord) -> Path:
    """Create this run's folder exclusively: two writers can never share one."""
    if record.started_at is None:  # only a record imported from another harness lacks it
        raise ValueError("a run record to write needs its start time (started_at)")
    return create_run_dir(root, record.suite.name, record.started_at, record.run_id)


def save_run(root: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run into a fresh folder under `root`; returns the folder."""
    folder = new_run_dir(root, record)
    write_run(folder, record, rows)
    return folder
