"""What a run is asked to do and what it ends in: the run's options (`harness run`'s flags,
a caller's stop rule or paired judge) and its outcome, one per workload entry, combined
into the suite's (the worst entry's status)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.errors import ExitCode
from harness.files import default_results_dir
from harness.results.record import RequestRow, RunRecord, Speedup, VerdictStatus
from harness.run.exit_codes import worst_status

if TYPE_CHECKING:
    from harness.metrics.definitions import RequestLike
    from harness.run.evidence import PairedEvidence
    from harness.run.schedulers.slurm import SlurmOptions
    from harness.suite.model import Suite


class CallersRule(Protocol):
    """A caller's sequential rule (the driver's StopRule, harness.run.drive, with the
    settings the record keeps in `measurement.sequential`)."""

    def looks(self, max_n: int) -> list[int]: ...

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None: ...

    def settings(self) -> dict[str, object]: ...


class Pairing(Protocol):
    """`harness run --against`'s judge (harness.protocols.pairing.PairedJudge, which imports
    the runner, hence the protocol here): its stop rule and its finding on B's rows."""

    def stop_rule(self, suite: Suite, max_n: int) -> CallersRule: ...

    def evidence(self, suite: Suite, rows: Sequence[RequestLike],
                 prompts_sha256: str | None = None,
                 speedup: Speedup | None = None) -> PairedEvidence: ...


@dataclass
class RunOptions:
    results_dir: Path = field(default_factory=default_results_dir)
    sglang: str | None = None  # build spec (harness.builds grammar)
    patch: Path | None = None
    dry_run: bool = False
    gpu_devices: Sequence[int] | None = None  # devices this run may use (pytest plugin leases)
    engine_python: str | None = None
    label: str | None = None
    plot: bool = True
    sequential: bool = False
    progress: bool = True
    enforce_contract: bool = True  # False: record contract differences, measure anyway
    target_model: str | None = None  # overrides of the suite's models
    draft_model: str | None = None
    entries: Sequence[str] | None = None  # workload entries to run ("main": [workload])
    # A caller's sequential rule instead of the suite's floor rule (harness.run.drive.StopRule
    # with a `settings() -> dict`), e.g. bisect's paired comparison with a reference build:
    # its decision and settings go to measurement.sequential; the floors are judged as usual.
    stop_rule: CallersRule | None = None
    # `harness run --against`: the paired gate's judge (harness.protocols.pairing.PairedJudge);
    # each entry is also judged against the reference build's run, paired by question.
    pairing: Pairing | None = None
    # `harness run --server URL`: measure a deployment someone else started (no launch, no
    # kill; harness.run.attach); `launcher`: who starts the suite's topology (None: this
    # host's processes; "slurm": a Slurm job, harness.run.schedulers.slurm)
    server: str | None = None
    launcher: str | None = None
    launcher_options: SlurmOptions | None = None
    # `harness soak`: the measured phase repeats the workload's prompts for this many seconds
    # (`harness.run.drive.Driver.measure_for`, no stop rule); None: each prompt once
    soak_s: float | None = None
    # `harness run --prepare-only`: the engine's environment and models made, then stop
    prepare_only: bool = False
    # [speedup]: the run folder whose target alone this run reuses where that run sent the
    # same workload and its target alone answered exactly the questions this run answered
    # (a forced ladder's points share their real run's, harness.protocols.forced);
    # otherwise the target alone is launched as usual
    target_alone_from: Path | None = None


@dataclass
class RunOutcome:
    status: VerdictStatus
    exit_code: ExitCode
    reasons: list[str]
    run_dir: Path | None = None
    record: RunRecord | None = None
    plan: list[str] = field(default_factory=list)
    entries: list[RunOutcome] = field(default_factory=list)  # one per workload entry run


def combined(outcomes: list[RunOutcome]) -> RunOutcome:
    """The suite's outcome: the worst entry's status (`exit_codes.worst_status`: a failure
    first, then an error) with its exit code; run_dir and record of the first (the main
    workload); with several entries each reason names its series."""
    if len(outcomes) == 1:
        return outcomes[0]
    status = worst_status([outcome.status for outcome in outcomes])
    worst = next(outcome for outcome in outcomes if outcome.status == status)
    reasons = []
    for outcome in outcomes:
        series = outcome.record.suite.name if outcome.record else "?"
        reasons += [f"{series}: {outcome.status.upper()}"]
        reasons += [f"{series}: {reason}" for reason in outcome.reasons]
        if outcome is not outcomes[0] and outcome.run_dir is not None:
            reasons.append(f"{series}: record {outcome.run_dir}")
    return RunOutcome(worst.status, worst.exit_code, reasons, outcomes[0].run_dir,
                      outcomes[0].record, entries=outcomes)
