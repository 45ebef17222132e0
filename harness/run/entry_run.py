"""One workload entry's run as it goes: what it has learnt so far (stage, build, launch,
attention, rows, measurement), and its record, written to run.json exactly once whatever
happened (`EntryRun.finish`; `failed` for an error, keeping the rows that finished)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError, error_text, interruption_text
from harness.metrics.measure import summarise
from harness.results.layout import RUN_FILE
from harness.results.record import (
    BuildInfo,
    ClauseRow,
    LaunchInfo,
    LayerRow,
    Measurement,
    PairedFinding,
    Provenance,
    RequestRow,
    RunRecord,
    RuntimeLayerRow,
    SuiteInfo,
    TargetAloneInfo,
    Verdict,
    WorkloadInfo,
    utc_now,
)
from harness.results.writer import write_run
from harness.run import recorded, runtime_attention, runtime_contract
from harness.run.exit_codes import EXIT_CODES
from harness.run.judge import RUNTIME_CONTRACT_DIFFERS
from harness.run.outcome import RunOptions, RunOutcome
from harness.secrets import redact_text
from harness.suite.model import LoadedSuite
from harness.workloads import WorkloadPlan

if TYPE_CHECKING:
    from harness.run.outcome import CallersRule
    from harness.run.sequential import FloorsRule


def unexpected_text(error: BaseException) -> str:
    """An error the harness did not expect (a defect, a library missing), named by its
    type: "unexpected ModuleNotFoundError: No module named 'scipy'"."""
    return f"unexpected {type(error).__name__}: {error_text(error)}"


@dataclass
class EntryRun:
    """What a run has learnt so far; `finish` writes run.json once, whatever happened."""

    loaded: LoadedSuite  # the suite as this entry runs it
    options: RunOptions
    run_dir: Path
    run_id: str
    started: datetime
    entry: str | None = None
    stage: str = "preparation"
    planned: int | None = None  # requests the workload plans
    workload: WorkloadInfo | None = None  # once the prompts are built
    build: BuildInfo | None = None
    provenance: Provenance | None = None
    launch: LaunchInfo | None = None
    attention: list[LayerRow] | None = None
    attention_runtime: list[RuntimeLayerRow] | None = None  # harness.run.runtime_attention
    runtime_record: Path | None = None  # the file the kernel records its calls in
    draft_contract: dict[str, ClauseRow] | None = None  # the audit's clauses, pre-launch
    draft_contract_runtime: dict[str, ClauseRow] | None = None  # what reached the model
    contract_record: Path | None = None  # the file the stand-ins record the clauses in
    measurement: Measurement | None = None
    rows: list[RequestRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    record: RunRecord | None = None  # once written, run.json is never rewritten
    paired: dict[str, object] | None = None  # the paired gate's finding (RunOptions.pairing)
    # the stop rule the measurement ran under, if any
    stop_rule: CallersRule | FloorsRule | None = None
    # the workload's prompts (workloads.prepare), loaded before any build
    data: WorkloadPlan | None = None
    contract: list[str] = field(default_factory=list)  # attention contract differences
    # what reached the draft at run time that the audit does not say (runtime_contract)
    runtime_differences: list[str] = field(default_factory=list)
    # [speedup]: the target alone's rows (target-alone.jsonl) and summary (harness.run.baseline)
    target_alone_rows: list[RequestRow] = field(default_factory=list)
    target_alone: TargetAloneInfo | None = None

    def finish(self, verdict: Verdict) -> RunRecord:
        loaded = self.loaded
        verdict.reasons.extend(self.notes)
        # error texts may quote a secret
        verdict.reasons[:] = [redact_text(reason) for reason in verdict.reasons]
        record = RunRecord(
            run_id=self.run_id, started_at=self.started, finished_at=utc_now(),
            label=self.options.label,
            suite=SuiteInfo(name=loaded.suite.name, path=str(loaded.path), sha256=loaded.sha256,
                            document=recorded.redacted_document(loaded), entry=self.entry),
            build=self.build or BuildInfo(engine=loaded.suite.engine.kind,
                                          spec=redact_text(self.options.sglang or "") or None),
            provenance=self.provenance or recorded.provenance(loaded, None, [], None, None),
            launch=self.launch, attention=self.attention,
            attention_runtime=self.attention_runtime, draft_contract=self.draft_contract,
            draft_contract_runtime=self.draft_contract_runtime, workload=self.workload,
            measurement=self.measurement, verdict=verdict, stage=self.stage,
            paired=PairedFinding.model_validate(self.paired) if self.paired is not None else None,
            target_alone=self.target_alone,
        )
        # kept before the write: a Ctrl-C during or after it keeps this verdict, never "error"
        self.record = record
        write_run(self.run_dir, record)
        return record

    def ensure_written(self) -> None:
        """Redo the write of a finished record that a signal cut short."""
        if self.record is not None and not (self.run_dir / RUN_FILE).is_file():
            write_run(self.run_dir, self.record)

    def outcome(self) -> RunOutcome:
        record = self.record
        assert record is not None and record.verdict is not None
        return RunOutcome(record.verdict.status, EXIT_CODES[record.verdict.status],
                          record.verdict.reasons, self.run_dir, record)

    def failed(self, error: BaseException) -> RunRecord:
        if isinstance(error, HarnessError):
            message = error.message
        elif isinstance(error, KeyboardInterrupt):
            message = interruption_text(error)
        else:
            message = unexpected_text(error)
        self._partial_measurement()
        reached = self._what_reached_the_model()
        header = [RUNTIME_CONTRACT_DIFFERS] if reached else []
        return self.finish(Verdict(status="error",
                                   reasons=[*header, *reached, f"{self.stage}: {message}"]))

    def _what_reached_the_model(self) -> list[str]:
        """A run that ends in an error (an engine that dies in its warm-up) still compares
        what its engine recorded reaching the draft before it ended with the audit: a defect
        that crashes the engine (a forward-time block width) is named by its clause, beside
        the crash. Only what was recorded is compared: an engine that died before recording
        anything adds nothing, and an unreadable record never hides the error itself."""
        found: list[str] = []
        contract = self.contract_record
        if contract is not None and self.draft_contract and \
                self.draft_contract_runtime is None:
            with contextlib.suppress(HarnessError):
                if recorded_lines := runtime_contract.read_runtime(contract):
                    self.draft_contract_runtime = runtime_contract.rows(recorded_lines)
                    found += runtime_contract.differences(self.draft_contract,
                                                          recorded_lines, unrecorded=False)
        kernel = self.runtime_record
        if kernel is not None and self.attention and self.attention_runtime is None:
            with contextlib.suppress(HarnessError):
                if calls := runtime_attention.read_runtime(kernel):
                    self.attention_runtime = calls
                    found += runtime_attention.differences(self.attention, calls,
                                                           uncalled=False)
        return found

    def _partial_measurement(self) -> None:
        """The requests that finished before the run ended: kept, never a pass."""
        if self.measurement is not None or not self.rows:
            return
        suite = self.loaded.suite
        with contextlib.suppress(HarnessError, ValueError):
            self.measurement = summarise(
                sorted(self.rows, key=lambda r: r.index), suite.floors.metric, 0.0, None,
                suite.workload.seed, planned=self.planned, partial=True)
