"""The one door to stored results: a run record, its request rows, a calibration record,
a protocol's record (a forced-acceptance ladder's, a soak's, a sweep's, a grid's).

Every reader goes through here: `read_run` (a run folder or its run.json -> `RunRecord`),
`read_requests` (a run's request rows -> `RequestRow`s), `read_calibration`,
`read_forced` (a ladder's folder or its forced.json -> `ForcedRecord`); the loader
(`store.load_runs`, the suite index, the baselines) parses each record with the same
`parse_run`, so a record is readable everywhere or nowhere. Each file is read only when
it is a regular file of bounded size, opened without blocking (`checks.read_regular`),
parsed strictly, every figure checked (`checks`, `possible`), flattened into the loader's
row (`rows.flatten_record`, which names a wrong type) and validated against the record
model with no string read as a number. `tests/layout/test_one_door.py` fails on any other
code that opens these files.

A file that is not usable raises `BadRecord`: a `ValueError` (so a scan over many files
passes over it as over a file it cannot parse) and a `BadInput` (so a command that needed
this one file ends with exit 2 and one line naming the file and field); a run folder with
no run.json at all raises `NoRecord`, a `BadRecord` too. The loader's own reads raise
`rows.Skip` (reported once per command and skipped).

The record model (pydantic) is imported where a record is parsed, not at import: the
loader reads an indexed history without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from harness.errors import BadInput
from harness.results import possible as p
from harness.results.checks import (
    BadFile,
    check_sizes,
    read_regular,
    step_of,
    strict_json,
)
from harness.results.layout import REQUESTS_FILE, RUN_FILE, RUNS_DIR, TARGET_ALONE_FILE
from harness.results.possible import check_record, check_request_row, check_target_alone_row
from harness.results.rows import METRICS, Skip, flatten_record, validation_reason
from harness.results.skips import report, reporting
from harness.speculation.bounds import StepBound

if TYPE_CHECKING:
    from pydantic import BaseModel

    from harness.results.forced import ForcedRecord
    from harness.results.record import RequestRow, RunRecord
    from harness.results.soaks import SoakRecord

    Model = TypeVar("Model", bound=BaseModel)

CALIBRATION_KIND = "calibration"  # harness.protocols.calibrate's record kind
MAX_RUNS = 10_000  # repeats in one calibration
MAX_LINE_REPORTS = 20  # bad lines of one file reported one by one; the rest summed up
MAX_REQUEST_LINES = 1_000_000  # a run plans at most 10^5 requests


class BadRecord(BadInput, ValueError):
    """A stored document a reader may not use: `path` (the file, or the file and line)
    and `reason` (the field and what is wrong); the message is both."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class NoRecord(BadRecord):
    """A run folder without run.json: a harness killed before it wrote its record, or a
    run still running."""


# ---------------------------------------------------------------- run records


class ParsedRun(NamedTuple):
    """One run record as read: its JSON, the loader's row of it, and the typed record."""

    data: dict[str, object]
    row: dict[str, object]
    record: RunRecord


def parse_run(text: bytes | str, origin: str = "") -> ParsedRun:
    """A run record's text, checked as every reader checks it; Skip naming the field when
    it is not a usable record. `origin`: the row's `path`."""
    from pydantic import ValidationError

    from harness.results.record import RunRecord

    if not text.strip():
        raise Skip("empty file")
    try:
        data = strict_json(text)
        check_record(data, text)  # sizes and possible figures, before anything reads them
    except BadFile as error:
        raise Skip(str(error)) from None
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise Skip(f"not valid JSON (truncated or corrupt): {error}") from None
    row = flatten_record(data, origin)  # Skip unless data is a JSON object
    if not isinstance(data, dict):
        raise Skip("record: expected an object")
    try:
        record = RunRecord.model_validate_json(text, strict=True)  # no str as a number
    except ValidationError as error:
        raise Skip(f"not a valid run record: {validation_reason(error)}") from None
    except (ValueError, TypeError, RecursionError) as error:
        raise Skip(f"not a valid run record: {error}") from None
    return ParsedRun(data, row, record)


def read_record(file: Path) -> tuple[ParsedRun, list[int]]:
    """The loader's read of one record file: what `parse_run` gives and the stamp
    [mtime_ns, size] of exactly what was read. FileNotFoundError (no record yet) or
    Skip."""
    try:
        text, status = read_regular(file)
    except FileNotFoundError:
        raise
    except BadFile as error:
        raise Skip(str(error)) from None
    except OSError as error:
        raise Skip(f"cannot read: {error.strerror or error}") from None
    owner = file.parent if file.name == RUN_FILE else file
    return parse_run(text, str(owner)), [status.st_mtime_ns, status.st_size]


def run_file(path: Path | str) -> Path:
    """A run folder's run.json; a file as given."""
    path = Path(path)
    return path / RUN_FILE if path.is_dir() else path


def read_run(path: Path | str) -> RunRecord:
    """The run record of a run folder (or a record file: run.json, a baseline), read
    through every check. NoRecord when there is none, BadRecord naming the file and
    field when it is not usable."""
    file = run_file(path)
    try:
        return read_record(file)[0].record
    except FileNotFoundError as error:
        raise NoRecord(file, f"missing ({error.strerror or error}): the harness was killed "
                       "before it wrote it, or the run is still running") from None
    except Skip as why:
        raise BadRecord(file, str(why)) from None


def misplaced(suite_name: object, suite_folder: Path | str) -> str | None:
    """Why a run of `suite_name` does not belong in a results tree's `runs/<suite>/`
    folder `suite_folder`, or None when it does."""
    own = Path(suite_folder).name
    if suite_name == own:
        return None
    return f"suite.name {suite_name!r} is not its folder's ({own!r})"


def read_placed_run(run_dir: Path | str) -> RunRecord:
    """`read_run` for a run folder found among others (a glob's): one in a results tree
    (`runs/<suite>/<run>/`) whose record names another suite is refused as the index
    refuses it (`store.load_runs`), BadRecord naming its run.json with the same reason,
    so a command that reads it both ways reports it once."""
    run_dir = Path(run_dir)
    record = read_run(run_dir)
    if run_dir.parent.parent.name == RUNS_DIR:
        reason = misplaced(record.suite.name, run_dir.parent)
        if reason is not None:
            raise BadRecord(run_dir / RUN_FILE, reason)
    return record


def step_of_record(record: RunRecord) -> StepBound:
    """The most one verify step of the record's settings makes (`checks.step_of`)."""
    return step_of({"suite": {"document": record.suite.document},
                    "build": {"engine": record.build.engine, "options": record.build.options}})


# ---------------------------------------------------------------- request rows


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def request_problem(row: object) -> str | None:
    """Why a requests.jsonl line's counts cannot be used, or None (the rest of its types
    are the row model's)."""
    if not isinstance(row, dict):
        return "not a request row (not a JSON object)"
    for key in ("question_index", "completion_tokens", "verify_steps"):
        if not _count(row.get(key)):
            return f"{key}: expected a non-negative integer, got {row.get(key)!r:.40}"
    if row.get("correct_drafts") is not None and not _count(row["correct_drafts"]):
        return f"correct_drafts: expected a non-negative integer, got {row['correct_drafts']!r:.40}"
    for key in ("accept_length", "spec_accept_length"):
        value = row.get(key)
        if value is not None and not (isinstance(value, int | float)
                                      and not isinstance(value, bool)):
            return f"{key}: expected a number, got {value!r:.40}"
    if row.get("correct") is not None and not isinstance(row["correct"], bool):
        return f"correct: expected true, false or null, got {row['correct']!r:.40}"
    histogram = row.get("accept_histogram")
    if histogram is not None and not (isinstance(histogram, list) and all(map(_count, histogram))):
        return "accept_histogram: expected a list of non-negative integers"
    return None


def _request(line: str, step: StepBound | None, target_alone: bool = False) -> RequestRow:
    """One requests.jsonl line as a checked row; BadFile naming the field."""
    from pydantic import ValidationError

    from harness.results.record import RequestRow

    try:
        row = strict_json(line)
        check_sizes(row, line)
    except (ValueError, RecursionError) as error:
        if isinstance(error, BadFile):
            raise
        raise BadFile(f"not valid JSON: {error}") from None
    if not isinstance(row, dict):
        raise BadFile("not a request row (not a JSON object)")
    problem = request_problem(row) or (check_target_alone_row(row) if target_alone
                                       else check_request_row(row, step))
    if problem:
        raise BadFile(problem)
    steps = row["verify_steps"]
    if row.get("spec_accept_length") is None:  # v1 rows named SGLang's figure accept_length
        row["spec_accept_length"] = row.get("accept_length") or (
            row["completion_tokens"] / steps if steps else 0.0)
    if row.get("accept_length") is None:  # the loader's column, as v1 rows had it
        row["accept_length"] = row["spec_accept_length"] if steps else None
    try:
        return RequestRow.model_validate(row, strict=True)
    except ValidationError as error:
        raise BadFile(f"not a request row: {validation_reason(error)}") from None


def iter_request_rows(file: Path, skipped: list[str], step: StepBound | None = None,
                      strict: bool = False, target_alone: bool = False
                      ) -> Iterator[RequestRow]:
    """The usable rows of one requests.jsonl (a row impossible for a verify step bounded
    by `step`, the record's settings when known, is not one). Bad lines are reported (the
    first `MAX_LINE_REPORTS` one by one, the rest in one line) and skipped; `strict`: the
    first bad line, or a file that cannot be read, raises BadRecord naming the file and
    line. `target_alone`: rows of a server without speculation (`check_target_alone_row`)."""
    try:
        # JSON Lines end at \n (or \r\n), not at the other breaks str.splitlines knows
        # (\x0b, \x1c, \u2028, ...), which JSON may hold between tokens or in strings
        lines = read_regular(file)[0].decode("utf-8").replace("\r\n", "\n").split("\n")
        if len(lines) > MAX_REQUEST_LINES:
            raise BadFile(f"{len(lines)} lines, more than the {MAX_REQUEST_LINES} a run's "
                          "requests may hold")
    except FileNotFoundError:
        if strict:
            raise BadRecord(file, "missing") from None
        return
    except (BadFile, OSError, UnicodeDecodeError) as error:
        reason = str(error) if isinstance(error, BadFile) else f"cannot read: {error}"
        if strict:
            raise BadRecord(file, reason) from None
        report(skipped, file, reason)
        return
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield _request(line, step, target_alone)
        except BadFile as error:
            if strict:
                raise BadRecord(f"{file} line {number}", str(error)) from None
            bad += 1
            if bad <= MAX_LINE_REPORTS:
                report(skipped, f"{file} line {number}", str(error))
    if bad > MAX_LINE_REPORTS:
        report(skipped, file, f"{bad - MAX_LINE_REPORTS} more bad lines (skipped; "
                              f"{bad} in all)")


def read_requests(run_dir: Path | str, record: RunRecord | None = None,
                  strict: bool = False) -> list[RequestRow]:
    """A run's usable request rows, checked against what a verify step of its record's
    settings makes (`record`, else its run.json when readable, else any settings'). Bad lines are
    reported (once per command) and skipped; `strict`: BadRecord on the first, naming
    the file and line, and on a missing or unreadable file."""
    if record is None:
        try:
            record = read_run(run_dir)
        except BadRecord:
            record = None
    step = step_of_record(record) if record is not None else None
    with reporting():
        return list(iter_request_rows(Path(run_dir) / REQUESTS_FILE, [], step, strict))


NO_ROWS = "no request rows (empty, missing or all unusable): no figure without requests"


def read_measured_requests(run_dir: Path | str, record: RunRecord | None = None,
                           strict: bool = False) -> list[RequestRow]:
    """`read_requests` for a reader that computes figures from the rows (`compare`,
    `export`, ...): a run with none (an empty or missing requests.jsonl, or only unusable
    lines) is refused alike, BadRecord naming the file (exit 2)."""
    rows = read_requests(run_dir, record, strict)
    if not rows:
        raise BadRecord(Path(run_dir) / REQUESTS_FILE, NO_ROWS)
    return rows


def read_target_alone(run_dir: Path | str, strict: bool = False) -> list[RequestRow]:
    """The target-alone run's usable rows ([speedup], `target-alone.jsonl`): requests of a
    server without speculation (0 verify steps, no spec counts), checked as any request
    row is, as rows without a verify step (`possible.check_target_alone_row`). Bad lines
    as in `read_requests`."""
    with reporting():
        return list(iter_request_rows(Path(run_dir) / TARGET_ALONE_FILE, [], None, strict,
                                      target_alone=True))


# ---------------------------------------------------------------- protocol records


def in_folder(path: Path | str, file_name: str) -> Path:
    """A record's file: `file_name` in the folder `path`, or `path` itself if it is none."""
    file = Path(path)
    return file / file_name if file.is_dir() else file


def read_protocol_record(file: Path, model: type[Model], what: str) -> Model:
    """A protocol's own record (a grid's `grid.json`, a sweep's `sweep.json`): the file read
    as any record is (regular, bounded, strict JSON), validated against its model with no
    string read as a number; BadRecord naming the file and the first bad field (exit 2)."""
    from pydantic import ValidationError  # as the run record's model: only when parsed

    try:
        text, data = _load(file)
    except FileNotFoundError:
        raise BadRecord(file, f"missing: not a {what} folder") from None
    if not isinstance(data, dict):
        raise BadRecord(file, f"not a valid {what} record: not a JSON object")
    try:
        return model.model_validate_json(text, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise BadRecord(file, f"not a valid {what} record: {where}: {first['msg']}") from None


# ---------------------------------------------------------------- calibration records


def _load(file: Path) -> tuple[bytes, object]:
    try:
        text, _ = read_regular(file)
        if not text.strip():
            raise BadFile("empty file")
        return text, strict_json(text)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise BadRecord(file, f"cannot read: {error.strerror or error}") from None
    except BadFile as error:
        raise BadRecord(file, str(error)) from None
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BadRecord(file, f"not valid JSON (truncated or corrupt): {error}") from None


def read_calibration(path: Path | str) -> dict[str, object]:
    """A calibration record (`harness calibrate`), checked: every field `show` and the
    gate print is there, of its type, and possible. BadRecord otherwise (reported)."""
    file = Path(path)
    try:
        text, data = _load(file)
        try:
            check_sizes(data, text)
            check_calibration(data)
        except BadFile as error:
            raise BadRecord(file, f"not a usable calibration record: {error}") from None
    except BadRecord as error:
        report([], error.path, error.reason)
        raise
    if not isinstance(data, dict):  # check_calibration refused it already
        raise BadRecord(file, "not a usable calibration record: not a JSON object")
    return data


def check_calibration(data: object) -> None:
    """BadFile naming the first field of a calibration record that is missing, of
    another type, or impossible."""
    if not isinstance(data, dict) or data.get("kind") != CALIBRATION_KIND:
        raise BadFile(f"kind: not {CALIBRATION_KIND!r}")
    p._text("calibration_id", data.get("calibration_id"))
    p._text("suite", data.get("suite"))
    p._choice("metric", data.get("metric"), METRICS)
    runs = p.count("n_runs", data.get("n_runs"))
    if runs is None or not 2 <= runs <= MAX_RUNS:
        raise BadFile(f"n_runs: {data.get('n_runs')!r:.40} is not between 2 and {MAX_RUNS}")
    build = data.get("build")
    if build is not None:
        if not isinstance(build, dict):
            raise BadFile("build: expected an object")
        p._text("build.spec", build.get("spec"), required=False)
    host = data.get("host")
    if not isinstance(host, dict):
        raise BadFile("host: expected an object")
    gpus = host.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        raise BadFile("host.gpus: expected a list of names")
    p.entries("host.gpus", gpus, 1024)
    tp = p.count("host.tp_size", host.get("tp_size"))
    if tp is None or tp < 1:
        raise BadFile("host.tp_size: expected a positive integer")
    p._text("host.driver", host.get("driver"), required=False)
    series = data.get("series")
    if not isinstance(series, dict):
        raise BadFile("series: expected an object")
    p.entries("series", series, p.MAX_CATEGORIES)
    top = p.top_of(p.UNKNOWN)  # a calibration names no settings: the loosest
    for name, s in series.items():
        where = f"series.{name}"
        if not isinstance(s, dict):
            raise BadFile(f"{where}: expected an object")
        for key in ("mean", "min", "max"):
            if p.accept(f"{where}.{key}", s.get(key), top) is None and key == "mean":
                raise BadFile(f"{where}.mean: missing")
        for key in ("run_sd", "within_se", "paired_sd", "suggested_relative_drop"):
            if p.number(f"{where}.{key}", s.get(key), 0.0, top, "between 0 and the "
                        "largest accept length") is None:
                raise BadFile(f"{where}.{key}: missing")
        if p.number(f"{where}.suggested_floor", s.get("suggested_floor"), -top, top) is None:
            raise BadFile(f"{where}.suggested_floor: missing")
        low, high, mean = s.get("min"), s.get("max"), s["mean"]
        if low is not None and high is not None and not low - 1e-9 <= mean <= high + 1e-9:
            raise BadFile(f"{where}.mean: {mean!r} is outside [min, max]")
        p._text(f"{where}.floor_rule", s.get("floor_rule"))
        p._text(f"{where}.tolerance_rule", s.get("tolerance_rule"))
        for key in ("figures", "runs"):
            p.entries(f"{where}.{key}", s.get(key), MAX_RUNS)
        for i, figure in enumerate(s.get("figures") or []):
            p.accept(f"{where}.figures[{i}]", figure, top)


# ---------------------------------------------------------------- soak records


def read_soak(path: Path | str) -> SoakRecord:
    """A soak's record (`harness soak`: its folder or soak.json), checked against its model;
    BadRecord naming the file and the first field that is wrong (reported)."""
    from pydantic import ValidationError  # pydantic loads where a record is parsed

    from harness.results.soaks import SOAK_FILE, SoakRecord

    file = in_folder(path, SOAK_FILE)
    try:
        try:
            text, data = _load(file)
        except FileNotFoundError:
            raise BadRecord(file, "missing") from None
        try:
            check_sizes(data, text)
            return SoakRecord.model_validate(data)
        except BadFile as error:
            raise BadRecord(file, f"not a usable soak record: {error}") from None
        except ValidationError as error:
            raise BadRecord(file, f"not a usable soak record: "
                                  f"{validation_reason(error)}") from None
    except BadRecord as error:
        report([], error.path, error.reason)
        raise
# ---------------------------------------------------------------- forced-acceptance ladders


def read_forced(path: Path | str) -> ForcedRecord:
    """A forced-acceptance ladder's record (`harness forced`): its folder or its
    forced.json, checked strictly (no number read from a string, every figure possible:
    accept lengths in 1..its block size, speedups > 0 within their CIs). BadRecord naming
    the file and the field otherwise (exit 2), never another exception."""
    from pydantic import ValidationError

    from harness.results.forced import FORCED_FILE, ForcedRecord

    file = in_folder(path, FORCED_FILE)
    try:
        text, data = _load(file)
        check_sizes(data, text)
    except FileNotFoundError as error:
        raise BadRecord(file, f"missing ({error.strerror or error}): not a forced-acceptance "
                        "ladder's folder, or the ladder is still running") from None
    except BadFile as error:
        raise BadRecord(file, f"not a usable forced record: {error}") from None
    if not isinstance(data, dict):
        raise BadRecord(file, "not a usable forced record: not a JSON object")
    try:
        return ForcedRecord.model_validate_json(text, strict=True)
    except ValidationError as error:
        raise BadRecord(file, f"not a usable forced record: "
                        f"{validation_reason(error)}") from None
    except (ValueError, TypeError, RecursionError) as error:
        raise BadRecord(file, f"not a usable forced record: {error}") from None
