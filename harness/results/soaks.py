"""A soak's record (`harness soak`, docs/soak.md): one server, the same workload repeated
for a set time with prefix caching on; accept length per window of serving time with its
CI and definition, the drift over the run and the gate's finding on it. The requests are
the soak's run (a normal run record, series `<suite>-soak`), each row with the time it
finished; read back through `harness.results.readers.read_soak`. Kept as every
protocol's record is (`harness.results.protocol_record`): `soak.json` and its plot
`soak.png` in `results/soak/<suite>/<UTC time>-<id>/`.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from harness.results.protocol_record import ProtocolModel, ProtocolRecord, RecordFiles
from harness.results.record import VerdictStatus

SOAKS = RecordFiles(folder="soak", file="soak.json", plot="soak.png", what="soak")
SOAK_FILE, SOAK_PNG = SOAKS.file, SOAKS.plot


class SoakWindow(ProtocolModel):
    """One window of serving time: the requests that finished in it."""

    index: int = Field(ge=0)
    start_s: float = Field(ge=0.0)
    end_s: float = Field(ge=0.0)
    n_requests: int = Field(ge=0)
    n_questions: int = Field(ge=0)
    accept_length: float | None = Field(default=None, ge=1.0)  # None: no request in it
    ci: tuple[float, float] | None = None


class SoakDrift(ProtocolModel):
    """The gate's finding on the drift (`harness.metrics.drift`); `result` None: no test."""

    status: VerdictStatus
    max_drift: float
    alpha: float
    inconclusive: str
    definition: str
    result: dict[str, object] | None = None
    reason: str | None = None


class SoakRecord(ProtocolRecord):
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
