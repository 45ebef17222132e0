"""A concurrency sweep's record (`harness sweep`, docs/speed.md "Concurrency sweep"):
which run record holds each point, the gate's finding at each point against concurrency 1,
and the sweep's status. The figures stay in the points' own run records (read through
`harness.results.readers`); this file only says which runs form the sweep.

    results/sweeps/<suite>/<UTC time>-<sweep id>/sweep.json   this record
    results/sweeps/<suite>/<UTC time>-<sweep id>/sweep.png    its plot
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.results.checks import BadFile, read_regular, strict_json
from harness.results.layout import new_record_folder, write_record_file
from harness.results.readers import BadRecord
from harness.results.record import VerdictStatus

SWEEPS_DIR = "sweeps"
SWEEP_FILE = "sweep.json"
SWEEP_PNG = "sweep.png"
SWEEP_SCHEMA_VERSION = 1


class _Sweep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SweepPoint(_Sweep):
    """One concurrency: the series and run that measured it and that run's verdict."""

    concurrency: int = Field(ge=1)
    series: str = Field(min_length=1)
    run_id: str | None = None  # None: the point never got a record
    run_dir: str | None = None  # relative to the results folder
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


class GateFinding(_Sweep):
    """The concurrency gate at one point, as the judge decided it
    (`harness.run.judge.decide` on the paired gate's evidence): `result` is
    `harness.metrics.paired_gate.PairedResult.to_dict()`, absent when no test could be made."""

    concurrency: int = Field(ge=1)
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    result: dict[str, object] | None = None


class SweepGate(_Sweep):
    """`--max-drop`: accept length at each concurrency within `max_drop` (a share of
    concurrency 1's figure) of concurrency 1's, paired by prompt, one-sided at `alpha`."""

    max_drop: float = Field(gt=0.0, lt=1.0)
    alpha: float = Field(gt=0.0, lt=0.5)
    inconclusive: Literal["pass", "fail"]
    reference_concurrency: int = 1
    findings: list[GateFinding] = Field(default_factory=list)


class SweepRecord(_Sweep):
    schema_version: int = SWEEP_SCHEMA_VERSION
    sweep_id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    started_at: datetime
    finished_at: datetime | None = None
    label: str | None = None
    concurrencies: list[Annotated[int, Field(ge=1)]]
    # the accept-length definition judged
    metric: Literal["server_avg", "per_request", "per_request_mean",
                    "spec_accept_length_mean"]
    definition: str  # its text (harness.suite.entries.METRIC_DEFINITIONS)
    points: list[SweepPoint]
    gate: SweepGate | None = None
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


def sweep_dir(results: Path, suite: str, started_at: datetime, sweep_id: str) -> Path:
    """The sweep's folder, created exclusively (two sweeps never share one)."""
    return new_record_folder(results, SWEEPS_DIR, suite, started_at, sweep_id)


def write_sweep(folder: Path, record: SweepRecord, results: Path) -> Path:
    return write_record_file(folder / SWEEP_FILE, record, results)


def read_sweep(path: Path | str) -> SweepRecord:
    """A sweep folder's record (or the file itself); BadRecord naming the file and
    what is wrong (exit 2) when it is missing or not a usable sweep record."""
    file = Path(path)
    file = file / SWEEP_FILE if file.is_dir() else file
    try:
        text, _ = read_regular(file)
        data = strict_json(text)
    except FileNotFoundError:
        raise BadRecord(file, "missing: not a sweep folder") from None
    except (BadFile, OSError, ValueError, UnicodeDecodeError, RecursionError) as error:
        raise BadRecord(file, f"not a usable sweep record: {error}") from None
    if not isinstance(data, dict):
        raise BadRecord(file, "not a valid sweep record: not a JSON object")
    try:  # strict: no number read from a string
        return SweepRecord.model_validate_json(text, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        raise BadRecord(file, f"not a valid sweep record: {where}: {first['msg']}") from None
