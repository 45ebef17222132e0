"""The loader's per-suite index of run records: a copy, never the truth.

Two files in each `results/runs/<suite>/`:
- `.index.jsonl`, append-only: the record writer appends one line per `run.json` it
  writes (`note_written`: one `write` on an O_APPEND file, so concurrent writers do
  not interleave): `[tag, run folder name, run.json mtime_ns, size, value per column]`.
- `.index-snapshot.json`, replaced atomically: the same rows column by column,
  `{"index", "columns", "names", "mtimes", "sizes", "table"}`, each column a list of
  values or, when shorter, runs of equal values `{"runs": [[value, count], ...]}`
  (most columns hold one value for a whole history), so 100,000 runs parse fast.

The loader lists the suite folder and takes a run from the index when its `run.json`
still has the stamp (mtime, size) the index says (a line of the log wins over the
snapshot); anything else (a run missing from the index, a `run.json` rewritten or edited
by hand) is parsed from its folder and appended. Compaction folds the log into a new
snapshot and empties the log: done by the loader when the log holds dead lines (runs
gone or superseded), corrupt lines (reported) or is long, and by the writer when the
log outgrows the snapshot, so a store that is only ever written still loads fast. A
line lost to a race (appended while another process compacts) only means that run is
parsed again. An index of another format or column set is rebuilt from the run folders.
Deleting both files loses nothing.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import math
import os
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

from harness.files import atomic_write_text, check_inside
from harness.results.checks import BadFile, read_regular
from harness.results.index_rows import bad_rows
from harness.results.layout import INDEX_FILE, RUN_FILE, SNAPSHOT_FILE
from harness.results.readers import parse_run, read_record
from harness.results.rows import FLOATS, RUN_COLUMNS, Skip
from harness.secrets import redact_text

INDEX_FORMAT = 3  # 3: rows of records that results.checks refuses (issue 20) are not kept
INDEX_LIMIT = 64 * 2**20  # a snapshot of 100,000 runs is ~25 MB; larger: rebuilt
MAX_REPORTED_LINES = 20  # bad index lines named one by one; the rest counted
INDEXED = RUN_COLUMNS[:-1]  # every column but "path", which is the run folder
TAG = f"{INDEX_FORMAT}:{hashlib.sha256(' '.join(INDEXED).encode()).hexdigest()[:8]}"
LOG_LIMIT = 256 * 1024  # bytes of log the writer leaves before compacting
Report = Callable[[Path | str, str], None]
# One column's values: Any as the index files' JSON (outside) holds them until `bad_rows`
# checks them; an array("d") holds a column of numbers decoded from its base64.
Column: TypeAlias = "list[Any] | array[Any]"
Columns = list[Column]  # one per INDEXED column
BINARY = ["d" if column in FLOATS else "" for column in INDEXED]


def _encode(column: Sequence[Any], binary: str = "") -> Any:
    """Runs of equal values when that is shorter (True, 1 and 1.0 never merge); else, for
    `binary` "d" (numbers, none as NaN: records hold no NaN) or "q" (integers), the
    values' bytes in base64, which parse far faster than JSON numbers; else a list."""
    column = column.tolist() if isinstance(column, array) else column
    runs: list[list[Any]] = []
    last: Any = object()
    for value in column:
        if value == last and type(value) is type(last):
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
            last = value
    if 2 * len(runs) < len(column):
        return {"runs": runs}
    if binary == "d":
        column = [math.nan if value is None else value for value in column]
    if binary:
        return {binary: base64.b64encode(array(binary, column).tobytes()).decode()}
    return column


def _decode(encoded: Any, length: int) -> Column:
    if isinstance(encoded, dict) and "runs" in encoded:
        values: list[Any] = []
        for value, count in encoded["runs"]:
            values.extend([value] * count)
        encoded = values
    elif isinstance(encoded, dict) and len(encoded) == 1 and next(iter(encoded)) in "dq":
        code, text = next(iter(encoded.items()))
        encoded = array(code, base64.b64decode(text, validate=True))
        encoded = encoded if code == "d" else encoded.tolist()
    if not isinstance(encoded, list | array) or len(encoded) != length:
        raise ValueError("column length")
    return encoded


def _take(column: Column, keep: list[int]) -> Column:
    values = [column[i] for i in keep]
    return array(column.typecode, values) if isinstance(column, array) else values


def _line(name: str, stamp: list[int], row: Mapping[str, object]) -> str:
    return json.dumps([TAG, name, *stamp, *(row[column] for column in INDEXED)]) + "\n"


def _append(log: Path, text: str) -> int:
    """Append lines in one write; returns the log's size after it. Never through a
    symbolic link (O_NOFOLLOW), nor in a suite folder that leads out of the results."""
    check_inside(log.parent, log.parent.parent.parent)
    text = redact_text(text)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0),
                 0o644)
    try:
        os.write(fd, text.encode())
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def note_written(run_file: Path, text: str) -> None:
    """After `run_file` (a run's run.json) is written with `text`: index it, compacting
    when the log outgrows the snapshot. Never raises: the index is only a copy, and a
    record it cannot index is reported by the loader."""
    folder = run_file.parent.parent
    try:
        status = os.stat(run_file)
        row = parse_run(text).row  # checked as the door checks: what it refuses is not kept
        size = _append(folder / INDEX_FILE,
                       _line(run_file.parent.name, [status.st_mtime_ns, status.st_size], row))
        snapshot = _stamp(str(folder / SNAPSHOT_FILE))
        if _long_log(size, snapshot[1] if snapshot else 0):
            scan_suite(folder, lambda path, reason: None, compact=True)
    except Exception:  # the record is written; a failure here must not fail the run
        logging.getLogger("harness.results.store").debug("not indexed: %s", run_file, exc_info=True)


def _long_log(log_bytes: int, snapshot_bytes: int) -> bool:
    """Time to fold the log into the snapshot (writer and loader use the same rule): the
    log's lines parse several times slower per run than the snapshot's columns."""
    return log_bytes > LOG_LIMIT and log_bytes > snapshot_bytes // 4


@dataclass
class _Index:
    """What one suite's index holds."""

    names: list[str] = field(default_factory=list)  # the snapshot's runs
    mtimes: Sequence[int] = field(default_factory=list)
    sizes: Sequence[int] = field(default_factory=list)
    table: Columns = field(default_factory=lambda: [[] for _ in INDEXED])
    log: dict[str, list[Any]] = field(default_factory=dict)  # name -> [mtime, size, *values]
    log_lines: int = 0
    log_bytes: int = 0
    snapshot_bytes: int = 0
    rewrite: bool = False  # missing, of another format, or damaged: write it anew


def _read_snapshot(file: Path, report: Report) -> _Index:
    text = b""
    try:
        text = read_regular(file, INDEX_LIMIT)[0]  # BadFile (a FIFO...) is a ValueError
        snapshot = json.loads(text)
    except FileNotFoundError:
        return _Index(rewrite=True)
    except (OSError, ValueError, RecursionError):
        snapshot = None
    try:
        if snapshot.get("index") != INDEX_FORMAT or snapshot.get("columns") != list(INDEXED):
            return _Index(rewrite=True)  # another format or column set: rebuilt, no message
        names = snapshot["names"]
        n = len(names)
        result = _Index(names, _decode(snapshot["mtimes"], n), _decode(snapshot["sizes"], n),
                        [_decode(column, n) for column in snapshot["table"]])  # fmt: skip
        if len(result.table) != len(INDEXED) or not set(map(type, names)) <= {str}:
            raise ValueError("table")
        result.snapshot_bytes = len(text)
    except (ValueError, TypeError, KeyError, AttributeError):
        report(file, "corrupt index snapshot (rebuilt from the run folders)")
        return _Index(rewrite=True)
    bad = bad_rows(dict(zip(INDEXED, result.table, strict=True)), n, file.parent.name)
    if bad:  # forged or damaged: never believed; those runs are re-read from their folders
        first = min(bad)
        report(file, f"{len(bad)} index rows no record could give, the first "
                     f"{names[first]!r:.80}: {bad[first]} (dropped; the runs are re-read)")
        keep = [i for i in range(n) if i not in bad]
        result.names = [names[i] for i in keep]
        result.mtimes = [result.mtimes[i] for i in keep]
        result.sizes = [result.sizes[i] for i in keep]
        result.table = [_take(column, keep) for column in result.table]
        result.rewrite = True
    return result


def _read(folder: Path, report: Report) -> _Index:
    result = _read_snapshot(folder / SNAPSHOT_FILE, report)
    log = folder / INDEX_FILE

    try:
        text = read_regular(log, INDEX_LIMIT)[0].decode("utf-8")
        lines = text.splitlines()
        result.log_bytes = len(text)
    except FileNotFoundError:
        return result
    except (OSError, UnicodeDecodeError, BadFile):
        report(log, "unreadable index log (rebuilt from the run folders)")
        result.rewrite = True
        return result
    width = len(INDEXED) + 4
    try:  # one parse for the whole log; line by line only to find a bad one
        entries = json.loads("[" + ",".join(lines) + "]")
    except (ValueError, RecursionError):
        entries = [_parse_line(line) for line in lines]
    for number, entry in enumerate(entries, start=1):
        if isinstance(entry, list) and entry and _other_version(entry[0]):
            result.rewrite = True  # written by another harness version: re-read, no message
            continue
        if not (isinstance(entry, list) and len(entry) == width and isinstance(entry[1], str)):
            report(f"{log} line {number}", "corrupt index line (dropped; the run is re-read)")
            result.rewrite = True
            continue
        result.log[entry[1]] = entry[2:]
        result.log_lines += 1
    _drop_impossible(result, log, report)
    return result


def _drop_impossible(result: _Index, log: Path, report: Report) -> None:
    """Drop the log's rows that no record could give (checked like records); their runs
    are re-read from their folders."""
    names = list(result.log)
    if not names:
        return
    rows = [result.log[name][2:] for name in names]
    table = {column: [row[i] for row in rows] for i, column in enumerate(INDEXED)}
    bad = bad_rows(table, len(names), log.parent.name)
    for count, i in enumerate(sorted(bad)):
        if count < MAX_REPORTED_LINES:
            report(log, f"index row of {names[i]!r:.80}: {bad[i]} (dropped; the run is re-read)")
        del result.log[names[i]]
    if len(bad) > MAX_REPORTED_LINES:
        report(log, f"{len(bad) - MAX_REPORTED_LINES} more impossible index rows (dropped)")
    if bad:
        result.rewrite = True


def _parse_line(line: str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _other_version(tag: Any) -> bool:
    """A tag like TAG ("<format>:<columns hash>") but not ours."""
    if not isinstance(tag, str) or tag == TAG:
        return False
    number, _, digest = tag.partition(":")
    return number.isdigit() and len(digest) == 8


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size


def _current(base: str, known: _Index, listing: set[str]) -> list[int]:
    """Positions of the snapshot's runs whose run.json still has the indexed stamp (one
    stat each: the price of noticing a record edited by hand)."""
    stat, mtimes, sizes, log = os.stat, known.mtimes, known.sizes, known.log
    keep = []
    for i, name in enumerate(known.names):
        if name not in listing or name in log:
            continue
        try:
            status = stat(base + name + "/run.json")
        except OSError:
            continue
        if status.st_mtime_ns == mtimes[i] and status.st_size == sizes[i]:
            keep.append(i)
    return keep


@dataclass
class SuiteRuns:
    """The valid runs of one suite folder, column by column (INDEXED order), and the run
    folders without a readable record (name, why)."""

    names: list[str]  # run folder names
    columns: Columns
    unrecorded: list[tuple[str, str]] = field(default_factory=list)


def scan_suite(folder: Path, report: Report, use_index: bool = True,
               compact: bool = False) -> SuiteRuns:  # fmt: skip
    """Every valid run of one suite folder; unusable ones reported through
    `report(path, reason)` (in name order) and skipped. `compact`: write a new snapshot."""
    listing = {name for name in os.listdir(folder) if name[0] != "."}  # not the index
    problems: list[tuple[str, str]] = []
    known = _read(folder, report) if use_index else _Index()
    base = f"{folder}/"
    keep = _current(base, known, listing)
    if len(keep) == len(known.names):  # the usual case: the whole snapshot is current
        names, columns = list(known.names), known.table
    else:
        names = [known.names[i] for i in keep]
        columns = [_take(column, keep) for column in known.table]
    stamps: dict[str, Any] = {}  # name -> stamp, for runs not in the snapshot
    rows: list[Any] = []  # their values
    for name, line in known.log.items():
        if name in listing and _stamp(base + name + "/" + RUN_FILE) == (line[0], line[1]):
            names.append(name)
            stamps[name] = line[:2]
            rows.append(line[2:])
    fresh: list[str] = []
    unrecorded: list[tuple[str, str]] = []
    for name in sorted(listing.difference(names)):
        if not os.path.isdir(base + name):
            problems.append((base + name, "not a run folder (ignored)"))
            continue
        try:
            parsed, stamp = read_record(Path(base + name + "/" + RUN_FILE))
            row = parsed.row
        except FileNotFoundError:  # a run still running, or one killed before its record
            unrecorded.append((name, f"no {RUN_FILE}: the harness was killed before it "
                                     "wrote it, or the run is still running"))
            continue
        except Skip as why:
            problems.append((base + name + "/" + RUN_FILE, str(why)))
            unrecorded.append((name, str(why)))
            continue
        fresh.append(_line(name, stamp, row))
        names.append(name)
        stamps[name] = stamp
        rows.append([row[key] for key in INDEXED])
    for column, values in zip(columns, zip(*rows, strict=True), strict=False):
        if isinstance(column, array):
            column.extend(math.nan if value is None else value for value in values)
        else:
            column.extend(values)
    for path, reason in sorted(problems):
        report(path, reason)
    runs = SuiteRuns(names, columns, unrecorded)
    if use_index:
        dead = len(known.names) - len(keep) + known.log_lines - (len(stamps) - len(fresh))
        if compact or known.rewrite or dead > 16 + len(names) // 8 or \
                _long_log(known.log_bytes, known.snapshot_bytes):
            _write_snapshot(folder, known, keep, stamps, runs)
        elif fresh:
            with contextlib.suppress(OSError):  # read-only, or a link out: still loads
                _append(folder / INDEX_FILE, "".join(fresh))
    return runs


def _write_snapshot(folder: Path, known: _Index, keep: list[int], stamps: dict[str, Any],
                    runs: SuiteRuns) -> None:  # fmt: skip
    """Fold everything into a new snapshot, then empty the log."""
    mtimes = [known.mtimes[i] for i in keep] + [stamps[name][0] for name in runs.names[len(keep):]]
    sizes = [known.sizes[i] for i in keep] + [stamps[name][1] for name in runs.names[len(keep):]]
    snapshot = {"index": INDEX_FORMAT, "columns": list(INDEXED), "names": runs.names,
                "mtimes": _encode(mtimes, "q"), "sizes": _encode(sizes, "q"),
                "table": [_encode(column, code)
                          for column, code in zip(runs.columns, BINARY, strict=True)]}  # fmt: skip
    root = folder.parent.parent  # results/runs/<suite>: never written through a link out
    try:
        atomic_write_text(folder / SNAPSHOT_FILE, json.dumps(snapshot), root)
        atomic_write_text(folder / INDEX_FILE, "", root)
    except OSError:
        pass  # a read-only results folder: loading still works, only slower
