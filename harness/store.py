"""`results/` is the database: write run folders safely, load them into pandas in one call.

Layout (docs/run-record.md):
    results/runs/<suite>/<UTC time>-<run id>/run.json      one RunRecord, written last
    results/runs/<suite>/<UTC time>-<run id>/requests.jsonl one RequestRow per line
    results/baselines/<suite>--<label>.json                RunRecord with kind "baseline"
    results/plots/<suite>/                                 history plots
    results/.cache/runs-index.json                         loader cache, never committed

Writers never share a file: each run gets its own folder (created exclusively) and
`record.write_run` replaces files atomically, `run.json` last, so a reader sees a run
completely or not at all. The one shared file is the loader's cache, written under a
file lock and only ever a copy of what the records say: deleting it loses nothing.

Loading never fails on a bad file: a corrupt, truncated, foreign or too-new file is
reported (logged to stderr and listed in `DataFrame.attrs["skipped"]`) and skipped,
never rewritten. The bulk loader reads plain JSON (no pydantic per file) and keeps a
cache keyed by each file's size and mtime, so reloading 100,000 runs parses only new ones.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.record import (
    BASELINES_DIR,
    REQUESTS_FILE,
    RUN_FILE,
    RUNS_DIR,
    SCHEMA_VERSION,
    RequestRow,
    RunRecord,
    create_run_dir,
    write_run,
)
from harness.runs_index import CACHE_FILE, RACY_S, RunsIndex

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger("harness.store")

PLOTS_DIR = "plots"

# One row per run; dotted names mirror the record's nesting.
RUN_COLUMNS = (
    "suite", "run_id", "kind", "label", "source", "started_at", "finished_at",
    "schema_version", "suite_sha256",
    "build.engine", "build.spec", "build.version", "build.git_sha", "build.patch_sha256",
    "build.options", "provenance.harness_version", "provenance.hostname", "provenance.gpu",
    "provenance.n_gpus", "accept_length", "ci_low", "ci_high", "ci_level", "n_requests",
    "completion_tokens", "verify_steps", "accuracy", "server_accept_length",
    "output_throughput_tok_s", "duration_s", "stopped_early", "verdict", "reasons",
    "floor", "path",
)  # fmt: skip


class Skip(Exception):
    """A file the loader cannot use; the message says why."""


def default_results_dir() -> Path:
    return Path(os.environ.get("HARNESS_RESULTS", "results"))


# ---------------------------------------------------------------- writing


def new_run_dir(root: Path, record: RunRecord) -> Path:
    """Create this run's folder exclusively: two writers can never share one."""
    return create_run_dir(root, record.suite.name, record.started_at, record.run_id)


def save_run(root: Path, record: RunRecord, rows: list[RequestRow] | None = None) -> Path:
    """Write a run into a fresh folder under `root`; returns the folder."""
    folder = new_run_dir(root, record)
    write_run(folder, record, rows)
    return folder


# ---------------------------------------------------------------- parsing one record


def flatten_record(data: Any, path: str) -> dict[str, Any]:
    """The loader's row for one parsed run.json; raises Skip for foreign or too-new files."""
    if not isinstance(data, dict):
        raise Skip("not a JSON object")
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise Skip("no integer schema_version: not a harness run record")
    if version > SCHEMA_VERSION:
        raise Skip(f"schema_version {version} is newer than this harness reads ({SCHEMA_VERSION})")
    suite = data.get("suite")
    if not isinstance(suite, dict) or not isinstance(suite.get("name"), str):
        raise Skip("no suite.name: not a harness run record")
    if not isinstance(data.get("run_id"), str) or not isinstance(data.get("started_at"), str):
        raise Skip("no run_id or started_at: not a harness run record")
    measurement = data.get("measurement") or {}
    build = data.get("build") or {}
    provenance = data.get("provenance") or {}
    verdict = data.get("verdict") or {}
    ci = measurement.get("accept_length_ci") or (None, None)
    gpus = provenance.get("gpus") or []
    options = build.get("options")
    reasons = verdict.get("reasons") or []
    floors = (suite.get("document") or {}).get("floors") or {}
    return {
        "suite": suite["name"],
        "run_id": data["run_id"],
        "kind": data.get("kind", "run"),
        "label": data.get("label"),
        "source": data.get("source"),
        "started_at": data["started_at"],
        "finished_at": data.get("finished_at"),
        "schema_version": version,
        "suite_sha256": suite.get("sha256"),
        "build.engine": build.get("engine"),
        "build.spec": build.get("spec"),
        "build.version": build.get("version"),
        "build.git_sha": build.get("git_sha"),
        "build.patch_sha256": build.get("patch_sha256"),
        "build.options": json.dumps(options, sort_keys=True) if options else None,
        "provenance.harness_version": provenance.get("harness_version"),
        "provenance.hostname": provenance.get("hostname"),
        "provenance.gpu": gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None,
        "provenance.n_gpus": len(gpus),
        "accept_length": measurement.get("accept_length"),
        "ci_low": ci[0],
        "ci_high": ci[1],
        "ci_level": measurement.get("ci_level"),
        "n_requests": measurement.get("n_requests"),
        "completion_tokens": measurement.get("completion_tokens"),
        "verify_steps": measurement.get("verify_steps"),
        "accuracy": measurement.get("accuracy"),
        "server_accept_length": measurement.get("server_reported_accept_length",
                                                measurement.get("server_accept_length")),
        "output_throughput_tok_s": measurement.get("output_throughput_tok_s"),
        "duration_s": measurement.get("duration_s"),
        "stopped_early": measurement.get("stopped_early"),
        "verdict": verdict.get("status"),
        "reasons": "; ".join(map(str, reasons)) or None,
        "floor": floors.get("accept_length"),
        "path": path,
    }


def read_record_file(file: Path) -> dict[str, Any]:
    """Parse and flatten one record file; raises Skip naming what is wrong."""
    try:
        with open(file, "rb") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise  # a run folder whose run.json is not written yet: not an error
    except OSError as error:
        raise Skip(f"cannot read: {error.strerror or error}") from None
    if not text.strip():
        raise Skip("empty file")
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise Skip(f"not valid JSON (truncated or corrupt): {error}") from None
    owner = file.parent if file.name == RUN_FILE else file
    return flatten_record(data, str(owner))


# ---------------------------------------------------------------- bulk loading
#
def _report(skipped: list[str], file: Path | str, reason: str) -> None:
    message = f"skipped {file}: {reason}"
    skipped.append(message)
    log.warning(message)


class _Scan:
    """One load: which cached rows stay, which rows are new."""

    def __init__(self, root: Path, cache: RunsIndex) -> None:
        self.root, self.cache = root, cache
        self.position = {path: i for i, path in enumerate(cache.paths)}
        self.keep: list[int] = []
        self.new_paths: list[str] = []
        self.new_rows: list[dict[str, Any]] = []
        self.dirs: dict[str, int] = {}
        self.stamps: dict[str, list[int]] = {}
        self.skipped: list[str] = []

    def parse(self, rel: str) -> bool:
        """Parse one record file into a new row; False if it is missing."""
        file = self.root / rel
        try:
            row = read_record_file(file)
        except FileNotFoundError:
            return False
        except Skip as why:
            _report(self.skipped, file, str(why))
            return True
        row["path"] = rel.removesuffix("/" + RUN_FILE)  # relative: the root may move
        self.new_paths.append(rel)
        self.new_rows.append(row)
        return True

    def runs(self) -> None:
        runs = self.root / RUNS_DIR
        if not runs.is_dir():
            return
        by_dir: dict[str, list[int]] = {}
        for i, path in enumerate(self.cache.paths):
            if path.startswith(RUNS_DIR + "/"):
                by_dir.setdefault(path.rsplit("/", 2)[0], []).append(i)
        now_ns = time.time_ns()
        for suite_entry in sorted(os.scandir(runs), key=lambda e: e.name):
            if not suite_entry.is_dir():
                continue
            rel_dir = f"{RUNS_DIR}/{suite_entry.name}"
            mtime = suite_entry.stat().st_mtime_ns
            if self.cache.dirs.get(rel_dir) == mtime:
                self.keep.extend(by_dir.get(rel_dir, []))
                self.dirs[rel_dir] = mtime
                continue
            complete = True
            for run_entry in os.scandir(suite_entry.path):
                if run_entry.name.startswith(".") or not run_entry.is_dir():
                    continue
                rel = f"{rel_dir}/{run_entry.name}/{RUN_FILE}"
                index = self.position.get(rel)
                if index is not None:
                    self.keep.append(index)
                elif not self.parse(rel):
                    complete = False  # a run still being written: list this folder again
            if complete and now_ns - mtime > RACY_S * 1e9:
                self.dirs[rel_dir] = mtime

    def baselines(self) -> None:
        folder = self.root / BASELINES_DIR
        if not folder.is_dir():
            return
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if not entry.name.endswith(".json") or not entry.is_file():
                continue
            rel = f"{BASELINES_DIR}/{entry.name}"
            stat = entry.stat()
            stamp = [stat.st_mtime_ns, stat.st_size]
            index = self.position.get(rel)
            if index is not None and self.cache.stamps.get(rel) == stamp:
                self.keep.append(index)
                self.stamps[rel] = stamp
            elif self.parse(rel) and self.new_paths and self.new_paths[-1] == rel:
                self.stamps[rel] = stamp

    def result(self) -> tuple[RunsIndex, bool]:
        """The cache after this load, and whether it changed."""
        cache = self.cache
        unchanged = (
            not self.new_rows
            and len(self.keep) == len(cache.paths)
            and self.keep == list(range(len(cache.paths)))
            and self.dirs == cache.dirs
            and self.stamps == cache.stamps
        )
        if unchanged:
            return cache, False
        table = {}
        for name in RUN_COLUMNS:
            column = cache.table.get(name, [])
            table[name] = [column[i] for i in self.keep] + [row[name] for row in self.new_rows]
        paths = [cache.paths[i] for i in self.keep] + self.new_paths
        return RunsIndex(paths, table, self.dirs, self.stamps), True


def load_runs(
    root: Path | str | None = None,
    *,
    suite: str | None = None,
    kind: str | None = None,
    use_cache: bool = True,
) -> pd.DataFrame:
    """One row per run record (runs and baselines) under `root`, columns `RUN_COLUMNS`.

    `suite` and `kind` ("run" / "baseline") filter rows. Unusable files are listed in
    `df.attrs["skipped"]` (and logged), never fatal. Sorted by `started_at`.
    """
    import pandas as pd

    root = Path(root) if root is not None else default_results_dir()
    cache_file = root / CACHE_FILE
    scan = _Scan(root, RunsIndex.read(cache_file, RUN_COLUMNS) if use_cache else RunsIndex())
    scan.runs()
    scan.baselines()
    cache, changed = scan.result()
    if use_cache and changed:
        cache.write(cache_file)
    frame = pd.DataFrame(cache.table, columns=list(RUN_COLUMNS))
    if suite is not None:
        frame = frame[frame["suite"] == suite]
    if kind is not None:
        frame = frame[frame["kind"] == kind]
    base = str(root).rstrip("/") + "/"
    frame["path"] = [base + rel for rel in frame["path"]]
    for name in ("started_at", "finished_at"):
        frame[name] = pd.to_datetime(frame[name], utc=True, format="ISO8601")
    for name in ("accept_length", "ci_low", "ci_high", "accuracy", "floor"):
        frame[name] = pd.to_numeric(frame[name], errors="coerce")
    frame = frame.sort_values("started_at", kind="stable").reset_index(drop=True)
    frame.attrs["skipped"] = scan.skipped
    return frame


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

    `sources`: a results root, run folders, or requests.jsonl files. Bad lines and
    unreadable files are listed in `df.attrs["skipped"]` and skipped.
    """
    import pandas as pd

    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    for file in _request_files(sources):
        run_dir = file.parent
        try:
            identity = json.loads((run_dir / RUN_FILE).read_bytes())
            run_id, suite = identity["run_id"], identity["suite"]["name"]
        except (OSError, ValueError, KeyError, TypeError):
            _report(skipped, run_dir / RUN_FILE, "missing or unreadable: its requests are skipped")
            continue
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            _report(skipped, file, f"cannot read: {error}")
            continue
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or "completion_tokens" not in row:
                    raise ValueError("not a request row")
            except ValueError as error:
                _report(skipped, file, f"line {number}: {error}")
                continue
            row.update(suite=suite, run_id=run_id, run_dir=str(run_dir))
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["skipped"] = skipped
    return frame


# ---------------------------------------------------------------- single records


def read_run(run_dir: Path) -> RunRecord:
    """A run folder's record, validated (for one run: plots, compare)."""
    file = run_dir / RUN_FILE if run_dir.is_dir() else run_dir
    try:
        return RunRecord.model_validate_json(file.read_bytes())
    except OSError as error:
        from harness.errors import BadInput

        raise BadInput(f"{file}: cannot read run record: {error.strerror or error}") from None
    except ValueError as error:
        from harness.errors import BadInput

        raise BadInput(f"{file}: not a valid run record: {error}") from None


def read_requests(run_dir: Path) -> list[dict[str, Any]]:
    """A run's request rows as dicts (bad lines skipped with a warning)."""
    file = run_dir / REQUESTS_FILE
    if not file.exists():
        return []
    rows = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except ValueError as error:
            log.warning("skipped %s line %d: %s", file, number, error)
    return rows


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and value == value  # NaN != NaN
