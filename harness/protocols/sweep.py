"""`harness sweep SUITE --concurrency 1,4,16`: the suite's main workload at each
concurrency, on one launch of the server, each point a normal run record.

Each concurrency N becomes a workload entry `cN` of a derived suite (the main workload
with `concurrency = N`, judged by the suite's floors, no baselines: those were measured at
the suite's own concurrency), so the run path (`harness.run.runner.run_suite`) measures
every point on one server, as it measures a suite's `[[workloads]]`, and records each as
the series `<suite>.cN` (`harness.suite.series`): `trend`, `plot`, `compare` and `paired`
read them as any run, and each point has its own history.

The gate (`--max-drop X`): accept length at each N within X of concurrency 1's, a share of
it. The points answer the same prompts, so they are paired by prompt as `--against` pairs
two builds: the non-inferiority test of `harness.metrics.paired_gate`, on concurrency 1's
run (the reference, read through the door) and N's, and the verdict by the one judge
(`harness.run.judge.decide` with the paired evidence, so the point's floors stand too).
The sweep's exit code is `exit_codes.sweep_exit`: the report's over every point and finding.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from harness.errors import BadInput, EngineError, ExitCode, Interrupted
from harness.metrics.paired_gate import Tolerance, paired_test
from harness.protocols.entry_suites import EntryRun, derived_suite
from harness.protocols.pairing import aligned, reference_from
from harness.results.layout import RUNS_DIR, started_from_name
from harness.results.readers import read_requests, read_run
from harness.results.record import new_run_id, utc_now
from harness.results.sweeps import SWEEPS, GateFinding, SweepGate, SweepPoint, SweepRecord
from harness.run import runner
from harness.run.evidence import PairedEvidence
from harness.run.exit_codes import report_status, sweep_exit
from harness.run.judge import Evidence, decide
from harness.run.outcome import RunOptions
from harness.suite.entries import METRIC_DEFINITIONS
from harness.suite.gate import Gate
from harness.suite.model import LoadedSuite, suite_entries
from harness.workloads import planned_questions

if TYPE_CHECKING:
    pass

MAX_CONCURRENCY = 1 << 20  # far beyond any server's queue; a bound on what is parsed
REFERENCE_CONCURRENCY = 1
_ITEM = re.compile(r"[0-9]+")  # ASCII digits only: no sign, no exponent, no other script


def parse_concurrencies(text: str) -> tuple[int, ...]:
    """`--concurrency 1,4,16` as ascending concurrencies; BadInput naming what is wrong
    (empty, an item that is not a whole number, 0, a repeat, a value past MAX_CONCURRENCY)."""
    items = [item.strip() for item in text.split(",")]
    if not "".join(items):
        raise BadInput("--concurrency: empty; give concurrencies, e.g. --concurrency 1,4,16")
    values: list[int] = []
    for item in items:
        if not _ITEM.fullmatch(item):
            raise BadInput(f"--concurrency: {_shown(item)!r} is not a whole number of "
                           "requests in flight (e.g. --concurrency 1,4,16)")
        if len(item) > len(str(MAX_CONCURRENCY)) or int(item) > MAX_CONCURRENCY:
            raise BadInput(f"--concurrency: {_shown(item)} is more than "
                           f"{MAX_CONCURRENCY} requests in flight")
        value = int(item)
        if value < 1:
            raise BadInput(f"--concurrency: {value}: a point needs at least 1 request in "
                           "flight")
        if value in values:
            raise BadInput(f"--concurrency: {value} is given twice; each point is measured "
                           "once")
        values.append(value)
    return tuple(sorted(values))


def _shown(item: str) -> str:
    return item if len(item) <= 24 else item[:20] + "..."


def point_name(concurrency: int) -> str:
    """The workload entry (and series suffix) of a point: `c4`, series `<suite>.c4`."""
    return f"c{concurrency}"


@dataclass(frozen=True)
class GateSettings:
    """`--max-drop`, `--alpha`, `--inconclusive`: the concurrency gate."""

    max_drop: float
    alpha: float = 0.05
    inconclusive: Literal["pass", "fail"] = "pass"


def check_gate(settings: GateSettings | None, concurrencies: tuple[int, ...]) -> None:
    """BadInput for a tolerance no test can use, or a gate without concurrency 1."""
    if settings is None:
        return
    drop = settings.max_drop
    if not (math.isfinite(drop) and 0.0 < drop < 1.0):
        raise BadInput(f"--max-drop {drop:g}: the tolerated drop is a share of concurrency "
                       "1's accept length, above 0 and below 1 (e.g. 0.05)")
    if not (math.isfinite(settings.alpha) and 0.0 < settings.alpha < 0.5):
        raise BadInput(f"--alpha {settings.alpha:g}: the gate's one-sided level is in "
                       "(0, 0.5)")
    if len(concurrencies) < 2:
        raise BadInput("--max-drop compares points with concurrency 1: give at least one "
                       "more concurrency (e.g. --concurrency 1,4,16)")
    if REFERENCE_CONCURRENCY not in concurrencies:
        raise BadInput(f"--max-drop compares each point with concurrency "
                       f"{REFERENCE_CONCURRENCY}: add it to --concurrency "
                       f"(e.g. {REFERENCE_CONCURRENCY},{','.join(map(str, concurrencies))})")


def sweep_suite(loaded: LoadedSuite, concurrencies: tuple[int, ...]) -> LoadedSuite:
    """The suite with its main workload as one entry per concurrency (its own entries
    left out), checked as any suite is; BadInput when a point's name is taken by one of
    the suite's entries or a point is more than the workload's questions."""
    suite = loaded.suite
    taken = [point_name(c) for c in concurrencies
             if point_name(c) in {entry.name for entry in suite.workloads}]
    if taken:
        raise BadInput(f"suite {suite.name}: its workload entry {', '.join(taken)} has the "
                       "name of a sweep point (c<concurrency>); rename the entry")
    questions = planned_questions(suite.workload)
    beyond = [c for c in concurrencies if c > questions]
    if beyond:
        raise BadInput(f"--concurrency: {beyond[0]} is more than the {questions} questions "
                       f"suite {suite.name} asks: no point can keep that many in flight; "
                       f"the largest useful concurrency here is {questions}")
    document = copy.deepcopy(loaded.document)
    # the sweep does not run sequentially: the sequential cap has no meaning at a point
    table = document["workload"]
    if not isinstance(table, dict):  # the suite loaded, so never; said, not a traceback
        raise BadInput(f"suite {suite.name}: [workload] is not a table")
    workload = {key: value for key, value in table.items() if key != "sequential_in_flight"}
    document["workloads"] = [{**workload, "concurrency": c, "name": point_name(c),
                              "floors": copy.deepcopy(document["floors"])}
                             for c in concurrencies]
    return derived_suite(loaded, document, "swept")


@dataclass
class PointRun(EntryRun):
    """One point as measured: the sweep's entry at `concurrency`."""

    concurrency: int
    noun: ClassVar[str] = "point"


@dataclass
class SweepOutcome:
    record: SweepRecord
    folder: Path | None
    points: list[PointRun]
    exit_code: ExitCode
    plan: list[str] = field(default_factory=list)


def run_sweep(loaded: LoadedSuite, concurrencies: tuple[int, ...], options: RunOptions,
              gate: GateSettings | None = None) -> SweepOutcome:
    """Measure every point on one launch, judge the gate, write the sweep's record."""
    check_gate(gate, concurrencies)
    swept = sweep_suite(loaded, concurrencies)
    names = [point_name(c) for c in concurrencies]
    started, sweep_id = utc_now(), new_run_id()
    metric = loaded.suite.floors.metric
    entries = {entry.name: entry for entry in suite_entries(swept, names)}
    points = [PointRun(c, series=entries[point_name(c)].series,
                       floors=entries[point_name(c)].loaded.suite.floors) for c in concurrencies]
    try:
        outcome = runner.run_suite(swept, dataclasses.replace(options, entries=names,
                                                       sequential=False))
    except Interrupted as error:  # the points' records are kept; the sweep's says so too
        if not options.dry_run:
            with contextlib.suppress(OSError, BadInput):
                _record_interrupted(loaded, sweep_id, started, concurrencies, metric, points,
                                    options, error.message)
        raise
    if options.dry_run:
        record = _record(loaded, sweep_id, started, concurrencies, metric, points, None,
                         "pass", options)
        plan = list(outcome.plan)
        if gate is not None:
            plan.append(f"gate       accept length at each of {', '.join(names[1:])} within "
                        f"{gate.max_drop:.1%} of c1's, paired by prompt (one-sided alpha "
                        f"{gate.alpha:g}, inconclusive judged {gate.inconclusive})")
        return SweepOutcome(record, None, points, ExitCode.PASS, plan)
    by_series = {entry.record.suite.name: entry for entry in (outcome.entries or [outcome])
                 if entry.record is not None}
    for point in points:
        found = by_series.get(point.series)
        if found is not None:
            point.run_dir, point.record = found.run_dir, found.record
    sweep_gate = None
    statuses = [point.status for point in points]
    if gate is not None:
        findings = judge_gate(points, gate, metric)
        sweep_gate = SweepGate(max_drop=gate.max_drop, alpha=gate.alpha,
                               inconclusive=gate.inconclusive, findings=findings)
        statuses += [finding.status for finding in findings]
    status = "skipped" if outcome.status == "skipped" else report_status(statuses)
    record = _record(loaded, sweep_id, started, concurrencies, metric, points, sweep_gate,
                     status, options, reasons=list(outcome.reasons) if status == "skipped"
                     else [])
    folder = SWEEPS.save(record, options.results_dir, loaded.suite.name, started, sweep_id)
    return SweepOutcome(record, folder, points,
                        sweep_exit(statuses, outcome.status, outcome.exit_code), [])


def _record_interrupted(loaded: LoadedSuite, sweep_id: str, started: datetime,
                        concurrencies: tuple[int, ...], metric: str, points: list[PointRun],
                        options: RunOptions, why: str) -> None:
    """The sweep's record after Ctrl-C: each point's run of this sweep (the newest of its
    series started since the sweep began), read through the door, and status error."""
    since = started.replace(microsecond=0)
    for point in points:
        folder = Path(options.results_dir) / RUNS_DIR / point.series
        ours = sorted(run_dir for run_dir in folder.glob("*")
                      if (when := started_from_name(run_dir.name)) is not None
                      and when >= since)
        if not ours:
            continue
        with contextlib.suppress(BadInput):  # a run cut before its record: named as absent
            point.run_dir, point.record = ours[-1], read_run(ours[-1])
    record = _record(loaded, sweep_id, started, concurrencies, metric, points, None, "error",
                     options, reasons=[f"interrupted: {why}"])
    SWEEPS.save(record, options.results_dir, loaded.suite.name, started, sweep_id)


def _record(loaded: LoadedSuite, sweep_id: str, started: datetime, concurrencies: tuple[int, ...],
            metric: str, points: list[PointRun], gate: SweepGate | None, status: str,
            options: RunOptions, reasons: list[str] | None = None) -> SweepRecord:
    return SweepRecord(
        sweep_id=sweep_id, suite=loaded.suite.name, started_at=started,
        finished_at=utc_now(), label=options.label, concurrencies=list(concurrencies),
        metric=metric,  # type: ignore[arg-type]
        definition=METRIC_DEFINITIONS[metric],
        points=[SweepPoint(concurrency=p.concurrency, series=p.series,
                           run_id=p.record.run_id if p.record else None,
                           run_dir=_relative(p.run_dir, options.results_dir),
                           status=p.status, reasons=p.reasons) for p in points],
        gate=gate, status=status, reasons=reasons or [])  # type: ignore[arg-type]


def _relative(run_dir: Path | None, results: Path) -> str | None:
    return None if run_dir is None else os.path.relpath(run_dir, results)


def judge_gate(points: list[PointRun], gate: GateSettings, metric: str) -> list[GateFinding]:
    """Each point above concurrency 1 against concurrency 1, paired by prompt, judged by
    the one judge (floors and the paired gate). A point or a reference without a whole
    measurement is an error: a missing test is never a pass."""
    reference_point = next(p for p in points if p.concurrency == REFERENCE_CONCURRENCY)
    tolerance = Tolerance(gate.max_drop, True, metric)
    rule = Gate(relative_drop=gate.max_drop, alpha=gate.alpha,
                inconclusive=gate.inconclusive, metric=metric)  # type: ignore[arg-type]
    reference = None
    problem = reference_point.unmeasured()
    if problem is None:
        try:
            reference = reference_from(reference_point.run_dir,  # type: ignore[arg-type]
                                       reference_point.series, metric,
                                       f"concurrency {REFERENCE_CONCURRENCY}", False)
        except BadInput as error:
            problem = error.message
    findings = []
    for point in points:
        if point is reference_point:
            continue
        why = problem and f"concurrency {REFERENCE_CONCURRENCY}: {problem}"
        why = why or point.unmeasured()
        if why is not None or reference is None:
            findings.append(GateFinding(concurrency=point.concurrency, status="error",
                                        reasons=[f"no gate: {why}; a missing test is never "
                                                 "a pass"]))
            continue
        record = point.record
        assert record is not None and point.run_dir is not None
        try:
            rows = read_requests(point.run_dir, record, strict=True)
            a, b, _ = aligned(reference, rows, metric)
            result = paired_test(a, b, tolerance, gate.alpha)
        except (BadInput, EngineError, ValueError) as error:
            text = getattr(error, "message", None) or str(error)
            findings.append(GateFinding(concurrency=point.concurrency, status="error",
                                        reasons=[f"no gate: {text}"]))
            continue
        against: dict[str, object] = {"run_id": reference.run_id,
                                      "path": str(reference.run_dir),
                                      "spec": reference.spec, "reused": False}
        judged = decide(Evidence(record.measurement, point.floors,
                                 paired=PairedEvidence(result, rule, against)))
        findings.append(GateFinding(concurrency=point.concurrency,
                                    status=judged.verdict.status,
                                    reasons=list(judged.verdict.reasons),
                                    result=result.to_dict()))
    return findings
