"""A concurrency sweep's record (`harness sweep`, docs/speed.md "Concurrency sweep"):
which run record holds each point, the gate's finding at each point against concurrency 1,
and the sweep's status. The figures stay in the points' own run records (read through
`harness.results.readers`); this file only says which runs form the sweep, kept as
every protocol's record is (`harness.results.protocol_record`): `sweep.json` and its plot
`sweep.png` in `results/sweeps/<suite>/<UTC time>-<sweep id>/`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from harness.results.protocol_record import ProtocolModel, ProtocolRecord, RecordFiles
from harness.results.readers import in_folder, read_protocol_record
from harness.results.record import VerdictStatus

SWEEPS = RecordFiles(folder="sweeps", file="sweep.json", plot="sweep.png", what="sweep")
SWEEP_FILE, SWEEP_PNG = SWEEPS.file, SWEEPS.plot


class SweepPoint(ProtocolModel):
    """One concurrency: the series and run that measured it and that run's verdict."""

    concurrency: int = Field(ge=1)
    series: str = Field(min_length=1)
    run_id: str | None = None  # None: the point never got a record
    run_dir: str | None = None  # relative to the results folder
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


class GateFinding(ProtocolModel):
    """The concurrency gate at one point, as the judge decided it
    (`harness.run.judge.decide` on the paired gate's evidence): `result` is
    `harness.metrics.paired_gate.PairedResult.to_dict()`, absent when no test could be made."""

    concurrency: int = Field(ge=1)
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    result: dict[str, object] | None = None


class SweepGate(ProtocolModel):
    """`--max-drop`: accept length at each concurrency within `max_drop` (a share of
    concurrency 1's figure) of concurrency 1's, paired by prompt, one-sided at `alpha`."""

    max_drop: float = Field(gt=0.0, lt=1.0)
    alpha: float = Field(gt=0.0, lt=0.5)
    inconclusive: Literal["pass", "fail"]
    reference_concurrency: int = 1
    findings: list[GateFinding] = Field(default_factory=list)


class SweepRecord(ProtocolRecord):
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


def read_sweep(path: Path | str) -> SweepRecord:
    """A sweep folder's record (or the file itself); BadRecord naming the file and
    what is wrong (exit 2) when it is missing or not a usable sweep record."""
    return read_protocol_record(in_folder(path, SWEEPS.file), SweepRecord, SWEEPS.what)
