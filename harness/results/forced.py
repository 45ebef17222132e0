"""A forced-acceptance ladder's record (`harness forced`, docs/speed.md "Forced
acceptance"): per point the forced accept length, the one achieved, the speedups over the
target alone with their CIs, and the run that holds the point's rows; the real run (no
knob) marked; the break-even accept length where speculation starts to pay.

    results/forced/<suite>/<UTC time>-<id>/forced.json   this record
    results/forced/<suite>/<UTC time>-<id>/forced.png    its plot
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness.results.layout import new_record_folder, write_record_file
from harness.results.record import VerdictStatus

FORCED_DIR = "forced"
FORCED_FILE = "forced.json"
FORCED_PNG = "forced.png"
FORCED_SCHEMA_VERSION = 1


class _Forced(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ForcedPoint(_Forced):
    """One launch: `forced` None is the real run (the knob off)."""

    forced: float | None = Field(default=None, ge=1.0)
    achieved: float | None = Field(default=None, ge=1.0)  # accept length in `metric`
    speedup_tpot: float | None = None
    speedup_tpot_ci: tuple[float, float] | None = None
    speedup_throughput: float | None = None
    speedup_throughput_ci: tuple[float, float] | None = None
    tpot_s: float | None = None  # speculation's mean TPOT (measurement.speedup)
    output_tokens_per_s: float | None = None  # speculation's (measurement.speedup)
    series: str = Field(min_length=1)
    run_id: str | None = None
    run_dir: str | None = None  # relative to the results folder
    settings: dict[str, str | float] = Field(default_factory=dict)  # the knob as set
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


class BreakEven(_Forced):
    """Where the system's speedup crosses 1.0 against achieved accept length: linear
    interpolation between the two forced points around the first crossing; None: none in
    the ladder's range."""

    figure: str
    accept_length: float | None = None
    note: str


class ForcedRecord(_Forced):
    schema_version: int = FORCED_SCHEMA_VERSION
    forced_id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    engine: str
    knob: str  # the variable or key forced, and where the engine reads it
    block_size: int = Field(ge=1)
    started_at: datetime
    finished_at: datetime | None = None
    label: str | None = None
    metric: str  # the accept-length definition of `achieved`
    definitions: dict[str, str]
    points: list[ForcedPoint]
    break_even: list[BreakEven] = Field(default_factory=list)
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


def forced_dir(results: Path, suite: str, started_at: datetime, forced_id: str) -> Path:
    """The ladder's folder, created exclusively."""
    return new_record_folder(results, FORCED_DIR, suite, started_at, forced_id)


def write_forced(folder: Path, record: ForcedRecord, results: Path) -> Path:
    return write_record_file(folder / FORCED_FILE, record, results)
