"""Writing run folders: each run in its own folder, created exclusively, files atomic.

`record.write_run` writes the files (`requests.jsonl`, then `run.json` last) and indexes
the record for the loader (`runs_index.note_written`); this module adds the folder.
"""

from __future__ import annotations

from pathlib import Path

from harness.results.record import RequestRow, RunRecord, create_run_dir, write_run


def new_run_dir(root: Path, record: RunRecord) -> Path:
    """Create this run's folder exclusively: two writers can never share one."""
    return create_run_dir(root, record.suite.name, record.started_at, record.run_id)


def save_run(root: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run into a fresh folder under `root`; returns the folder."""
    folder = new_run_dir(root, record)
    write_run(folder, record, rows)
    return folder
