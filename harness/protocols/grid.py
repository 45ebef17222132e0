"""`harness grid SUITE`: the suite's `[grid]` (harness.suite.grid) measured cell by cell,
each cell a normal run record, the cells that need the same server on one launch.

The cells of one prefix-caching setting share a launch line, so they are the workload
entries of one derived suite (the engine's own prefix-cache flag added to
`engine.extra_args`, `[grid]` and the suite's own entries dropped) and the run path
(`harness.run.runner.run_suite`) measures them on one server, as it measures a suite's
`[[workloads]]`, recording each as the series `<suite>.<cell>`; prefix caching on and off
are two launches. Concurrency is the sweep's axis made the same way (a cell's
`concurrency`, `harness.protocols.sweep`), on the same server. With `[speedup]` every
launch's cells also get the target alone, launched once after them.

Each cell is judged by the suite's `[floors]` (accept length, its definition, the speedup
floors; category, position and accuracy floors belong to the suite's own workload and are
left out). The gate (`[grid] reference`, `max_drop`): each cell's accept length within
`max_drop` of its reference cell's, the reference's coordinates in the cell's own category,
paired by question: the non-inferiority test of `harness.metrics.paired_gate`, judged by
`harness.run.judge.decide` with the paired evidence. Two tiers send the same questions
behind different prefixes, so across tiers the questions pair and the prompt tokens
differ by design (the server's prompt hash is not compared); on one tier they must be
the same prompts. With `speedup_max_drop` the same finding also gates each speedup over
the target alone (TPOT and throughput, `harness.metrics.speedup.paired_speedup`, the
paired-by-question gate `harness run --against` makes with `[speedup] max_drop`) against
the reference cell's: the judge reads it as the paired speedup evidence, so the cell's
one finding holds both gates. The exit code is `exit_codes.worst_exit` over each launch's
`sweep_exit` and the gate's `report_exit`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from harness.errors import BadInput, EngineError, ExitCode, Interrupted
from harness.metrics.paired_gate import Tolerance, paired_test
from harness.metrics.speedup import GATE_DEFINITION as SPEEDUP_GATE_DEFINITION
from harness.protocols.entry_suites import EntryRun, derived_suite
from harness.protocols.pairing import aligned, paired_speedup_evidence, reference_from
from harness.results.grid import (
    GRIDS,
    GridCellRecord,
    GridFinding,
    GridGate,
    GridLaunch,
    GridRecord,
    GridTierInfo,
)
from harness.results.readers import read_requests
from harness.results.record import VerdictStatus, new_run_id, utc_now
from harness.run import runner
from harness.run.evidence import PairedEvidence
from harness.run.exit_codes import report_exit, report_status, sweep_exit, worst_exit
from harness.run.judge import Evidence, decide
from harness.run.plan import check_suite
from harness.suite.entries import METRIC_DEFINITIONS
from harness.suite.gate import Gate
from harness.suite.grid import (
    Grid,
    GridCell,
    PrefixCaching,
    grid_cells,
    reference_cell,
)
from harness.suite.model import LoadedSuite, Suite, suite_entries
from harness.suite.prefix_caching import flags_for

if TYPE_CHECKING:
    from harness.run.outcome import RunOptions, RunOutcome
    from harness.suite.entries import Workload

# The request settings every cell takes from the suite's [workload] (harness.suite.entries
# `_Requests`); what picks the prompts is the cell's own.
REQUEST_KEYS = ("protocol", "chat_template_kwargs", "system_prompt", "max_tokens",
                "temperature", "top_p", "top_k", "seed", "sampling_seed", "warmup_requests",
                "request_timeout_s", "progress_timeout_s")
# [floors] keys a cell keeps: its accept length and speedups in the suite's definition.
# Category, position and accuracy floors, and a cited reference, are the suite's own
# workload's (another category, another protocol).
CELL_FLOOR_KEYS = ("accept_length", "metric", "strict", "alpha", "beta", "speedup_tpot",
                   "speedup_throughput")


def grid_of(loaded: LoadedSuite) -> Grid:
    grid = loaded.suite.grid
    if grid is None:
        raise BadInput(f"suite {loaded.suite.name} has no [grid]: declare its tiers, "
                       "categories and questions (docs/speed.md, \"Workload grid\")")
    return grid


def cell_workload(cell: GridCell, grid: Grid, workload: Workload) -> dict[str, object]:
    """The cell's workload entry (without name and floors): its category's kind, the
    tier's prefix, the cell's concurrency, the suite's request settings."""
    requests = {key: getattr(workload, key) for key in REQUEST_KEYS
                if getattr(workload, key) is not None}
    base: dict[str, object] = {**requests, "concurrency": cell.concurrency}
    if cell.category == "gsm8k":  # its own few-shot prefix; every tier the same questions
        return {**base, "kind": "gsm8k", "shots": cell.tier.shots, "shots_from": "train",
                "questions": grid.questions, "wording": "run_eval"}
    if cell.category == "humaneval":
        return {**base, "kind": "humaneval", "questions": grid.questions,
                "context_shots": cell.tier.shots}
    return {**base, "kind": "spec_bench", "categories": [cell.category],
            "per_category": grid.questions, "turns": 1, "context_shots": cell.tier.shots}


def launch_flags(kind: str, caching: PrefixCaching | None) -> list[str]:
    return [] if caching is None else list(flags_for(kind, caching))


def launch_suite(loaded: LoadedSuite, cells: list[GridCell],
                 caching: PrefixCaching | None) -> LoadedSuite:
    """The suite one launch runs: the cells as its entries, the prefix-cache flag on its
    launch line; checked as any suite is (BadInput naming the field)."""
    suite = loaded.suite
    grid = grid_of(loaded)
    document = copy.deepcopy(loaded.document)
    document.pop("grid", None)
    engine = document["engine"]
    floors = document["floors"]
    if not isinstance(engine, dict) or not isinstance(floors, dict):  # loaded: never
        raise BadInput(f"suite {suite.name}: [engine] or [floors] is not a table")
    extra = engine.get("extra_args", [])
    engine["extra_args"] = [*(extra if isinstance(extra, list) else []),
                            *launch_flags(suite.engine.kind, caching)]
    cell_floors = {k: v for k, v in floors.items() if k in CELL_FLOOR_KEYS}
    document["workloads"] = [{**cell_workload(cell, grid, suite.workload), "name": cell.name,
                              "floors": copy.deepcopy(cell_floors)} for cell in cells]
    return derived_suite(loaded, document, "grid cells")


@dataclass
class CellRun(EntryRun):
    """One cell as measured, on launch `launch`."""

    cell: GridCell
    launch: int
    noun: ClassVar[str] = "cell"


@dataclass
class LaunchRun:
    caching: PrefixCaching | None
    flags: list[str]
    cells: list[CellRun]
    outcome: RunOutcome | None = None


@dataclass
class GridOutcome:
    record: GridRecord
    folder: Path | None
    cells: list[CellRun]
    exit_code: ExitCode
    plan: list[str] = field(default_factory=list)


def plan_launches(loaded: LoadedSuite) -> list[tuple[LaunchRun, LoadedSuite]]:
    """One launch per prefix-caching setting (one in all when the grid does not sweep it),
    each with its derived suite and its cells."""
    grid = grid_of(loaded)
    cells = grid_cells(grid, loaded.suite.workload.concurrency)
    launches = []
    for index, caching in enumerate(list(grid.prefix_caching) or [None]):
        group = [cell for cell in cells if cell.prefix_caching == caching]
        derived = launch_suite(loaded, group, caching)
        entries = {entry.name: entry for entry in suite_entries(derived,
                                                                [c.name for c in group])}
        runs = [CellRun(cell, index, series=entries[cell.name].series,
                        floors=entries[cell.name].loaded.suite.floors) for cell in group]
        launches.append((LaunchRun(caching, launch_flags(loaded.suite.engine.kind, caching),
                                   runs), derived))
    return launches


def run_grid(loaded: LoadedSuite, options: RunOptions) -> GridOutcome:
    """Measure every cell (a launch per prefix-caching setting), judge the gate, write the
    grid's record."""
    check_suite(loaded)  # the grid against the data: exit 2 before any launch
    grid = grid_of(loaded)
    launches = plan_launches(loaded)
    started, grid_id = utc_now(), new_run_id()
    cells = [run for launch, _ in launches for run in launch.cells]
    plan: list[str] = []
    for number, (launch, derived) in enumerate(launches, start=1):
        names = [run.cell.name for run in launch.cells]
        try:
            outcome = runner.run_suite(derived, dataclasses.replace(
                options, entries=names, sequential=False))
        except Interrupted as error:  # the cells' records are kept; the grid's says so too
            if not options.dry_run:
                with contextlib.suppress(OSError, BadInput):
                    record = _record(loaded, grid_id, started, [lr for lr, _ in launches],
                                     None, "error", options, [f"interrupted: {error.message}"])
                    GRIDS.save(record, options.results_dir, loaded.suite.name, started, grid_id)
            raise
        launch.outcome = outcome
        if options.dry_run:
            said = f"prefix caching {launch.caching}" if launch.caching else "one launch"
            plan.append(f"--- launch {number} of {len(launches)}: {said}, cells {', '.join(names)}")
            plan += list(outcome.plan)
            continue
        by_series = {entry.record.suite.name: entry for entry in (outcome.entries or [outcome])
                     if entry.record is not None}
        for run in launch.cells:
            found = by_series.get(run.series)
            if found is not None:
                run.run_dir, run.record = found.run_dir, found.record
    all_launches = [launch for launch, _ in launches]
    if options.dry_run:
        if grid.reference is not None:
            plan.append(f"gate       accept length of each cell within {grid.max_drop:.1%} of "
                        "its category's reference cell's, paired by question (one-sided "
                        f"alpha {grid.alpha:g}, inconclusive judged {grid.inconclusive})")
        if grid.speedup_max_drop is not None:
            plan.append(f"gate       speedups (TPOT, throughput) of each cell within "
                        f"{grid.speedup_max_drop:.1%} of its reference cell's, paired by "
                        "question")
        record = _record(loaded, grid_id, started, all_launches, None, "pass", options)
        return GridOutcome(record, None, cells, ExitCode.PASS, plan)
    gate = None
    codes = []
    for launch in all_launches:
        assert launch.outcome is not None
        codes.append(sweep_exit([run.status for run in launch.cells], launch.outcome.status,
                                launch.outcome.exit_code))
    statuses: list[VerdictStatus] = [run.status for run in cells]
    skipped = all(launch.outcome is not None and launch.outcome.status == "skipped"
                  for launch in all_launches)
    # together (the schema); a host the suite does not fit measured nothing to gate
    if grid.reference is not None and grid.max_drop is not None and not skipped:
        gate = GridGate(reference=grid.reference.model_dump(), max_drop=grid.max_drop,
                        speedup_max_drop=grid.speedup_max_drop,
                        speedup_definition=SPEEDUP_GATE_DEFINITION
                        if grid.speedup_max_drop is not None else None,
                        alpha=grid.alpha, inconclusive=grid.inconclusive,
                        findings=judge_grid(cells, grid, loaded.suite))
        codes.append(report_exit(finding.status for finding in gate.findings))
        statuses += [finding.status for finding in gate.findings]
    status: VerdictStatus = "skipped" if skipped else report_status(statuses)
    reasons = [reason for launch in all_launches if launch.outcome is not None
               and launch.outcome.status == "skipped" for reason in launch.outcome.reasons]
    record = _record(loaded, grid_id, started, all_launches, gate, status, options, reasons)
    folder = GRIDS.save(record, options.results_dir, loaded.suite.name, started, grid_id)
    return GridOutcome(record, folder, cells, worst_exit(codes), [])


def judge_grid(cells: list[CellRun], grid: Grid, suite: Suite) -> list[GridFinding]:
    """Each cell that is not its category's reference cell against it, paired by
    question, judged by the one judge (floors, the paired gate and, with
    `speedup_max_drop`, the paired speedup gate). A cell or a reference without a whole
    measurement is an error: a missing test is never a pass."""
    metric = suite.floors.metric
    by_name = {run.cell.name: run for run in cells}
    rule = Gate(relative_drop=grid.max_drop, alpha=grid.alpha,
                inconclusive=grid.inconclusive, metric=metric)
    tolerance = Tolerance(float(grid.max_drop or 0.0), True, metric)
    findings = []
    for run in cells:
        ref_cell = reference_cell(grid, run.cell, suite.workload.concurrency)
        if ref_cell is None or ref_cell.name == run.cell.name:
            continue
        ref = by_name[ref_cell.name]
        findings.append(_finding(run, ref, rule, tolerance, metric, grid.speedup_max_drop,
                                 suite.workload.seed))
    return findings


def _finding(run: CellRun, ref: CellRun, rule: Gate, tolerance: Tolerance, metric: str,
             speedup_max_drop: float | None, seed: int) -> GridFinding:
    cell, name = run.cell.name, ref.cell.name
    why = ref.unmeasured()
    why = why and f"reference cell {name}: {why}"
    why = why or run.unmeasured()
    if why is not None:
        return GridFinding(cell=cell, reference=name, status="error",
                           reasons=[f"no gate: {why}; a missing test is never a pass"])
    assert run.record is not None and run.run_dir is not None and ref.run_dir is not None
    try:
        reference = reference_from(ref.run_dir, ref.series, metric, f"cell {name}", False)
        if ref.cell.tier != run.cell.tier:  # the same questions behind another prefix
            reference = dataclasses.replace(reference, prompt_hashes={})
        rows = read_requests(run.run_dir, run.record, strict=True)
        a, b, _ = aligned(reference, rows, metric)
        result = paired_test(a, b, tolerance, rule.alpha)
    except (BadInput, EngineError, ValueError) as error:
        text = getattr(error, "message", None) or str(error)
        return GridFinding(cell=cell, reference=name, status="error",
                           reasons=[f"no gate: {text}"])
    against: dict[str, object] = {"run_id": reference.run_id, "path": str(reference.run_dir),
                                  "spec": reference.spec, "reused": False}
    measurement = run.record.measurement
    speedup = [] if speedup_max_drop is None else paired_speedup_evidence(
        reference, measurement.speedup if measurement else None, speedup_max_drop,
        rule.alpha, seed)
    judged = decide(Evidence(measurement, run.floors,
                             paired=PairedEvidence(result, rule, against, speedup)))
    found = (judged.paired or {}).get("speedup")
    return GridFinding(cell=cell, reference=name, status=judged.verdict.status,
                       reasons=list(judged.verdict.reasons), result=result.to_dict(),
                       speedup=list(found) if isinstance(found, list) else [])


def _reference_name(grid: Grid, cell: GridCell, concurrency: int) -> str | None:
    ref = reference_cell(grid, cell, concurrency)
    return None if ref is None or ref.name == cell.name else ref.name


def _cell_record(run: CellRun, grid: Grid, concurrency: int,
                 results: Path) -> GridCellRecord:
    measurement = run.record.measurement if run.record else None
    whole = measurement is not None and not measurement.partial
    speedup = measurement.speedup if whole and measurement is not None else None
    return GridCellRecord(
        name=run.cell.name, tier=run.cell.tier.name, category=run.cell.category,
        prefix_caching=run.cell.prefix_caching, concurrency=run.cell.concurrency,
        launch=run.launch, series=run.series,
        run_id=run.record.run_id if run.record else None,
        run_dir=None if run.run_dir is None else os.path.relpath(run.run_dir, results),
        status=run.status, reasons=run.reasons,
        accept_length=measurement.accept_length if whole and measurement else None,
        accept_length_ci=measurement.accept_length_ci if whole and measurement else None,
        n_prompts=measurement.n_prompts if whole and measurement else None,
        speedup_tpot=speedup.tpot if speedup else None,
        speedup_tpot_ci=speedup.tpot_ci if speedup else None,
        speedup_throughput=speedup.throughput if speedup else None,
        speedup_throughput_ci=speedup.throughput_ci if speedup else None,
        reference=_reference_name(grid, run.cell, concurrency))


def _record(loaded: LoadedSuite, grid_id: str, started: datetime, launches: list[LaunchRun],
            gate: GridGate | None, status: VerdictStatus, options: RunOptions,
            reasons: list[str] | None = None) -> GridRecord:
    suite = loaded.suite
    grid = grid_of(loaded)
    concurrency = suite.workload.concurrency
    results = Path(options.results_dir)
    cells = [run for launch in launches for run in launch.cells]
    definitions: dict[str, str] = {}
    for run in cells:
        measurement = run.record.measurement if run.record else None
        if measurement is not None and measurement.speedup is not None:
            definitions.update(measurement.speedup.definitions)
    metric: Literal["server_avg", "per_request", "per_request_mean",
                    "spec_accept_length_mean"] = suite.floors.metric
    return GridRecord(
        grid_id=grid_id, suite=suite.name, engine=suite.engine.kind, started_at=started,
        finished_at=utc_now(), label=options.label, metric=metric,
        definition=METRIC_DEFINITIONS[metric], speedup_definitions=definitions,
        tiers=[GridTierInfo(name=t.name, shots=t.shots, label=t.label) for t in grid.tiers],
        categories=list(grid.categories), prefix_caching=list(grid.prefix_caching),
        concurrency=list(grid.concurrency) or [concurrency], questions=grid.questions,
        launches=[GridLaunch(prefix_caching=launch.caching, flags=launch.flags,
                             cells=[run.cell.name for run in launch.cells],
                             status=_launch_status(launch)) for launch in launches],
        cells=[_cell_record(run, grid, concurrency, results) for run in cells],
        gate=gate, status=status, reasons=reasons or [])


def _launch_status(launch: LaunchRun) -> VerdictStatus:
    if launch.outcome is None:
        return "error"
    return launch.outcome.status
