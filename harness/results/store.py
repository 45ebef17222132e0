"""`results/` is the database: load its run records into pandas in one call.

Layout in `harness.results.layout`; the writer is `harness.results.writer`.
Loading never fails on a bad file: any file under `runs/` or `baselines/` is a valid
record or is reported (path and reason, once per command: `harness.results.skips`) and skipped,
never rewritten; the reasons are also listed in `DataFrame.attrs["skipped"]`. Rows come
from each suite's index (`harness.results.index`), kept fresh against the run folders, so a
load parses only runs it has not seen; the run folders stay the source of truth.
"""

from __future__ import annotations

import contextlib
import logging
import os
from array import array
from collections.abc import Iterable, Iterator
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.results.index import INDEXED, scan_suite
from harness.results.layout import (
    BASELINES_DIR,
    PLOTS_DIR,
    REQUESTS_FILE,
    RUN_FILE,
    RUNS_DIR,
    default_results_dir,
)
from harness.results.rows import (
    COUNTS,
    FLAGS,
    FLOATS,
    RUN_COLUMNS,
    Skip,
    flatten_record,
    is_number,
    read_record,
    read_record_file,
)
from harness.results.skips import report, reporting

if TYPE_CHECKING:
    import pandas as pd

    from harness.results.record import RunRecord

__all__ = [
    "PLOTS_DIR", "RUN_COLUMNS", "Skip", "default_results_dir", "flatten_record", "is_number",
    "load_requests", "load_runs", "read_record_file", "read_requests", "read_run", "reporting",
]  # fmt: skip

log = logging.getLogger("harness.results.store")


# ---------------------------------------------------------------- bulk loading


Chunks = list[list[Any]]  # per RUN_COLUMNS column, its chunks (lists, or arrays of numbers)


def _runs(root: Path, suite: str | None, skipped: list[str], use_index: bool) -> Chunks:
    """Every run under root/runs, column by column (path relative to root)."""
    runs = root / RUNS_DIR
    note = lambda path, reason: report(skipped, path, reason)  # noqa: E731
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
        misplaced = [i for i, name in enumerate(columns[suite_at]) if name != own]
        for i in misplaced:
            note(folder / found.names[i] / RUN_FILE,
                 f"suite.name {columns[suite_at][i]!r} is not its folder's ({own!r})")
        if misplaced:
            kept = sorted(set(range(len(found.names))) - set(misplaced))
            columns = [[column[i] for i in kept] for column in columns]
            found.names = [found.names[i] for i in kept]
        paths = [f"{RUNS_DIR}/{own}/{name}" for name in found.names]
        for target, values in zip(chunks, [*columns, paths], strict=True):
            target.append(values)
    return chunks


def _listing(folder: Path, note: Any) -> list[os.DirEntry[str]]:
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
            row, _ = read_record_file(Path(entry.path))
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
    with reporting():
        chunks = _runs(root, suite, skipped, use_cache) if kind != "baseline" else \
            [[] for _ in RUN_COLUMNS]  # fmt: skip
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
    return frame


def _frame(table: dict[str, list[Any]], base: str) -> pd.DataFrame:
    """The loader's DataFrame from each column's chunks, with fixed conversions, so that a
    row has the same types whether it came from an index or from its run.json: numbers
    float64 (NaN for none), counts int64 (float64 when one is missing), flags bool
    (object when one is missing), times UTC timestamps, text as pandas infers it."""
    import numpy as np
    import pandas as pd

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


def block_size(data: Any) -> int | None:
    from harness.results.checks import block_size as named

    return named(data) if isinstance(data, dict) else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def request_problem(row: Any) -> str | None:
    """Why a requests.jsonl line cannot be used, or None."""
    if not isinstance(row, dict):
        return "not a request row (not a JSON object)"
    for key in ("question_index", "completion_tokens", "verify_steps"):
        if not _count(row.get(key)):
            return f"{key}: expected a non-negative integer, got {row.get(key)!r:.40}"
    if row.get("correct_drafts") is not None and not _count(row["correct_drafts"]):
        return f"correct_drafts: expected a non-negative integer, got {row['correct_drafts']!r:.40}"
    for key in ("accept_length", "spec_accept_length"):
        if row.get(key) is not None and not is_number(row[key]):
            return f"{key}: expected a number, got {row[key]!r:.40}"
    if row.get("correct") is not None and not isinstance(row["correct"], bool):
        return f"correct: expected true, false or null, got {row['correct']!r:.40}"
    histogram = row.get("accept_histogram")
    if histogram is not None and not (isinstance(histogram, list) and all(map(_count, histogram))):
        return "accept_histogram: expected a list of non-negative integers"
    return None


MAX_LINE_REPORTS = 20  # bad lines of one file reported one by one; the rest summed up
MAX_REQUEST_LINES = 1_000_000  # a run plans at most 10^5 requests


def iter_request_rows(file: Path, skipped: list[str],
                      block: int | None = None) -> Iterator[dict[str, Any]]:
    """The usable rows of one requests.jsonl (impossible for a draft block of `block`
    tokens, when known, included); bad lines reported (the first `MAX_LINE_REPORTS`
    one by one, the rest in one line) and skipped."""
    from harness.results.checks import BadFile, check_sizes, read_regular, strict_json
    from harness.results.possible import check_request_row

    try:
        # JSON Lines end at \n (or \r\n), not at the other breaks str.splitlines knows
        # (\x0b, \x1c, \u2028, ...), which JSON may hold between tokens or in strings
        lines = read_regular(file)[0].decode("utf-8").replace("\r\n", "\n").split("\n")
    except FileNotFoundError:
        return
    except BadFile as error:
        report(skipped, file, str(error))
        return
    except (OSError, UnicodeDecodeError) as error:
        report(skipped, file, f"cannot read: {error}")
        return
    if len(lines) > MAX_REQUEST_LINES:
        report(skipped, file, f"{len(lines)} lines, more than the {MAX_REQUEST_LINES} a run's "
                              "requests may hold")
        return
    bad = 0

    def skip(number: int, reason: str) -> None:
        nonlocal bad
        bad += 1
        if bad <= MAX_LINE_REPORTS:
            report(skipped, f"{file} line {number}", reason)

    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = strict_json(line)
            check_sizes(row, line)
        except BadFile as error:
            skip(number, str(error))
            continue
        except (ValueError, RecursionError) as error:
            skip(number, f"not valid JSON: {error}")
            continue
        problem = request_problem(row) or check_request_row(row, block)
        if problem:
            skip(number, problem)
            continue
        if row.get("accept_length") is None:  # v2 names SGLang's per-request figure
            steps = row["verify_steps"]
            row["accept_length"] = row.get("spec_accept_length") or (
                row["completion_tokens"] / steps if steps else None)
        yield row
    if bad > MAX_LINE_REPORTS:
        report(skipped, file, f"{bad - MAX_LINE_REPORTS} more bad lines (skipped; "
                              f"{bad} in all)")


def load_requests(sources: Path | str | Iterable[Path | str]) -> pd.DataFrame:
    """One row per measured request, with `suite`, `run_id` and `run_dir` of its run.

    `sources`: a results root, run folders, or requests.jsonl files. Bad lines and
    unreadable files are listed in `df.attrs["skipped"]` and skipped.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    with reporting():
        for file in _request_files(sources):
            run_dir = file.parent
            try:
                data, identity, _ = read_record(run_dir / RUN_FILE, validate=False)
            except (FileNotFoundError, Skip) as why:
                reason = why if isinstance(why, Skip) else "missing"
                report(skipped, run_dir / RUN_FILE, f"{reason}: its requests are skipped")
                continue
            for row in iter_request_rows(file, skipped, block_size(data)):
                row.update(suite=identity["suite"], run_id=identity["run_id"],
                           run_dir=str(run_dir))  # fmt: skip
                rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["skipped"] = skipped
    return frame


# ---------------------------------------------------------------- single records


def read_run(run_dir: Path) -> RunRecord:
    """A run folder's record, validated (for one run: plots, compare); the door is
    `harness.results.readers.read_run`."""
    from harness.results.readers import read_run as read

    return read(run_dir)  # type: ignore[no-any-return]


def read_requests(run_dir: Path) -> list[dict[str, Any]]:
    """A run's usable request rows as dicts (bad lines reported and skipped), checked
    against the draft block its run.json names (when that record is readable)."""
    from harness.results.checks import BadFile, read_regular, strict_json

    skipped: list[str] = []
    block = None  # else the rows are still checked against the largest block
    with contextlib.suppress(OSError, BadFile, ValueError, RecursionError):
        block = block_size(strict_json(read_regular(Path(run_dir) / RUN_FILE)[0]))
    with reporting():
        return list(iter_request_rows(Path(run_dir) / REQUESTS_FILE, skipped, block))
