"""The paired gate's finding on B's rows, as the judge reads it (`harness.run.judge.decide`)
and the pairing makes it (`harness.protocols.pairing.PairedJudge.evidence`); apart from both, so
the run's options (`harness.run.outcome.Pairing`) can name it without an import circle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.metrics.drift import DriftResult
from harness.metrics.paired_gate import PairedResult
from harness.metrics.speedup import PairedSpeedupResult
from harness.suite.gate import Gate


@dataclass(frozen=True)
class SpeedupEvidence:
    """The paired speedup gate on one figure (`[speedup] max_drop`): its test, or why no
    test could be made (`result` None, `reason` says why: never a pass)."""

    figure: str  # speedup_tpot or speedup_throughput
    result: PairedSpeedupResult | None
    reason: str | None = None


@dataclass
class PairedEvidence:
    """The paired gate's finding on B's rows (`harness.protocols.pairing.PairedJudge.evidence`)."""

    result: PairedResult
    gate: Gate  # its `inconclusive` setting, its tolerance
    against: dict[str, object]  # run_id, path, spec, reused of the reference run
    speedup: Sequence[SpeedupEvidence] = ()  # `[speedup] max_drop`: one per gated figure


@dataclass(frozen=True)
class DriftEvidence:
    """`harness soak`'s drift gate (harness.metrics.drift): its test, or why none could be
    made (`result` None, `reason` says why: never a pass)."""

    result: DriftResult | None
    inconclusive: str  # how an inconclusive finding is judged
    reason: str | None = None


@dataclass(frozen=True)
class SystemEvidence:
    """The system's share of a speedup drop at one forced accept length: B's speedup over
    its target alone against A's, both forced there (`harness forced --against`)."""

    forced: float
    speedup: SpeedupEvidence


@dataclass
class SplitEvidence:
    """Whose fault a speedup drop of B against A is (`harness.protocols.forced_split`):
    the system's findings at equal forced acceptance, and the draft path's, the paired
    test of the real runs' accept length (`draft` None: `draft_reason` says why)."""

    system: Sequence[SystemEvidence]
    draft: PairedResult | None
    draft_reason: str | None
    inconclusive: str  # how a finding that is neither is judged ([forced] inconclusive)
