"""`harness list` fast: each suite's listing line cached, keyed by what determines it.

Validating a suite needs pydantic (`harness.suite.model`), too slow for a listing. A line is
cached under the sha256 of the suite file's path and bytes and of the harness's own
modules (path, size, mtime) and version, so a cached line is exactly what validating
would print: a changed suite or a changed harness misses the cache and is validated
again. The cache (`<cache root>/suite-list.json`) is only a copy: damaged or
missing, it is rebuilt; unwritable, listing still works, only slower.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

from harness import __version__
from harness.errors import SuiteError
from harness.files import atomic_write_text, cache_root

CACHE_NAME = "suite-list.json"
KEEP = 256  # entries kept: every suite listed now, then the most recent others


def _validator_key() -> bytes:
    """The harness version, the Python version, and the stamp (path, size, mtime) of every
    harness module: any edit to the validator, or to what it imports, misses the cache."""
    here = Path(__file__).resolve().parent.parent  # the harness package
    digest = hashlib.sha256(f"{__version__} {sys.version}".encode())
    for folder, dirs, files in sorted(os.walk(here)):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
        for name in sorted(files):
            if name.endswith(".py"):
                status = os.stat(os.path.join(folder, name))
                digest.update(f"{folder}/{name} {status.st_size} {status.st_mtime_ns}\n".encode())
    return digest.digest()


Row = list[str]  # name, engine, topology, "nightly" or "", description


def _describe(path: Path, folder: Path) -> tuple[Row | str, bool]:
    """The listing row of one suite (validated: imports pydantic), or the line saying why
    it is invalid, and whether invalid."""
    from harness.suite.model import load_suite

    try:
        suite = load_suite(path, folder).suite
    except SuiteError as error:
        return f"{path.stem} INVALID: {error.message.splitlines()[0]}", True
    topology = suite.topology
    gpus = f"{topology.gpus} x {'/'.join(topology.gpu_types) or 'GPU'}" if topology.gpus else "CPU"
    return [suite.name, suite.engine.kind, gpus, "nightly" if suite.nightly else "",
            suite.description], False


def format_rows(entries: list[tuple[Row | str, bool]], width: int | None = None) -> list[str]:
    """Aligned lines: each column as wide as its widest cell, so no name runs into the
    next column; with `width` (a terminal's), the description wraps under itself."""
    rows = [row for row, _ in entries if isinstance(row, list)]
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(4)]
    lines = []
    for row, _ in entries:
        if isinstance(row, str):
            lines.append(row)
            continue
        head = "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  "
        room = (width or 0) - len(head)
        parts = textwrap.wrap(row[4], room) if width and room >= 30 else [row[4]]
        lines.append(head + (parts[0] if parts else ""))
        lines += [" " * len(head) + part for part in parts[1:]]
    return lines


def listing(paths: list[Path], folder: Path) -> list[tuple[Row | str, bool]]:
    """One (row or invalid line, invalid) per suite file, from the cache where it is
    current (`format_rows` lays them out)."""
    file = cache_root() / CACHE_NAME
    try:
        cache = json.loads(file.read_bytes())
        assert isinstance(cache, dict)
    except (OSError, ValueError, RecursionError, AssertionError):  # rebuilt
        cache = {}
    key = _validator_key()
    result, used = [], {}
    for path in paths:
        try:
            content = path.read_bytes()
        except OSError:
            content = None  # validation says why
        entry = None
        if content is not None:
            digest = hashlib.sha256(key + str(path).encode() + b"\0" + content).hexdigest()
            entry = cache.get(digest)
        if not (isinstance(entry, list) and len(entry) == 2 and (
                isinstance(entry[0], str) or (isinstance(entry[0], list) and len(entry[0]) == 5
                                              and all(isinstance(c, str) for c in entry[0])))):
            entry = list(_describe(path, folder))
        if content is not None:
            used[digest] = entry
        result.append((entry[0], bool(entry[1])))
    if any(digest not in cache for digest in used):
        others = [(k, v) for k, v in cache.items() if k not in used]
        kept = dict(others[-max(0, KEEP - len(used)):] if len(used) < KEEP else [])
        kept.update(used)
        with contextlib.suppress(OSError):
            atomic_write_text(file, json.dumps(kept))
    return result
