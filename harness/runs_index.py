"""The bulk loader's cache, `results/.cache/runs-index.json`.

It holds the flattened rows column-wise plus:
- for each suite folder under runs/, its mtime when it was last listed completely
  (every run folder had its run.json): unchanged mtime = no run added or removed, so
  the folder is not even listed. Run folders are write-once (run.json is written last
  and never rewritten), so a listed run needs no further stat.
- for each baseline file, its (mtime_ns, size): baselines are few and may be edited.
A folder touched within RACY_S of the listing is not trusted (its mtime may tick again
within the same clock granule), the way git treats racily clean index entries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.record import SCHEMA_VERSION, atomic_write_text

CACHE_FILE = Path(".cache") / "runs-index.json"
CACHE_FORMAT = 1
log = logging.getLogger("harness.store")

RACY_S = 2.0


@dataclass
class RunsIndex:
    """The loader's cache of flattened run rows; only ever a copy of the records."""

    paths: list[str] = field(default_factory=list)  # relative record files, row order
    table: dict[str, list[Any]] = field(default_factory=dict)  # RUN_COLUMNS -> values
    dirs: dict[str, int] = field(default_factory=dict)  # runs/<suite> -> trusted mtime_ns
    stamps: dict[str, list[int]] = field(default_factory=dict)  # baseline -> [mtime, size]

    @classmethod
    def read(cls, file: Path, columns: Sequence[str]) -> RunsIndex:
        try:
            data = json.loads(file.read_bytes())
            if data.get("format") != CACHE_FORMAT or data.get("schema") != SCHEMA_VERSION:
                return cls()
            cache = cls(data["paths"], data["table"], data["dirs"], data["stamps"])
            if list(cache.table) != list(columns) or any(
                len(column) != len(cache.paths) for column in cache.table.values()
            ):
                return cls()
            return cache
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return cls()  # a missing or damaged cache only makes this load slower

    def write(self, file: Path) -> None:
        from filelock import FileLock, Timeout

        data = {"format": CACHE_FORMAT, "schema": SCHEMA_VERSION, "paths": self.paths,
                "dirs": self.dirs, "stamps": self.stamps, "table": self.table}  # fmt: skip
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            ignore = file.parent / ".gitignore"
            if not ignore.exists():
                atomic_write_text(ignore, "*\n")
            # Another loader updating the cache at the same time: let it; ours is only a copy.
            with FileLock(str(file) + ".lock", timeout=2):
                atomic_write_text(file, json.dumps(data, separators=(",", ":")))
        except (OSError, Timeout) as error:
            log.debug("results cache not written (%s): %s", file, error)
