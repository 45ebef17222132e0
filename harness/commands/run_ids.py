"""A run named by its short id (`harness compare e6cf2e4b ...`): the folder, found with the
results loader."""

from __future__ import annotations

import re
from pathlib import Path

from harness.errors import BadInput
from harness.results.layout import RUN_FILE
from harness.results.store import load_runs

_RUN_ID = re.compile(r"^(?:\d{8}T\d{6}Z-)?([0-9a-f]{4,})$")


def run_by_id(selector: str, results: Path) -> Path | None:
    """The run folder a short id names (`e6cf2e4b`, a prefix of one of at least 4 hex
    digits, or the folder's own name), found with the results loader; None when the
    selector is an existing path, is not shaped like an id, or names a suite folder.
    BadInput when no run has the id, or several share the prefix (listed)."""
    match = _RUN_ID.match(selector)
    if match is None or Path(selector).exists():
        return None
    if (Path(results) / "runs" / selector).is_dir():
        return None  # a suite of that name
    runs = load_runs(results, kind="run")
    found = runs[runs["run_id"].astype(str).str.startswith(match.group(1))] \
        if not runs.empty else runs
    folders = sorted({Path(p).parent if Path(p).name == RUN_FILE else Path(p)
                      for p in found["path"]})
    if len(folders) > 1:
        raise BadInput(f"{selector}: {len(folders)} runs under {results} have an id starting "
                       f"so: " + ", ".join(str(f) for f in folders[:10])
                       + "; give more of the id")
    if not folders:
        raise BadInput(f"{selector}: no run with that id under {results} (nor a suite of "
                       f"that name); a run's id ends its folder's name, as `harness run` "
                       f"prints it; --results names another results folder")
    return folders[0]
