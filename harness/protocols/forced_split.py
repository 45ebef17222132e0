"""`harness forced SUITE --build B --against A`: whose fault a speedup drop of B against its
reference build A is (issue 52, docs/speed.md "Whose fault").

A's ladder is measured first (its real run, then each forced point, `real` forcing A's
achieved accept length), then B's at the same forced accept lengths (A's values, A's
real one among them) after B's own real run. The drop is split in two, each share tested
on its own and gated by its own tolerance (`[forced]`, harness.suite.forced):

- the system's: at each forced accept length, B's speedup over its target alone against
  A's, paired by question (`metrics.speedup.paired_speedup`, the paired speedup gate's
  test) for both speedup figures; the tests share the side's alpha (Bonferroni);
- the draft path's: B's real accept length against A's, paired by question
  (`metrics.paired_gate.paired_test`, the paired gate's test on the real runs' rows).

The verdict comes from the one judge (`run.judge.decide_split`) and names the share that
failed; B's ladder record keeps the split (`ForcedRecord.split`), A's its own ladder.
Every figure is read back from the point's run record through the door
(`results.readers`), never from memory.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.builds import parse_build_spec
from harness.errors import BadInput, EngineError, ExitCode
from harness.metrics.paired_gate import PairedResult, Tolerance, paired_test
from harness.metrics.speedup import GATED, paired_speedup
from harness.protocols.forced import ForcedOutcome, Ladder, check_knob, run_forced
from harness.protocols.pairing import aligned, reference_from
from harness.results.forced import (
    DraftFinding,
    ForcedPoint,
    ForcedRecord,
    ForcedSplit,
    SystemFinding,
)
from harness.results.readers import BadRecord, read_requests, read_run
from harness.results.record import Speedup
from harness.run.evidence import SpeedupEvidence, SplitEvidence, SystemEvidence
from harness.run.judge import SplitJudgement, decide_split
from harness.run.outcome import RunOptions
from harness.suite.forced import ForcedSetting
from harness.suite.model import LoadedSuite, Suite

AGAINST_LABEL = "against"


@dataclass
class SplitOutcome:
    against: ForcedOutcome  # A's ladder
    found: ForcedOutcome  # B's, its record holding the split

    @property
    def exit_code(self) -> ExitCode:
        return self.found.exit_code


def setting_of(suite: Suite) -> ForcedSetting:
    """The suite's `[forced]` tolerances; BadInput naming the table when it has none."""
    if suite.forced is None:
        raise BadInput(f"suite {suite.name}: [forced] is missing: `--against` gates the "
                       "system's share (system_max_drop) and the draft's "
                       "(draft_relative_drop or draft_absolute_drop) each by its own "
                       "tolerance, declared in the suite (docs/speed.md, \"Whose fault\")")
    return suite.forced


def check_split(loaded: LoadedSuite, build: str | None, against: str) -> ForcedSetting:
    """Everything `--against` needs, before anything runs (BadInput naming the field)."""
    suite = loaded.suite
    parse_build_spec(against, None, engine=suite.engine.kind, flag="--against")
    check_knob(suite, against, flag="--against")
    check_knob(suite, build)
    return setting_of(suite)


def draft_tolerance(setting: ForcedSetting, metric: str) -> Tolerance:
    relative = setting.draft_relative_drop is not None
    drop = setting.draft_relative_drop if relative else setting.draft_absolute_drop
    assert drop is not None  # ForcedSetting holds exactly one
    return Tolerance(float(drop), relative, metric)


def run_split(loaded: LoadedSuite, ladder: Ladder, options: RunOptions, against: str,
              questions: int | None = None) -> SplitOutcome:
    """A's ladder, then B's at A's forced accept lengths, then the split."""
    setting = check_split(loaded, options.sglang, against)
    options_a = dataclasses.replace(options, sglang=against, label=AGAINST_LABEL)
    found_a = run_forced(loaded, ladder, options_a, questions)
    values = tuple(sorted(p.forced for p in found_a.record.points if p.forced is not None))
    if not values:
        raise EngineError(f"the reference build {against}: no forced point was measured")
    metric = found_a.record.metric
    seed = loaded.suite.workload.seed

    def split(points: list[ForcedPoint]) -> ForcedSplit:
        evidence = split_evidence(found_a.record, points, options.results_dir, setting,
                                  metric, seed)
        folder = None if found_a.folder is None \
            else os.path.relpath(found_a.folder, options.results_dir)
        return split_record(evidence, decide_split(evidence), setting, metric,
                            found_a.record, points, against, folder)

    found_b = run_forced(loaded, Ladder(values, real=False), options, questions, split)
    return SplitOutcome(found_a, found_b)


def split_evidence(a: ForcedRecord, b: Sequence[ForcedPoint], results: Path,
                   setting: ForcedSetting, metric: str, seed: int = 0) -> SplitEvidence:
    """The split's tests from the two ladders' points, each point's figures read from
    its run record through the door."""
    ours = {p.forced: p for p in b if p.forced is not None}
    common = [(p, ours[p.forced]) for p in a.points
              if p.forced is not None and p.forced in ours]
    tests = max(len(common) * len(GATED), 1)
    alpha = setting.alpha / tests
    system = [SystemEvidence(float(pa.forced),  # type: ignore[arg-type]
                             _system(pa, pb, figure, results, setting, alpha, seed))
              for pa, pb in sorted(common, key=lambda pair: pair[0].forced or 0.0)
              for figure in GATED]
    real_a = next((p for p in a.points if p.forced is None), None)
    real_b = next((p for p in b if p.forced is None), None)
    draft, reason = _draft(real_a, real_b, results, setting, metric)
    return SplitEvidence(system, draft, reason, setting.inconclusive)


def _speedup_of(point: ForcedPoint, results: Path) -> Speedup | str:
    """The point's speedup read from its run record, or why there is none."""
    if point.run_dir is None:
        return f"{point.series}: no run record"
    try:
        record = read_run(results / point.run_dir)
    except BadRecord as error:
        return str(error)
    found = record.measurement.speedup if record.measurement is not None else None
    return found if found is not None else f"{point.series}: no speedup in its record"


def _system(pa: ForcedPoint, pb: ForcedPoint, figure: str, results: Path,
            setting: ForcedSetting, alpha: float, seed: int) -> SpeedupEvidence:
    a, b = _speedup_of(pa, results), _speedup_of(pb, results)
    for side, found in (("A", a), ("B", b)):
        if isinstance(found, str):
            return SpeedupEvidence(figure, None, f"{side}: {found}")
    assert isinstance(a, Speedup) and isinstance(b, Speedup)
    try:
        return SpeedupEvidence(figure, paired_speedup(a, b, figure, setting.system_max_drop,
                                                      alpha, seed))
    except ValueError as error:
        return SpeedupEvidence(figure, None, str(error))


def _draft(a: ForcedPoint | None, b: ForcedPoint | None, results: Path,
           setting: ForcedSetting, metric: str) -> tuple[PairedResult | None, str | None]:
    for side, point in (("A", a), ("B", b)):
        if point is None or point.run_dir is None:
            return None, f"{side}'s real run has no run record"
    assert a is not None and b is not None and a.run_dir and b.run_dir
    try:
        reference = reference_from(results / a.run_dir, a.series, metric, None, False)
        rows = read_requests(results / b.run_dir, strict=True)
        ours, theirs, _ = aligned(reference, rows, metric)
        return paired_test(ours, theirs, draft_tolerance(setting, metric),
                           setting.alpha), None
    except (BadRecord, EngineError, ValueError) as error:
        return None, str(error)


def split_record(evidence: SplitEvidence, judged: SplitJudgement, setting: ForcedSetting,
                 metric: str, a: ForcedRecord, b: Sequence[ForcedPoint], against: str,
                 against_dir: str | None) -> ForcedSplit:
    """The split as B's ladder record keeps it."""
    system = []
    for found, status in zip(evidence.system, judged.system_statuses, strict=True):
        result = found.speedup.result
        if result is None:
            system.append(SystemFinding(forced=found.forced, figure=found.speedup.figure,
                                        status=status, reason=found.speedup.reason))
            continue
        system.append(SystemFinding(
            forced=found.forced, figure=result.figure, status=status,
            decision=result.decision, n=result.n, a=result.a, b=result.b, ratio=result.ratio,
            ratio_ci=result.ratio_ci, level=result.level, alpha=result.alpha))
    result_d = evidence.draft
    if result_d is None:
        draft = DraftFinding(status=judged.draft_status, reason=evidence.draft_reason)
    else:
        draft = DraftFinding(
            status=judged.draft_status, decision=result_d.decision, n=result_d.n,
            a=result_d.a, b=result_d.b, difference=result_d.difference,
            difference_ci=result_d.difference_ci, relative_change=result_d.relative_change,
            tolerated_drop=result_d.tolerated_drop, level=result_d.level,
            alpha=result_d.alpha)
    real_a = next((p.speedup_tpot for p in a.points if p.forced is None), None)
    real_b = next((p.speedup_tpot for p in b if p.forced is None), None)
    return ForcedSplit(
        against_spec=against, against_forced_id=a.forced_id, against_dir=against_dir,
        system_max_drop=setting.system_max_drop,
        draft_tolerance=draft_tolerance(setting, metric).describe(), alpha=setting.alpha,
        inconclusive=setting.inconclusive, system_status=judged.system_status,
        draft_status=judged.draft_status, status=judged.verdict.status,
        blamed=judged.blamed,
        system=system, draft=draft, real_speedup_tpot=(real_a, real_b),
        reasons=judged.verdict.reasons)
