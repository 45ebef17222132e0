"""A workload grid's record (`harness grid`, docs/speed.md "Workload grid"): per cell its
coordinates (the tier stated as the prefix it is, the category, prefix caching, the
concurrency), the run that measured it, its accept length with the definition's name and
its CI, its speedups over the target alone with their definitions and CIs, and the gate's
finding against the cell's reference cell; the launches (which cells shared a server, the
flags each added). The figures are copied from each cell's run record, read through the
door (`harness.results.readers`), so the grid's plot reads one file. Kept as every
protocol's record is (`harness.results.protocol_record`): `grid.json` and its plot
`grid.png` in `results/grids/<suite>/<UTC time>-<grid id>/`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field

from harness.results.protocol_record import ProtocolModel, ProtocolRecord, RecordFiles
from harness.results.readers import in_folder, read_protocol_record
from harness.results.record import VerdictStatus

GRIDS = RecordFiles(folder="grids", file="grid.json", plot="grid.png", what="grid")
GRID_FILE, GRID_PNG = GRIDS.file, GRIDS.plot
Metric = Literal["server_avg", "per_request", "per_request_mean", "spec_accept_length_mean"]


class GridTierInfo(ProtocolModel):
    name: str = Field(min_length=1)
    shots: int = Field(ge=0)
    label: str  # what the tier is, as the plot states it


class GridCellRecord(ProtocolModel):
    """One cell as measured; a figure is None where its run has none (never a zero)."""

    name: str = Field(min_length=1)
    tier: str = Field(min_length=1)
    category: str = Field(min_length=1)
    prefix_caching: Literal["on", "off"] | None = None  # None: the engine's default
    concurrency: int = Field(ge=1)
    launch: int = Field(ge=0)  # index into GridRecord.launches
    series: str = Field(min_length=1)
    run_id: str | None = None
    run_dir: str | None = None  # relative to the results folder
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    accept_length: float | None = Field(default=None, ge=1.0)  # in GridRecord.metric
    accept_length_ci: tuple[float, float] | None = None
    n_prompts: int | None = Field(default=None, ge=0)
    speedup_tpot: float | None = Field(default=None, gt=0.0)
    speedup_tpot_ci: tuple[float, float] | None = None
    speedup_throughput: float | None = Field(default=None, gt=0.0)
    speedup_throughput_ci: tuple[float, float] | None = None
    reference: str | None = None  # the cell it is gated against; None: it is one


class GridFinding(ProtocolModel):
    """The gate at one cell, as the judge decided it (`harness.run.judge.decide` on the
    paired evidence): `result` is `PairedResult.to_dict()`, absent when no test was made."""

    cell: str = Field(min_length=1)
    reference: str = Field(min_length=1)
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)
    result: dict[str, object] | None = None
    # the per-cell speedup gate (`[grid] speedup_max_drop`): one finding per figure
    # (speedup_tpot, speedup_throughput) as the judge recorded it, each with its status
    # and `PairedSpeedupResult.to_dict()`, or its reason where no test was made
    speedup: list[dict[str, object]] = Field(default_factory=list)


class GridGate(ProtocolModel):
    """Each cell's accept length within `max_drop` (a share) of its reference cell's,
    paired by prompt, one-sided at `alpha`; the reference cell of each category; with
    `speedup_max_drop`, each speedup over the target alone too (its test's definition in
    `speedup_definition`, `harness.metrics.speedup.GATE_DEFINITION`)."""

    reference: dict[str, str | int | None]
    max_drop: float = Field(gt=0.0, lt=1.0)
    speedup_max_drop: float | None = Field(default=None, gt=0.0, lt=1.0)
    speedup_definition: str | None = None
    alpha: float = Field(gt=0.0, lt=0.5)
    inconclusive: Literal["pass", "fail"]
    findings: list[GridFinding] = Field(default_factory=list)


class GridLaunch(ProtocolModel):
    """One server: the cells it measured, the flags the grid added to its launch line."""

    prefix_caching: Literal["on", "off"] | None = None
    flags: list[str] = Field(default_factory=list)
    cells: list[str] = Field(default_factory=list)
    status: VerdictStatus


class GridRecord(ProtocolRecord):
    grid_id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    engine: str
    started_at: datetime
    finished_at: datetime | None = None
    label: str | None = None
    metric: Metric  # the accept-length definition of every cell's figure
    definition: str  # its text (harness.suite.entries.METRIC_DEFINITIONS)
    speedup_definitions: dict[str, str] = Field(default_factory=dict)
    tiers: list[GridTierInfo]
    categories: list[str]
    prefix_caching: list[Literal["on", "off"]] = Field(default_factory=list)
    concurrency: list[int]
    questions: int = Field(ge=1)
    launches: list[GridLaunch]
    cells: list[GridCellRecord]
    gate: GridGate | None = None
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


def read_grid(path: Path | str) -> GridRecord:
    """A grid folder's record (or the file); BadRecord naming the file (exit 2)."""
    return read_protocol_record(in_folder(path, GRIDS.file), GridRecord, GRIDS.what)
