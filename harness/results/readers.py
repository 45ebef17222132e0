"""The one door to a single stored document: a run record's JSON, a calibration record.

Every reader of `run.json` (the paired gate's reuse and report, `power`, `calibrate`,
`show`) and of a calibration record goes through here, so each reads only a regular file
of bounded size, opened without blocking, parsed strictly, every figure checked
(`harness.results.possible`) and, for a run record, validated against the record model
with no string read as a number. `tests/layout/test_one_door.py` fails on any other code
that opens these files. The bulk loader (`store.load_runs`) and the request rows
(`store.read_requests`) are the other doors, built on the same checks.

A file that is not usable raises `BadRecord`: a `ValueError` (so a scan over many files
skips it as it would skip a file it cannot parse) and a `BadInput` (so a command that
needed this one file ends with exit 2 and one line naming the file and field).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import BadInput
from harness.results.layout import RUN_FILE
from harness.results.skips import report

CALIBRATION_KIND = "calibration"  # harness.run.calibrate's record kind
METRICS = ("server_avg", "per_request")
MAX_RUNS = 10_000  # repeats in one calibration


class BadRecord(BadInput, ValueError):
    """A stored document a reader may not use; the message names the file and field."""


def _load(file: Path) -> tuple[bytes, Any]:
    from harness.results.checks import BadFile, read_regular, strict_json

    try:
        text, _ = read_regular(file)
        if not text.strip():
            raise BadFile("empty file")
        return text, strict_json(text)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise BadRecord(f"{file}: cannot read: {error.strerror or error}") from None
    except BadFile as error:
        raise BadRecord(f"{file}: {error}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BadRecord(f"{file}: not valid JSON (truncated or corrupt): {error}") from None


def _skip(file: Path, error: BadRecord) -> BadRecord:
    report([], file, error.message.removeprefix(f"{file}: "))
    return error


def _record(file: Path, require_all: bool) -> tuple[dict[str, Any], Any]:
    """(JSON, RunRecord or None) of a run record, checked like every record the loader
    reads; `require_all`: every field the model has (else a missing one is allowed, a
    present one must have its type). BadRecord, unreported, for anything unusable."""
    from pydantic import ValidationError

    from harness.results.checks import BadFile
    from harness.results.possible import check_record
    from harness.results.record import RunRecord
    from harness.results.rows import validation_reason

    text, data = _load(file)
    if not isinstance(data, dict):
        raise BadRecord(f"{file}: not a JSON object")
    try:
        check_record(data, text)
        return data, RunRecord.model_validate_json(text, strict=True)  # no str as a number
    except BadFile as error:
        raise BadRecord(f"{file}: not a usable run record: {error}") from None
    except ValidationError as error:
        # a field a reader does not need may be missing (records written by hand or
        # by an older harness); a field present must have its type
        if require_all or any(e["type"] != "missing" for e in error.errors()):
            raise BadRecord(f"{file}: not a valid run record: {validation_reason(error)}"
                            ) from None
        return data, None
    except (ValueError, RecursionError) as error:
        raise BadRecord(f"{file}: not a valid run record: {error}") from None


def read_run_data(path: Path | str) -> dict[str, Any]:
    """A run record's JSON (from a run folder or its run.json), checked like every record
    the loader reads and valid for the record model. FileNotFoundError for a run still
    being written; BadRecord (reported once per command) for anything unusable. Fields
    may be missing (a reader uses `.get`); a field present has the model's type."""
    path = Path(path)
    file = path / RUN_FILE if path.is_dir() else path
    try:
        return _record(file, require_all=False)[0]
    except BadRecord as error:
        raise _skip(file, error) from None


def read_run(path: Path | str) -> Any:
    """A run record (`harness.results.record.RunRecord`, every field there) from a run
    folder or its run.json, for a command about that one run (plots, compare, publish):
    the same checks as `read_run_data`; BadRecord naming the file otherwise, a missing
    file included."""
    path = Path(path)
    file = path / RUN_FILE if path.is_dir() else path
    try:
        return _record(file, require_all=True)[1]
    except FileNotFoundError as error:
        raise BadRecord(f"{file}: cannot read run record: {error.strerror or error}"
                        ) from None


def read_calibration(path: Path | str) -> dict[str, Any]:
    """A calibration record (`harness calibrate`), checked: every field `show` and the
    gate print is there, of its type, and possible. BadRecord otherwise (reported)."""
    from harness.results.checks import BadFile, check_sizes

    file = Path(path)
    try:
        text, data = _load(file)
        try:
            check_sizes(data, text)
            check_calibration(data)
        except BadFile as error:
            raise BadRecord(f"{file}: not a usable calibration record: {error}") from None
    except BadRecord as error:
        raise _skip(file, error) from None
    return data


def check_calibration(data: Any) -> None:
    """BadFile naming the first field of a calibration record that is missing, of
    another type, or impossible."""
    from harness.results import possible as p
    from harness.results.checks import BadFile

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
    top = p.top_of(None)
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
