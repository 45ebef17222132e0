"""Judge: the one home of every verdict. `decide` turns the evidence of a run (its
measurement against every floor, the sequential rule's decision on each floor when one
stopped the run, the draft-attention contract, and the paired gate's finding against a
reference build) into the verdict, its reasons and the exit code. Every path that
judges (`run` fixed or sequential, `--against`, nightly lines, and through the runner
`ab`, `bisect` and the pytest plugin) calls it; reports (`paired`, `trend`) read the
verdict it recorded and take their exit code from `report_exit` (a failure first, then
errors, else pass); `compare --fail-on-drop` and `ab --fail-on-drop` from `decide_drop`;
`forced --against` from `decide_split` (whose fault a speedup drop is: the system's
share, the draft's, each by its own tolerance).
Every exit code, and the one severity rule they share with the run's outcome, is decided
in `harness.run.exit_codes` (light, so the lightest commands decide through it too).

Floors (`judge`): the floors are data, `harness.metrics.floor_checks.floor_checks(floors)`,
one typed check per floor (its figure, its floor, its strictness, its definition); the
sequential rule settles the same list, so the two cannot disagree on which floors exist.

Every floor is checked and a failed floor of any kind stands: the accept-length check is
the point estimate against the floor, or, when a run stopped sequentially, the
sequential rule's decision; accuracy is judged on the same requests. Category floors
(`floors.categories`) judge each named category's own figure and accuracy, and position
floors (`floors.positions`) the rate at which each draft position is accepted, both as
point estimates. Each floor has its own strictness, as the gate it was taken from states
it (`floors.strict` for accept length, `accuracy_strict`, `positions_strict`, and a
category floor's own `strict`). A floor on a category the run did not measure is an error,
never a pass; a position floor beyond the positions of a present histogram is judged at
rate 0 (SGLang sizes each histogram by the largest accepted count, so a draft that never
reaches position k reports fewer than k positions: a broken draft fails); only a run
where no request carries a histogram cannot judge a position floor (an error). The accept length
is judged in the definition the suite's floors were taken in (`floors.metric`), and
the reasons name it. A partial run (it ended before its plan) is never a pass.

`harness soak` adds the drift gate (`Evidence.drift`, harness.metrics.drift): the trend of
accept length within the run against its tolerated fall, judged beside the floors.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.errors import ExitCode
from harness.metrics.drift import describe as describe_drift
from harness.metrics.drift import status_of as drift_status_of
from harness.metrics.floor_checks import ACCEPT_LENGTH, Figure, FloorCheck, Missing, floor_checks
from harness.metrics.measure import DISAGREEMENT_TOLERANCE
from harness.metrics.paired_gate import describe, status_of
from harness.metrics.speedup import GATE_DEFINITION, describe_paired_speedup
from harness.results.forced import Share
from harness.results.record import Measurement, Verdict, VerdictStatus
from harness.run.evidence import (
    DriftEvidence,
    PairedEvidence,
    SpeedupEvidence,
    SplitEvidence,
)
from harness.run.exit_codes import EXIT_CODES as EXIT_CODES
from harness.run.exit_codes import report_exit as report_exit
from harness.run.exit_codes import report_status
from harness.suite.model import Floors, Suite

if TYPE_CHECKING:
    from harness.metrics.definitions import RequestLike
    from harness.run.outcome import CallersRule, RunOptions
    from harness.run.sequential import FloorsRule


@dataclass
class Evidence:
    """Everything a verdict depends on. `settled`: each floor's decision when a
    sequential rule stopped the run (`run/sequential.FloorsRule.decisions`: "pass",
    "fail", or None for a floor still open when another floor or the gate settled
    the stop); a floor it does not name is judged on its point estimate (the fixed
    protocol, as at the last look). None: a fixed run."""

    measurement: Measurement | None
    floors: Floors
    settled: Mapping[str, str | None] | None = None
    contract: Sequence[str] = ()  # draft-attention differences from expected_layers
    contract_enforced: bool = True  # False: measured anyway, the verdict still fails
    paired: PairedEvidence | None = None
    # what reached the draft at run time (each clause: attention and window per layer,
    # taps, block size, mask token id, ...) that the audit for this build does not say
    # (harness.run.runtime_contract): the build measured is not the build audited
    runtime_contract: Sequence[str] = ()
    # figures the suite asks for that the run does not have ([speedup] whose target alone
    # failed or gave no ratio): an error, never a pass, whatever the floors say
    missing: Sequence[str] = ()
    # `harness soak`: the trend of accept length within the run (harness.metrics.drift)
    drift: DriftEvidence | None = None


# the first line of a verdict whose engine ran another draft contract than the audit's
RUNTIME_CONTRACT_DIFFERS = "the draft's runtime contract differs from the audit's for this build:"


@dataclass
class Judgement:
    verdict: Verdict
    exit_code: ExitCode
    floors_status: VerdictStatus
    paired: dict[str, object] | None = None  # the record's `paired` section
    notes: list[str] = field(default_factory=list)


def decide(evidence: Evidence) -> Judgement:
    """The verdict: the worst of the floors', the contract's and the paired gate's. An
    error (no or partial measurement, mixed definitions, an unjudgeable floor) stands
    over everything; a failed floor is a backstop the gate cannot lift; the gate's
    inconclusive finding is judged by its `inconclusive` setting."""
    if evidence.runtime_contract:  # an error that stands over every other finding
        judged = decide(dataclasses.replace(evidence, runtime_contract=()))
        verdict = Verdict(status="error", reasons=[
            RUNTIME_CONTRACT_DIFFERS, *evidence.runtime_contract, *judged.verdict.reasons])
        return Judgement(verdict, EXIT_CODES["error"], judged.floors_status, judged.paired)
    if evidence.missing:  # a figure the suite asks for is missing: never a pass
        judged = decide(dataclasses.replace(evidence, missing=()))
        status: VerdictStatus = "fail" if judged.verdict.status == "fail" else "error"
        verdict = Verdict(status=status, reasons=[*evidence.missing, *judged.verdict.reasons])
        return Judgement(verdict, EXIT_CODES[status], judged.floors_status, judged.paired)
    contract = list(evidence.contract)
    if contract and (evidence.contract_enforced or evidence.measurement is None):
        verdict = Verdict(status="fail", reasons=[
            "draft contract differs from the suite's expected_layers/expected_contract:",
            *contract])
        return Judgement(verdict, EXIT_CODES["fail"], "fail")
    settled = dict(evidence.settled) if evidence.settled is not None else None
    floors, only_open = _floors(evidence.measurement, evidence.floors, settled)
    status = floors.status
    reasons = list(floors.reasons)
    first: list[str] = []
    if contract:  # measured anyway (an A/B of a build known to break it): still a failure
        first.append("draft contract differs (not enforced), measured anyway: "
                     + "; ".join(contract))
        status = "error" if status == "error" else "fail"
    paired: dict[str, object] | None = None
    if evidence.paired is not None:
        found, gate = evidence.paired, evidence.paired.gate
        gate_status = status_of(found.result.decision, gate.inconclusive)
        against = found.against
        spec = against.get("spec") or "as installed"
        how = "reused" if against.get("reused") else "measured in this job"
        reasons = [f"floors: {floors.status.upper()}", *reasons,
                   f"relative gate {gate_status.upper()}: {describe(found.result, gate_status)}",
                   f"paired against run {against.get('run_id')} ({spec}, {how}): "
                   f"{against.get('path')}"]
        speedup_statuses, speedup_reasons, speedup_found = _speedup_gate(found.speedup,
                                                                         gate.inconclusive)
        reasons[-1:-1] = speedup_reasons  # after the accept-length gate, before the run named
        if status not in ("error", "fail"):
            status = report_status([gate_status, *speedup_statuses])  # type: ignore[list-item]
        floors_status = "open" if only_open else floors.status
        paired = {"against": dict(against), "gate": gate.model_dump(), "status": gate_status,
                  "floors_status": floors_status, "result": found.result.to_dict()}
        if speedup_found:
            paired["speedup"] = speedup_found
    if evidence.drift is not None:
        drift_status, drift_reason = _drift_gate(evidence.drift)
        reasons.append(drift_reason)
        status = report_status([status, drift_status])
    return Judgement(Verdict(status=status, reasons=[*first, *reasons]), EXIT_CODES[status],
                     floors.status, paired)


def _drift_gate(found: DriftEvidence) -> tuple[VerdictStatus, str]:
    """The drift gate's (status, reason): its decision judged by the soak's `inconclusive`
    setting; no test is an error, never a pass."""
    if found.result is None:
        return "error", (f"drift gate ERROR: no test: {found.reason}; a missing test is "
                         "never a pass")
    status = drift_status_of(found.result.decision, found.inconclusive)
    return status, f"drift gate {status.upper()}: {describe_drift(found.result, status)}"


def _speedup_gate(findings: Sequence[SpeedupEvidence], inconclusive: str
                  ) -> tuple[list[VerdictStatus], list[str], list[dict[str, object]]]:
    """The paired speedup gate's (statuses, reasons, recorded findings): each figure's
    decision judged as the accept-length gate's is (`status_of`, the `[gate]`'s
    `inconclusive`); a figure with no test is an error, never a pass."""
    statuses: list[VerdictStatus] = []
    reasons: list[str] = []
    recorded: list[dict[str, object]] = []
    for found in findings:
        if found.result is None:
            statuses.append("error")
            reasons.append(f"speedup gate ({found.figure}) ERROR: no test: {found.reason}; a "
                           "missing test is never a pass")
            recorded.append({"figure": found.figure, "status": "error",
                             "reason": found.reason or "no test",
                             "definition": GATE_DEFINITION})
            continue
        status = status_of(found.result.decision, inconclusive)
        statuses.append(status)  # type: ignore[arg-type]
        reasons.append(describe_paired_speedup(found.result, status))
        recorded.append({**found.result.to_dict(), "status": status,
                         "definition": GATE_DEFINITION})
    return statuses, reasons, recorded


@dataclass(frozen=True)
class DropEvidence:
    """One drop test of B against A (`harness compare`, `harness ab`, one per compared
    series): the one-sided p-value of B below A, NaN when no test could be made."""

    name: str
    p_drop: float
    alpha: float
    method: str = ""  # how the difference was taken (paired by question, ...)


@dataclass(frozen=True)
class DropJudgement:
    verdict: Verdict
    exit_code: ExitCode


def decide_drop(tests: Sequence[DropEvidence]) -> DropJudgement:
    """`--fail-on-drop`: "fail" when a B is significantly below its A (p_drop < alpha),
    else "error" when a test could not be made (no per-request data, too few questions:
    a missing test is never a pass), else "pass"; a failure first, as in `report_exit`."""
    statuses: list[VerdictStatus] = []
    reasons: list[str] = []
    for test in tests:
        how = f" ({test.method})" if test.method else ""
        if not math.isfinite(test.p_drop):
            statuses.append("error")
            reasons.append(f"{test.name}: no drop test could be made{how}; a missing test "
                           "is never a pass")
        elif test.p_drop < test.alpha:
            statuses.append("fail")
            reasons.append(f"{test.name}: B is significantly below A: one-sided p "
                           f"{test.p_drop:.4g} < alpha {test.alpha:g}{how}")
        else:
            statuses.append("pass")
            reasons.append(f"{test.name}: no significant drop: one-sided p {test.p_drop:.4g} "
                           f">= alpha {test.alpha:g}{how}")
    if not tests:
        statuses.append("error")
        reasons.append("no drop test: nothing was compared")
    status = report_status(statuses)
    return DropJudgement(Verdict(status=status, reasons=reasons), EXIT_CODES[status])


def judge(measurement: Measurement | None, floors: Floors,
          sequential: str | None = None,
          settled: Mapping[str, str | None] | None = None) -> Verdict:
    """The floors' verdict. `settled`: each floor's decision when a sequential rule
    stopped the run (see `Evidence`); `sequential`: the accept-length decision alone
    (the same as settled={"accept length": sequential})."""
    if sequential is not None and settled is None:
        settled = {ACCEPT_LENGTH: sequential}
    return _floors(measurement, floors, dict(settled) if settled is not None else None)[0]


def _floors(measurement: Measurement | None, floors: Floors,
            settled: dict[str, str | None] | None) -> tuple[Verdict, bool]:
    """(the floors' verdict, whether it is "fail" only because floors were left open).
    Every floor is a check of `floor_checks(floors)`, judged in that list's order."""
    if measurement is None:
        return Verdict(status="error", reasons=["no measurement: accept length is missing"]), False
    if measurement.partial:
        return Verdict(status="error", reasons=[
            f"partial run: {measurement.n_requests} of {measurement.n_planned} requests "
            "finished; a partial run is never judged"]), False
    if measurement.metric != floors.metric:
        return Verdict(status="error", reasons=[
            f"measured in metric {measurement.metric!r} but the floors use "
            f"{floors.metric!r}: definitions are never mixed"]), False
    readings = [(check, check.reading(measurement)) for check in floor_checks(floors)]
    # a floor on the whole run without its figure: nothing else is worth saying
    unmeasured = [found.reason for check, found in readings
                  if check.overall and isinstance(found, Missing)]
    if unmeasured:
        return Verdict(status="error", reasons=unmeasured), False
    after = f"after {measurement.n_requests} of {measurement.n_planned} requests"
    reasons: list[str] = []
    missing: list[str] = []
    failed = False
    for check, found in readings:
        if isinstance(found, Missing):
            if found.reason not in missing:  # one line per category or for all positions
                missing.append(found.reason)
            continue
        ok, reason = _judged(check, found, settled, after)
        failed = failed or not ok
        reasons.append(reason)
    if missing:
        return Verdict(status="error", reasons=[*missing, *reasons]), False
    still_open = open_floors(settled)
    only_open = bool(still_open) and not failed
    if only_open:  # never a pass on floors the rule did not settle
        failed = True
        reasons.append(f"not a pass: {', '.join(still_open)} still open when the run "
                       "stopped (an early stop passes only when every floor settled above)")
    reasons.extend(_cross_check_notes(measurement))
    return Verdict(status="fail" if failed else "pass", reasons=reasons), only_open


def _judged(check: FloorCheck, found: Figure, settled: Mapping[str, str | None] | None,
            after: str) -> tuple[bool, str]:
    """A floor's (ok, reason): the sequential rule's decision when it settled this floor
    at the stop (a floor left open is not failed here: `open_floors` says it), else its
    figure against the floor (`check.met`)."""
    the = "the" if check.overall else "its"
    if settled is not None and check.key in settled:
        decision = settled[check.key]
        return decision != "fail", (f"{found.shown}: {_settled_words(decision)} {the} floor "
                                    f"{check.floor:g} {after}")
    if check.met(found.value):
        return True, f"{found.shown} {check.relation} floor {check.floor:g}"
    return False, f"{found.shown} is below {the} floor: needs {check.relation} {check.floor:g}"


def open_floors(settled: Mapping[str, str | None] | None) -> list[str]:
    """The floors a sequential rule left open at its stop."""
    return [name for name, decision in (settled or {}).items() if decision is None]


def _settled_words(decision: str | None) -> str:
    return {"pass": "the sequential rule settles above",
            "fail": "the sequential rule settles below"}.get(
        str(decision), "still open (not judged on this prefix: the run stopped on another "
                       "floor's or the gate's failure) against")


def _cross_check_notes(measurement: Measurement) -> list[str]:
    reported = measurement.server_reported_accept_length
    disagreement = measurement.server_disagreement
    if reported is None:
        return ["note: the server reported no avg_spec_accept_length (cross-check skipped)"]
    if disagreement is not None and abs(disagreement) > DISAGREEMENT_TOLERANCE:
        return [f"note: the server's avg_spec_accept_length {reported:.4f} differs from the "
                f"exact server_avg figure by {disagreement:+.1%} (SGLang folds its figure in "
                "every --decode-log-interval iterations; the exact figure is judged)"]
    return []


def judge_entry(suite: Suite, options: RunOptions, measurement: Measurement | None,
                rows: Sequence[RequestLike], stop_rule: CallersRule | FloorsRule | None = None,
                contract: Sequence[str] = (), prompts_sha256: str | None = None,
                runtime_contract: Sequence[str] = ()) -> Judgement:
    """The evidence of one measured entry of a run (`options`: its RunOptions), judged by
    `decide`: its
    floors (each as the sequential rule settled it, when the run's own rule stopped
    it; left open when a caller's rule stopped it early), the contract, and the paired
    gate's finding on the same rows, and what reached the draft at run time."""
    own_rule = options.sequential and options.stop_rule is None
    settled = dict(getattr(stop_rule, "decisions", None) or {}) if own_rule else None
    if options.stop_rule is not None and measurement is not None \
            and measurement.stopped_early:
        # a caller's rule (bisect) chose the prefix: no floor is judged on it, none passes
        settled = dict.fromkeys(check.key for check in floor_checks(suite.floors))
    evidence = Evidence(measurement, suite.floors, settled, list(contract),
                        options.enforce_contract, runtime_contract=list(runtime_contract),
                        missing=speedup_missing(suite, measurement))
    if options.pairing is not None and judge(measurement, suite.floors,
                                             settled=settled).status != "error":
        evidence.paired = options.pairing.evidence(
            suite, rows, prompts_sha256, measurement.speedup if measurement else None)
    return decide(evidence)


def speedup_missing(suite: Suite, measurement: Measurement | None) -> list[str]:
    """A suite with [speedup] whose run has no speedup figure: why (the target alone
    failed, or no question paired), one reason; [] otherwise. A run with no measurement
    at all is judged an error without it."""
    if getattr(suite, "speedup", None) is None or measurement is None:
        return []
    found = measurement.speedup
    if found is not None and found.tpot is not None and found.throughput is not None:
        return []
    why = found.note if found is not None and found.note else "no target-alone run measured"
    return [f"[speedup] declared but a speedup figure is missing: {why}; a missing figure "
            "is never a pass"]


SYSTEM: Share = "system"
DRAFT: Share = "draft"


@dataclass(frozen=True)
class SplitJudgement:
    """`decide_split`'s verdict: each share's status and each finding's, and the shares
    that failed (`blamed`: "system", "draft", both or none)."""

    verdict: Verdict
    exit_code: ExitCode
    system_status: VerdictStatus
    draft_status: VerdictStatus
    system_statuses: list[VerdictStatus]  # one per evidence.system, in its order
    blamed: list[Share]


def decide_split(evidence: SplitEvidence) -> SplitJudgement:
    """Whose fault a speedup drop is: the system's share fails when B's speedup at any
    forced accept length is shown below A's beyond its tolerance, the draft's when B's
    real accept length is; each finding judged as the paired gate's is (`status_of`, the
    `inconclusive` setting); a missing test is an error, never a pass. The verdict is
    the worse of the two (a failure first), and its first reason names the share."""
    system_statuses: list[VerdictStatus] = []
    system_reasons: list[str] = []
    for found in evidence.system:
        statuses, reasons, _ = _speedup_gate([found.speedup], evidence.inconclusive)
        system_statuses += statuses
        system_reasons += [f"{SYSTEM} at forced accept length {found.forced:g}: {reason}"
                           for reason in reasons]
    if not evidence.system:
        system_statuses.append("error")
        system_reasons.append(f"{SYSTEM}: no forced accept length measured on both builds: "
                              "no test, never a pass")
    system_status = report_status(system_statuses)
    if evidence.draft is None:
        draft_status: VerdictStatus = "error"
        draft_reason = (f"{DRAFT} ERROR: no test of the real accept length: "
                        f"{evidence.draft_reason or 'none made'}; a missing test is never a "
                        "pass")
    else:
        draft_status = status_of(evidence.draft.decision,  # type: ignore[assignment]
                                 evidence.inconclusive)
        draft_reason = (f"{DRAFT} {draft_status.upper()}: real accept length "
                        f"{describe(evidence.draft, draft_status)}")
    blamed = [name for name, status in ((SYSTEM, system_status), (DRAFT, draft_status))
              if status == "fail"]
    status = report_status([system_status, draft_status])
    if blamed:
        head = f"whose fault: the {' and the '.join(blamed)} lost the speedup"
    elif status == "error":
        head = "whose fault: not decided (a share has no test)"
    else:
        head = "whose fault: neither; the system and the draft are within their tolerances"
    reasons = [head, f"{SYSTEM} {system_status.upper()} (speed at equal forced acceptance)",
               *system_reasons, draft_reason]
    return SplitJudgement(Verdict(status=status, reasons=reasons), EXIT_CODES[status],
                          system_status, draft_status, system_statuses, blamed)
