"""A forced-acceptance ladder's record (`harness forced`, docs/speed.md "Forced
acceptance"): per point the forced accept length, the one achieved, the speedups over the
target alone with their CIs, and the run that holds the point's rows; the real run (no
knob) marked; the break-even accept length where speculation starts to pay. Kept as every
protocol's record is (`harness.results.protocol_record`): `forced.json` and its plot
`forced.png` in `results/forced/<suite>/<UTC time>-<id>/`; read back through the door
(`harness.results.readers.read_forced`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.results.checks import MAX_BLOCK
from harness.results.possible import MAX_REASONS, SPEEDUP_TOP
from harness.results.protocol_record import ProtocolModel, ProtocolRecord, RecordFiles
from harness.results.record import VerdictStatus

FORCED = RecordFiles(folder="forced", file="forced.json", plot="forced.png", what="forced")
FORCED_FILE, FORCED_PNG = FORCED.file, FORCED.plot
MAX_POINTS = 64  # as the ladder's own bound (harness.protocols.forced.MAX_POINTS)


# A speedup is > 0 and below any two servers' (harness.results.possible.SPEEDUP_TOP).
SpeedupFigure = Annotated[float, Field(gt=0.0, le=SPEEDUP_TOP, allow_inf_nan=False)]
# A CI's bound may reach 0: the bootstrap resamples questions, and a question whose target
# alone sent every token after the first in one chunk has a TPOT ratio of 0.
SpeedupBound = Annotated[float, Field(ge=0.0, le=SPEEDUP_TOP, allow_inf_nan=False)]
Interval = tuple[SpeedupBound, SpeedupBound]


class ForcedPoint(ProtocolModel):
    """One launch: `forced` None is the real run (the knob off)."""

    forced: float | None = Field(default=None, ge=1.0)
    achieved: float | None = Field(default=None, ge=1.0)  # accept length in `metric`
    speedup_tpot: SpeedupFigure | None = None
    speedup_tpot_ci: Interval | None = None
    speedup_throughput: SpeedupFigure | None = None
    speedup_throughput_ci: Interval | None = None
    tpot_s: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)  # speculation's
    output_tokens_per_s: float | None = Field(default=None, ge=0.0,  # mean TPOT, tokens/s
                                              allow_inf_nan=False)  # (measurement.speedup)
    series: str = Field(min_length=1)
    run_id: str | None = None
    run_dir: str | None = None  # relative to the results folder
    settings: dict[str, str | float] = Field(default_factory=dict)  # the knob as set
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list)


class BreakEven(ProtocolModel):
    """Where the system's speedup crosses 1.0 against achieved accept length: linear
    interpolation between the two forced points around the first crossing; None: none in
    the ladder's range."""

    figure: str
    accept_length: float | None = None
    note: str


Share = Literal["system", "draft"]


class SystemFinding(ProtocolModel):
    """The system's share at one forced accept length: B's speedup over its target alone
    against A's, both forced to `forced`, paired by question (harness.metrics.speedup.
    paired_speedup, its GATE_DEFINITION). No test (`decision` None): `reason` says why,
    never a pass."""

    forced: float = Field(ge=1.0)
    figure: str  # speedup_tpot or speedup_throughput
    status: VerdictStatus
    decision: Literal["not_worse", "worse", "inconclusive"] | None = None
    n: int | None = Field(default=None, ge=0)  # questions both builds paired
    a: float | None = None  # A's speedup on them
    b: float | None = None  # B's
    ratio: float | None = None  # b / a
    ratio_ci: tuple[float, float] | None = None  # two-sided, at `level`
    level: float | None = None
    alpha: float | None = None  # this test's one-sided level (the side's alpha / tests)
    reason: str | None = None


class DraftFinding(ProtocolModel):
    """The draft path's share: B's real (knob off) accept length against A's, paired by
    question (harness.metrics.paired_gate.paired_test, the paired gate's test). No test
    (`decision` None): `reason` says why, never a pass."""

    status: VerdictStatus
    decision: Literal["not_worse", "worse", "inconclusive"] | None = None
    n: int | None = Field(default=None, ge=0)
    a: float | None = None  # A's real accept length on the paired questions
    b: float | None = None
    difference: float | None = None  # b - a
    difference_ci: tuple[float, float] | None = None  # two-sided, at `level`
    relative_change: float | None = None
    tolerated_drop: float | None = None  # accept-length units at A's figure
    level: float | None = None
    alpha: float | None = None
    reason: str | None = None


class ForcedSplit(ProtocolModel):
    """Whose fault a speedup drop of B against A is: the system's (speedup at equal forced
    acceptance) and the draft path's (real accept length), each judged by its own
    tolerance ([forced] in the suite); `blamed` names the shares that failed."""

    against_spec: str | None = None  # A's build
    against_forced_id: str = Field(min_length=1)  # A's ladder
    against_dir: str | None = None  # A's ladder folder, relative to the results folder
    system_max_drop: float = Field(gt=0.0, lt=1.0)
    draft_tolerance: str  # harness.metrics.paired_gate.Tolerance.describe()
    alpha: float = Field(gt=0.0, lt=0.5)
    inconclusive: Literal["fail", "pass"]
    system_status: VerdictStatus
    draft_status: VerdictStatus
    status: VerdictStatus
    blamed: list[Share] = Field(default_factory=list)
    system: list[SystemFinding] = Field(default_factory=list)
    draft: DraftFinding
    real_speedup_tpot: tuple[float | None, float | None] = (None, None)  # A's, B's real runs
    reasons: list[str] = Field(default_factory=list)


class ForcedRecord(ProtocolRecord):
    forced_id: str = Field(min_length=1)
    suite: str = Field(min_length=1)
    engine: str
    knob: str  # the variable or key forced, and where the engine reads it
    block_size: int = Field(ge=1, le=MAX_BLOCK)
    started_at: datetime
    finished_at: datetime | None = None
    label: str | None = None
    metric: str  # the accept-length definition of `achieved`
    definitions: dict[str, str]
    points: list[ForcedPoint] = Field(max_length=2 * MAX_POINTS + 1)
    break_even: list[BreakEven] = Field(default_factory=list)
    split: ForcedSplit | None = None  # `--against`: whose fault a speedup drop is
    status: VerdictStatus
    reasons: list[str] = Field(default_factory=list, max_length=MAX_REASONS)

    @model_validator(mode="after")
    def _within_the_block(self) -> ForcedRecord:
        """A verify step commits at most the block: no forced or achieved accept length
        above it; each CI holds its figure."""
        for index, point in enumerate(self.points):
            for name in ("forced", "achieved"):
                value = getattr(point, name)
                if value is not None and value > self.block_size + 1e-9:
                    raise ValueError(f"points[{index}].{name}: {value:g} is above the block "
                                     f"size {self.block_size}")
            for name in ("speedup_tpot", "speedup_throughput"):
                value, ci = getattr(point, name), getattr(point, f"{name}_ci")
                if ci is not None and (value is None or not ci[0] <= value <= ci[1]):
                    raise ValueError(f"points[{index}].{name}_ci: {ci} does not hold "
                                     f"{name} {value}")
        return self
