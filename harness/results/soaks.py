"""A soak's record (`harness soak`, docs/soak.md): one server, the same workload repeated
for a set time with prefix caching on; accept length per window of serving time with its
CI and definition, the drift over the run and the gate's finding on it. The requests are
the soak's run (a normal run record, series `<suite>-soak`), each row with the time it
finished; read back through `harness.results.readers.read_soak`.

    results/soak/<suite>/<UTC time>-<id>/soak.json   this record
    results/soak/<suite>/<UTC time>-<id>/soak.png    its plot
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness.results.layout import new_record_folder, write_record_file
from harness.results.record import VerdictStatus

SOAK_DIR = "soak"
SOAK_FILE = "soak.json"
SOAK_PNG = "soak.png"
SOAK_SCHEMA_VERSION = 1


class _Soak(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SoakWindow(_Soak):
    """One window of serving time: the requests that finished in it."""

    index: int = Field(ge=0)
    start_s: float = Field(ge=0.0)
    end_s: float = Field(ge=0.0)
    n_requests: int = Field(ge=0)
    n_questions: int = Field(ge=0)
    accept_length: float | None = Field(default=None, ge=1.0)  # None: no request in it
    ci: tuple[float, float] | None = None


class SoakDrift(_Soak):
    """The gate's finding on the drift (`harness.metrics.drift`); `result` None: no test."""

    status: VerdictStatus
    max_drift: float
    alpha: float
    inconclusive: str
    definition: str
    result: dict[str, object] | None = None
    reason: str | None = None


class SoakRecord(_Soak):
    schema_version: int = SOAK_SCHEMA_VERSION
    soak_id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    engine: str
    prefix_cache: str  # the engine's flag as the soak set it, or why it has none
    started_at: datetime
    finished_at: datetime | None = None
    label: str | None = None
    duration_s: float = Field(gt=0.0)  # asked
    window_s: float = Field(gt=0.0)
    measured_s: float | None = None  # the measured phase as it ran (in-flight ends included)
    metric: str  # each window's accept-length definition
    window_definition: str
    series: str
    run_id: str | None = None
    run_dir: str | None = None  # relative to the results folder
    windows: list[SoakWindow] = Field(default_factory=list)
    drift: SoakDrift | None = None
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


def soak_dir(results: Path, suite: str, started_at: datetime, soak_id: str) -> Path:
    """The soak's folder, created exclusively."""
    return new_record_folder(results, SOAK_DIR, suite, started_at, soak_id)


def write_soak(folder: Path, record: SoakRecord, results: Path) -> Path:
    return write_record_file(folder / SOAK_FILE, record, results)
