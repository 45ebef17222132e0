"""One run record as the loader's row: checked field by field, flattened, never trusted.

`flatten_record` reads the raw JSON (no pydantic per file) and checks the type of every
field it reads: a record is either a valid row or a `Skip` whose message names the
field and what is wrong (`measurement: expected an object, got a list`). Files are read,
checked and validated against the record model by the door
(`harness.results.readers.parse_run`), which flattens each record here.

Schema versions: 1 and 2 (docs/run-record.md). A version 1 record reads as metric
"per_request" (its accept_length was sum(completion tokens) / sum(verify steps)).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pydantic import ValidationError

T = TypeVar("T")  # what a record field is read as

READS_SCHEMA = 2  # the newest record schema this loader understands
METRICS = ("server_avg", "per_request", "per_request_mean", "spec_accept_length_mean")
VERDICTS = ("pass", "fail", "error", "skipped")
KINDS = ("run", "baseline")

# One row per run; dotted names mirror the record's nesting.
RUN_COLUMNS = (
    "suite", "run_id", "kind", "label", "source", "external", "started_at", "finished_at",
    "schema_version", "suite_sha256",
    "build.engine", "build.spec", "build.version", "build.git_sha", "build.patch_sha256",
    "build.options", "provenance.harness_version", "provenance.hostname", "provenance.gpu",
    "provenance.n_gpus", "metric", "accept_length", "ci_low", "ci_high", "ci_level",
    "accept_length_server_avg", "accept_length_per_request", "accept_length_per_request_mean",
    "accept_length_spec_accept_length_mean",
    "server_reported_accept_length", "n_requests", "n_finished", "n_planned", "partial",
    "completion_tokens", "correct_drafts", "verify_steps", "accuracy",
    "output_throughput_tok_s", "duration_s", "stopped_early",
    "verdict", "reasons", "floor", "path",
)  # fmt: skip

# Column kinds: the loader's DataFrame types (store._frame) and the index's encodings.
FLOATS = ("accept_length", "ci_low", "ci_high", "ci_level", "accept_length_server_avg",
          "accept_length_per_request", "accept_length_per_request_mean",
          "accept_length_spec_accept_length_mean",
          "server_reported_accept_length", "accuracy",
          "output_throughput_tok_s", "duration_s", "floor")  # fmt: skip
COUNTS = ("schema_version", "provenance.n_gpus", "n_requests", "n_finished", "n_planned",
          "completion_tokens", "correct_drafts", "verify_steps")
FLAGS = ("external", "partial", "stopped_early")

_EARLIEST, _LATEST = 1678, 2261  # what a pandas timestamp (ns) can hold


class Skip(Exception):
    """A file the loader cannot use; the message says why."""


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


class _Section:
    """Typed access to one JSON object of the record; errors name the dotted field."""

    def __init__(self, data: object, name: str, required: bool = True) -> None:
        if data is None and not required:
            data = {}
        if not isinstance(data, dict):
            raise Skip(f"{name or 'record'}: expected an object, got {_kind(data)}")
        self.data, self.name = data, name

    def _where(self, key: str) -> str:
        return f"{self.name}.{key}" if self.name else key

    def _get(self, key: str, required: bool, accepts: tuple[type[T], ...], what: str
             ) -> T | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise Skip(f"{self._where(key)}: missing")
            return None
        if not isinstance(value, accepts) or (isinstance(value, bool) and bool not in accepts):
            raise Skip(f"{self._where(key)}: expected {what}, got {_kind(value)}")
        return value

    def text(self, key: str, required: bool = False) -> str | None:
        return self._get(key, required, (str,), "a string")

    def integer(self, key: str, required: bool = False) -> int | None:
        value = self._get(key, required, (int,), "an integer")
        if value is not None and not -(2**63) <= value < 2**63:
            raise Skip(f"{self._where(key)}: {value} is out of range")
        return value

    def flag(self, key: str) -> bool | None:
        return self._get(key, False, (bool,), "true or false")

    def number(self, key: str, required: bool = False) -> float | None:
        value = self._get(key, required, (int, float), "a number")
        if value is not None and not (abs(value) < 1e300 and math.isfinite(value)):
            raise Skip(f"{self._where(key)}: not a finite number")
        return value

    def choice(self, key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
        value = self.text(key, required=default is None) or default
        if value is None or value not in allowed:
            raise Skip(f"{self._where(key)}: {value!r} is not one of {', '.join(allowed)}")
        return value

    def time(self, key: str, required: bool = False) -> str | None:
        text = self.text(key, required)
        if text is None:
            return None
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise Skip(f"{self._where(key)}: not an ISO 8601 time: {text[:40]!r}") from None
        if not _EARLIEST <= moment.year <= _LATEST:
            raise Skip(f"{self._where(key)}: year {moment.year} out of range")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)  # the harness writes UTC
        return moment.astimezone(UTC).isoformat()

    def section(self, key: str, required: bool = False) -> _Section:
        return _Section(self.data.get(key), self._where(key), required)

    def items(self, key: str) -> list[object]:
        return self._get(key, False, (list,), "a list") or []


def flatten_record(data: object, path: str = "") -> dict[str, object]:
    """The loader's row for one parsed run.json; raises Skip naming what is wrong."""
    if not isinstance(data, dict):
        raise Skip("not a JSON object")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise Skip("no integer schema_version: not a harness run record")
    if version > READS_SCHEMA:
        raise Skip(f"schema_version {version} is newer than this harness reads ({READS_SCHEMA})")
    if version < 1:
        raise Skip(f"schema_version {version}: no such version")
    record = _Section(data, "")
    suite = record.section("suite", required=True)
    name = suite.text("name")
    if name is None or not isinstance(data.get("run_id"), str) or "started_at" not in data:
        raise Skip("no suite.name, run_id or started_at: not a harness run record")
    kind = record.choice("kind", KINDS, "run")
    run = kind == "run"  # only a baseline (a figure quoted from elsewhere) has no time/verdict
    floors = suite.section("document", required=True).section("floors")
    build = record.section("build", required=True)
    provenance = record.section("provenance", required=True)
    verdict = record.section("verdict", required=run)
    gpus = [_Section(gpu, f"provenance.gpus[{i}]").text("name", required=True)
            for i, gpu in enumerate(provenance.items("gpus"))]
    reasons = [reason for reason in verdict.items("reasons") if isinstance(reason, str)]
    if len(reasons) != len(verdict.items("reasons")):
        raise Skip("verdict.reasons: expected a list of strings")
    options = build.section("options").data
    row = {
        "suite": name,
        "run_id": data["run_id"],
        "kind": kind,
        "label": record.text("label"),
        "source": record.text("source"),
        "external": record.flag("external") or False,
        "started_at": record.time("started_at", required=run),
        "finished_at": record.time("finished_at"),
        "schema_version": version,
        "suite_sha256": suite.text("sha256", required=True),
        "build.engine": build.text("engine", required=True),
        "build.spec": build.text("spec"),
        "build.version": build.text("version"),
        "build.git_sha": build.text("git_sha"),
        "build.patch_sha256": build.text("patch_sha256"),
        "build.options": json.dumps(options, sort_keys=True) if options else None,
        "provenance.harness_version": provenance.text("harness_version", required=True),
        "provenance.hostname": provenance.text("hostname"),
        "provenance.gpu": gpus[0] if gpus else None,
        "provenance.n_gpus": len(gpus),
        "verdict": verdict.choice("status", VERDICTS) if verdict.data else None,
        "reasons": "; ".join(reasons) or None,
        "floor": floors.number("accept_length"),
        "path": path,
    }
    row.update(_measurement(record.section("measurement"), version))
    return row


def _measurement(m: _Section, version: int) -> dict[str, object]:
    """The measurement's columns; all None when the run measured nothing."""
    empty = not m.data
    value = m.number("accept_length", required=not empty)
    ci = m.data.get("accept_length_ci")
    if ci is not None and not (
        isinstance(ci, list) and len(ci) == 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in ci)
    ):  # fmt: skip
        raise Skip("measurement.accept_length_ci: expected [low, high] numbers")
    n_requests = m.integer("n_requests")
    if version >= 2:
        metric = m.choice("metric", METRICS, "per_request")  # the record model's default
        server_avg = m.number("accept_length_server_avg")
        per_request = m.number("accept_length_per_request")
        per_request_mean = m.number("accept_length_per_request_mean")
        spec_mean = m.number("accept_length_spec_accept_length_mean")
        server_reported = m.number("server_reported_accept_length")
        n_finished = m.integer("n_finished")  # the requests in the figure when not stated
        n_finished, partial = n_requests if n_finished is None else n_finished, \
            m.flag("partial") or False  # fmt: skip
    else:  # v1: accept_length was sum(completion tokens) / sum(verify steps)
        metric, server_avg, per_request = "per_request", None, value
        per_request_mean = spec_mean = None
        server_reported = m.number("server_accept_length")
        n_finished, partial = n_requests, False
    return {
        "metric": None if empty else metric,
        "accept_length": value,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "ci_level": m.number("ci_level"),
        "accept_length_server_avg": server_avg,
        "accept_length_per_request": per_request,
        "accept_length_per_request_mean": per_request_mean,
        "accept_length_spec_accept_length_mean": spec_mean,
        "server_reported_accept_length": server_reported,
        "n_requests": n_requests,
        "n_finished": n_finished,
        "n_planned": m.integer("n_planned"),
        "partial": None if empty else partial,
        "completion_tokens": m.integer("completion_tokens"),
        "correct_drafts": m.integer("correct_drafts"),
        "verify_steps": m.integer("verify_steps"),
        "accuracy": m.number("accuracy"),
        "output_throughput_tok_s": m.number("output_throughput_tok_s"),
        "duration_s": m.number("duration_s"),
        "stopped_early": m.flag("stopped_early"),
    }


def validation_reason(error: ValidationError) -> str:
    """A pydantic ValidationError as one line: the first bad field and what is wrong."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "record"
    return f"{where}: {first['msg']}"


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


# A loader row's fields as their columns' kinds (FLOATS, COUNTS, text): None when absent.


def row_number(row: Mapping[str, object], key: str) -> float | None:
    value = row[key]
    return float(value) if isinstance(value, int | float) and is_number(value) else None


def row_count(row: Mapping[str, object], key: str) -> int | None:
    value = row[key]
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def row_text(row: Mapping[str, object], key: str) -> str | None:
    value = row[key]
    return value if isinstance(value, str) else None
