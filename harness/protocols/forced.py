"""`harness forced SUITE --ladder 1,real,4,8`: speed with the acceptance forced through the
engine's own knob (harness.engines.forced_knob) at a ladder of accept lengths, each point
a launch of its own (the knobs are read at start: the server's environment, or vLLM's
--speculative-config through engine.speculative_config). The target alone (`[speedup]`,
harness.run.baseline) is measured once, after the real run, and every forced point's
speedup is over it (`target_alone` "reused" in the point's record; its pairing definition
names the real run): the points share their questions, build and host, and one
denominator makes the curve differ only by the knob. A point that answered other
questions or sent another workload, or a real run whose target alone failed, measures its
own (harness.run.baseline.reuse_target_alone).

The real run (the knob off) comes first and is marked on the curve; `real` in the ladder
forces its achieved accept length, which separates the draft's share of a speedup from the
system's. Each point is a normal run record, the series `<suite>-forced-<point>`, judged by
floors every run meets (accept length >= 1: a forced point is a measurement, not a gate),
so its verdict says only whether it was measured. The ladder's record names every point's
forced and achieved accept length and speedups, and the break-even accept length where the
system's speedup crosses 1.0. Exit code: `exit_codes.sweep_exit` over the points.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.builds import parse_build_spec
from harness.engines.forced_knob import Carrier, ForcedKnob, knob_for
from harness.errors import BadInput, ExitCode, Interrupted
from harness.metrics.speedup import DEFINITIONS as SPEEDUP_DEFINITIONS
from harness.metrics.speedup import GATE_DEFINITION, SPEEDUP_THROUGHPUT, SPEEDUP_TPOT
from harness.protocols.entry_suites import derived_suite
from harness.results.forced import FORCED, BreakEven, ForcedPoint, ForcedRecord, ForcedSplit
from harness.results.record import VerdictStatus, new_run_id, utc_now
from harness.run import runner
from harness.run.exit_codes import report_status, sweep_exit
from harness.run.outcome import RunOptions, RunOutcome
from harness.suite.entries import METRIC_DEFINITIONS
from harness.suite.model import LoadedSuite, Suite

REAL = "real"  # in --ladder: force the real run's achieved accept length
MAX_POINTS = 64
# `--against` (harness.protocols.forced_split): the definitions of the split's figures
SPLIT_DEFINITIONS = {
    "split.system": "the system's share of a speedup drop: at each forced accept length "
                    "both builds were measured at (A's ladder, its `real` value included), "
                    "B's speedup over A's, each over its own target alone: " + GATE_DEFINITION
                    + "; the tests of the ladder's points and both figures share the "
                    "side's alpha (each at alpha / tests, Bonferroni)",
    "split.draft": "the draft path's share: B's real (knob off) accept length against A's, "
                   "paired by question, the paired gate's non-inferiority test "
                   "(harness.metrics.paired_gate, docs/paired-gate.md), in `metric`",
    "split.blamed": "the shares whose finding failed: system, draft, both or neither",
}


@dataclass(frozen=True)
class Ladder:
    values: tuple[float, ...]  # forced accept lengths, ascending
    real: bool  # force the real run's achieved value too


def parse_ladder(text: str, block_size: int) -> Ladder:
    """`--ladder 1,real,4,8`: BadInput naming the value for an empty list, an item that is
    neither a number nor `real`, a value outside 1..block size, a repeat."""
    items = [item.strip() for item in text.split(",")]
    if not "".join(items):
        raise BadInput("--ladder: empty; give accept lengths, e.g. --ladder 1,real,4")
    if len(items) > MAX_POINTS:
        raise BadInput(f"--ladder: {len(items)} points; at most {MAX_POINTS}")
    values: list[float] = []
    real = False
    for item in items:
        if item == REAL:
            if real:
                raise BadInput("--ladder: real is given twice; each point is measured once")
            real = True
            continue
        shown = item if len(item) <= 24 else item[:20] + "..."
        try:
            value = float(item)
        except ValueError:
            raise BadInput(f"--ladder: {shown!r} is neither an accept length (a number, "
                           f"e.g. 2.5) nor {REAL!r}") from None
        if not math.isfinite(value) or not 1.0 <= value <= block_size:
            raise BadInput(f"--ladder: {shown} is outside 1..{block_size}: a verify step "
                           f"commits at least 1 token and at most the suite's block size "
                           f"(speculative.block_size / num_draft_tokens = {block_size})")
        if value in values:
            raise BadInput(f"--ladder: {value:g} is given twice; each point is measured once")
        values.append(value)
    return Ladder(tuple(sorted(values)), real)


def check_knob(suite: Suite, build: str | None, flag: str = "--build"
               ) -> tuple[ForcedKnob, int]:
    """The engine's knob and the suite's block size; BadInput naming the field when the
    engine has no knob, its algorithm does not read it, or the build predates it (`flag`:
    the option that named the build)."""
    kind = suite.engine.kind
    knob = knob_for(kind)
    if knob is None:
        raise BadInput(f"suite {suite.name}: engine.kind {kind} has no forced-acceptance "
                       "knob the harness knows")
    algorithm = suite.speculative.algorithm
    if algorithm not in knob.algorithms:
        raise BadInput(f"suite {suite.name}: speculative.algorithm {algorithm}: {kind}'s "
                       f"{knob.length_name} is read only for "
                       f"{', '.join(sorted(knob.algorithms))} ({knob.source})")
    block = suite.speculative.draft_tokens
    if block is None or block < 2:
        raise BadInput(f"suite {suite.name}: speculative.block_size: forcing the acceptance "
                       "needs a verify block of at least 2 tokens")
    _check_release(suite, knob, build, flag)
    return knob, block


def _check_release(suite: Suite, knob: ForcedKnob, build: str | None, flag: str) -> None:
    if knob.first_release is None:
        return
    default = getattr(suite.engine, "default_build", None)
    spec = build if build is not None else default
    field_name = flag if build is not None else "engine.default_build"
    release = parse_build_spec(spec, None, engine=suite.engine.kind).release \
        if spec else None
    if release is None:
        return  # a git, local or installed build: its version is known only once it runs
    try:
        older = Version(release) < Version(knob.first_release)
    except InvalidVersion:
        return
    if older:
        raise BadInput(f"{field_name} {spec}: {suite.engine.kind} {release} is not known to "
                       f"have the forced-acceptance knob {knob.length_name}: it was added "
                       f"by {knob.first_release} ({knob.source}); use {knob.first_release} "
                       "or later")


def point_tag(value: float | None) -> str:
    """The series suffix of a point: `real`, `1`, `2p5`."""
    return REAL if value is None else f"{value:g}".replace(".", "p")


def point_suite(loaded: LoadedSuite, settings: dict[str, str | float], tag: str,
                questions: int | None, carrier: Carrier = "environment") -> LoadedSuite:
    """The suite of one point: its main workload alone (questions capped when asked), the
    knob where the engine reads it (engine.env, or vLLM's engine.speculative_config), the
    target alone measured after it, floors every run meets."""
    document = copy.deepcopy(loaded.document)
    suite = loaded.suite
    for key in ("workloads", "gate", "baselines", "forced"):
        document.pop(key, None)
    document["name"] = f"{suite.name}-forced-{tag}"
    document["nightly"] = False
    declared = document["workload"]
    if not isinstance(declared, dict):
        raise BadInput(f"suite {suite.name}: [workload] is not a table")
    workload = {k: v for k, v in declared.items() if k != "sequential_in_flight"}
    if questions is not None:
        workload["questions"] = questions
    document["workload"] = workload
    document["floors"] = {"metric": suite.floors.metric, "accept_length": 1.0}
    document["speedup"] = {"baseline": "target_only"}
    engine_table = document["engine"]
    if not isinstance(engine_table, dict):
        raise BadInput(f"suite {suite.name}: [engine] is not a table")
    engine = dict(engine_table)
    # where the engine reads its knob (harness.engines.forced_knob.ForcedKnob.carrier)
    table = "speculative_config" if carrier == "speculative_config" else "env"
    found = engine.get(table) or {}
    if not isinstance(found, dict):
        raise BadInput(f"suite {suite.name}: engine.{table} is not a table")
    engine[table] = {**found, **(settings if table == "speculative_config"
                                 else {k: str(v) for k, v in settings.items()})}
    document["engine"] = engine
    return derived_suite(loaded, document, f"forced {tag}")


@dataclass
class ForcedOutcome:
    record: ForcedRecord
    folder: Path | None
    exit_code: ExitCode
    outcomes: list[RunOutcome] = field(default_factory=list)


# `--against`: given the ladder's points, whose fault a speedup drop is (forced_split)
SplitHook = Callable[[list[ForcedPoint]], ForcedSplit]


def run_forced(loaded: LoadedSuite, ladder: Ladder, options: RunOptions,
               questions: int | None = None, split: SplitHook | None = None
               ) -> ForcedOutcome:
    """The real run with its target alone, then each forced point, each a launch, its
    speedup over the real run's target alone; with `split`, its finding in the record, its
    status counted with the points'."""
    knob, block = check_knob(loaded.suite, options.sglang)
    if questions is not None and questions < 1:
        raise BadInput("--questions: at least 1 question a point")
    started, forced_id = utc_now(), new_run_id()
    metric = loaded.suite.floors.metric
    points: list[ForcedPoint] = []
    outcomes: list[RunOutcome] = []
    try:
        plan: list[tuple[float | None, dict[str, str | float]]] = [(None, {})]
        plan += [(value, knob.settings(value)) for value in ladder.values]
        point_options = options
        for index, (value, settings) in enumerate(plan):
            point, outcome = _measure(loaded, value, settings, questions, point_options,
                                      knob.carrier)
            points.append(point)
            outcomes.append(outcome)
            if index == 0:
                point_options = _sharing_target_alone(options, outcome)
                real = _real_value(point, block, ladder.values) if ladder.real else None
                if real is not None:
                    plan.append((real, knob.settings(real)))
    except Interrupted as error:
        record = _record(loaded, knob, block, forced_id, started, options, metric, points,
                         "error", [f"interrupted: {error.message}"])
        FORCED.save(record, options.results_dir, loaded.suite.name, started, forced_id)
        raise
    statuses: list[VerdictStatus] = [point.status for point in points]
    skipped = any(o.status == "skipped" for o in outcomes)
    found = split(points) if split is not None and not skipped else None
    if found is not None:
        statuses.append(found.status)
    status = "skipped" if skipped else report_status(statuses)
    reasons = [f"{_name(p)}: {r}" for p in points if p.status != "pass" for r in p.reasons]
    if found is not None and found.status != "pass":
        reasons += found.reasons
    record = _record(loaded, knob, block, forced_id, started, options, metric, points,
                     status, reasons, found)
    folder = FORCED.save(record, options.results_dir, loaded.suite.name, started, forced_id)
    worst = next((o for o in outcomes if o.status == status), outcomes[-1])
    return ForcedOutcome(record, folder, sweep_exit(statuses, status, worst.exit_code),
                         outcomes)


def _sharing_target_alone(options: RunOptions, real: RunOutcome) -> RunOptions:
    """The forced points' options: the real run's target alone reused where it measured
    one (harness.run.baseline.reuse_target_alone)."""
    record = real.record
    alone = record.target_alone if record is not None else None
    if real.run_dir is None or alone is None or alone.status != "measured":
        return options
    return dataclasses.replace(options, target_alone_from=real.run_dir)


def _real_value(point: ForcedPoint, block: int, values: tuple[float, ...]) -> float | None:
    if point.achieved is None:
        return None
    value = min(max(round(point.achieved, 2), 1.0), float(block))
    return None if value in values else value


def _measure(loaded: LoadedSuite, value: float | None, settings: dict[str, str | float],
             questions: int | None, options: RunOptions, carrier: Carrier = "environment"
             ) -> tuple[ForcedPoint, RunOutcome]:
    derived = point_suite(loaded, settings, point_tag(value), questions, carrier)
    outcome = runner.run_suite(derived, options)
    record = outcome.record
    measurement = record.measurement if record is not None else None
    speedup = measurement.speedup if measurement is not None else None
    achieved = measurement.accept_length if measurement is not None and \
        not measurement.partial else None
    status: VerdictStatus = outcome.status
    reasons = list(outcome.reasons)
    if status == "pass" and (speedup is None or speedup.tpot is None):
        status = "error"  # a missing figure is never a pass
        reasons.append("no speedup figure: " + (speedup.note or "none formed"
                                                 if speedup is not None else "none measured"))
    point = ForcedPoint(
        forced=value, achieved=achieved,
        speedup_tpot=speedup.tpot if speedup else None,
        speedup_tpot_ci=speedup.tpot_ci if speedup else None,
        speedup_throughput=speedup.throughput if speedup else None,
        speedup_throughput_ci=speedup.throughput_ci if speedup else None,
        tpot_s=speedup.speculative_tpot_s if speedup else None,
        output_tokens_per_s=speedup.speculative_output_tok_s if speedup else None,
        series=derived.suite.name, run_id=record.run_id if record else None,
        run_dir=None if outcome.run_dir is None
        else os.path.relpath(outcome.run_dir, options.results_dir),
        settings=settings, status=status, reasons=reasons)
    return point, outcome


def _name(point: ForcedPoint) -> str:
    return "real run" if point.forced is None else f"forced {point.forced:g}"


def break_even(points: list[ForcedPoint], figure: str) -> BreakEven:
    """Where `figure` (speedup_tpot or speedup_throughput) crosses 1.0 against achieved
    accept length over the forced points: linear interpolation at the first crossing."""
    attr = "speedup_tpot" if figure == SPEEDUP_TPOT else "speedup_throughput"
    pairs = sorted((p.achieved, getattr(p, attr)) for p in points
                   if p.forced is not None and p.achieved is not None
                   and getattr(p, attr) is not None)
    if len(pairs) < 2:
        return BreakEven(figure=figure, note="none in range: fewer than two forced points "
                         "with a figure")
    for (x0, y0), (x1, y1) in itertools.pairwise(pairs):
        if y0 == 1.0:
            return BreakEven(figure=figure, accept_length=x0, note="at a forced point")
        if (y0 - 1.0) * (y1 - 1.0) < 0:
            at = x0 + (1.0 - y0) * (x1 - x0) / (y1 - y0)
            return BreakEven(figure=figure, accept_length=at,
                             note=f"interpolated between accept length {x0:.4g} "
                                  f"({y0:.4g}x) and {x1:.4g} ({y1:.4g}x)")
    if pairs[-1][1] == 1.0:
        return BreakEven(figure=figure, accept_length=pairs[-1][0], note="at a forced point")
    side = "above" if pairs[0][1] > 1.0 else "below"
    return BreakEven(figure=figure, note=f"none in range: {side} 1.0 at every forced point "
                     f"(accept length {pairs[0][0]:.4g} to {pairs[-1][0]:.4g})")


def _record(loaded: LoadedSuite, knob: ForcedKnob, block: int, forced_id: str,
            started: datetime,
            options: RunOptions, metric: str, points: list[ForcedPoint], status: str,
            reasons: list[str], split: ForcedSplit | None = None) -> ForcedRecord:
    definitions = {
        "forced": f"the accept length set through {knob.length_name} (tokens a verify "
                  "step commits, on average); absent: the real run, the knob off",
        "achieved": f"the point's measured accept length, {metric}: {METRIC_DEFINITIONS[metric]}",
        SPEEDUP_TPOT: SPEEDUP_DEFINITIONS[SPEEDUP_TPOT],
        SPEEDUP_THROUGHPUT: SPEEDUP_DEFINITIONS[SPEEDUP_THROUGHPUT],
        "tpot_s": "speculation's mean TPOT over the paired questions (measurement.speedup)",
        "output_tokens_per_s": "speculation's output tokens/s over the paired questions",
        "break_even": "achieved accept length where the speedup crosses 1.0, linearly "
                      "interpolated between the forced points around the first crossing",
        "target_alone": "one target-alone run per ladder, measured right after the real "
                        "run on its questions; each forced point's speedups are over it "
                        "(the point's target_alone names the run), unless the point "
                        "answered other questions or sent another workload and measured "
                        "its own",
    }
    if split is not None:
        definitions.update(SPLIT_DEFINITIONS)
    return ForcedRecord(
        forced_id=forced_id, suite=loaded.suite.name, engine=loaded.suite.engine.kind,
        knob=f"{knob.length_name} ({knob.carrier}; {knob.source})", block_size=block,
        started_at=started, finished_at=utc_now(), label=options.label, metric=metric,
        definitions=definitions, points=points,
        break_even=[break_even(points, SPEEDUP_TPOT), break_even(points, SPEEDUP_THROUGHPUT)],
        split=split, status=status, reasons=reasons)  # type: ignore[arg-type]
