"""One workload entry's measured phase on a running server: the settings check, warm-up,
flush and measured requests (under a stop rule with `--sequential` or a caller's rule),
then the figures cross-checked against the server's and the entry judged by its floors.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from harness.errors import TERMINATION, EngineError, Terminated
from harness.metrics import ranks
from harness.metrics.latency import summarise_latency
from harness.metrics.measure import DISAGREEMENT_TOLERANCE, summarise
from harness.results.record import LayerRow, Measurement, RequestRow, Verdict
from harness.results.writer import RowLog
from harness.run import runtime_attention, runtime_contract
from harness.run.drive import Driver, Endpoint
from harness.run.entry_run import EntryRun
from harness.run.heartbeat import heartbeat, say
from harness.run.judge import judge_entry
from harness.run.launch import RunningServer
from harness.run.sequential import (
    rule_settings,
    sequential_rule,
    sequential_saving_note,
    stratified_order,
)
from harness.run.workload_record import add_chat_template, rendered_sha256
from harness.workloads import WorkloadPlan

if TYPE_CHECKING:
    from harness.engines.interface import EngineAdapter
    from harness.run.drive import DriveResult
    from harness.run.plan import ServedEngine
    from harness.suite.serving import Topology


def measure_entries(runs: Sequence[EntryRun], engine: ServedEngine, server: RunningServer,
                    plans: Sequence[WorkloadPlan]) -> None:
    """Every entry queued on `server` (its chat template recorded now the model is loaded),
    then each measured and judged in turn (`measure_entry`), its verdict kept."""
    for run in runs:
        run.stage = "queued"  # waiting for the entries before it
        add_chat_template(run.workload, run.loaded.suite, engine)
    for run, workload_plan in zip(runs, plans, strict=True):
        run.finish(measure_entry(run, engine, server, workload_plan))


def measure_entry(run: EntryRun, engine: ServedEngine, server: RunningServer,
                  workload_plan: WorkloadPlan) -> Verdict:
    """Drive, measure and judge one entry on `server`; the caller writes its record."""
    measure_only(run, engine, server, workload_plan)
    return judge_measured(run)


def judge_measured(run: EntryRun) -> Verdict:
    """The verdict of an entry `measure_only` measured (and, with [speedup], whose target
    alone `harness.run.baseline` measured after it), by the one judge."""
    rows = sorted(run.rows, key=lambda row: row.index)  # submission order, as measured
    judged = judge_entry(run.loaded.suite, run.options, run.measurement, rows,
                         run.stop_rule, run.contract,
                         run.workload.prompts_sha256 if run.workload else None,
                         run.runtime_differences)
    run.paired = judged.paired
    return judged.verdict


def measure_only(run: EntryRun, engine: ServedEngine, server: RunningServer,
                 workload_plan: WorkloadPlan) -> None:
    """Drive and measure one entry on `server`, every figure recorded on `run`, not judged."""
    options, suite = run.options, run.loaded.suite
    prompts = workload_plan.prompts
    say(f"{suite.name}: {len(prompts)} prompts ({run.planned} requests), "
         f"concurrency {suite.workload.concurrency}")
    # run.rows and requests.jsonl: one list and its log, the same rows whenever a signal lands
    with RowLog(run.run_dir, run.rows) as log:
        # the bar shows the measured phase on a terminal; the beat covers the rest
        bar = options.progress and sys.stderr.isatty()
        with heartbeat(lambda elapsed: _driving(run, elapsed, bar)):
            result, info = asyncio.run(_drive(run, engine, server, workload_plan, log.append))
        if TERMINATION.signum is not None:  # a SIGTERM whose raise was swallowed
            raise Terminated(TERMINATION.signum)
        run.stage = "recording"
        attention = engine.adapter.attention_from_server(info)
        if run.attention is None and attention:
            run.attention = [LayerRow.model_validate(layer) for layer in attention]
        run.measurement = summarise(result.rows, suite.floors.metric, result.duration_s,
                                    engine.adapter.server_figure(info), suite.workload.seed,
                                    planned=result.planned)
        run.measurement.latency = summarise_latency(result.rows, result.duration_s,
                                                    suite.workload.concurrency,
                                                    suite.workload.seed)
        run.notes.extend(per_rank(run.measurement, result.rows, suite.topology,
                                  engine.adapter, info))
    runtime_differences: list[str] = []
    if run.runtime_record is not None:
        run.attention_runtime, runtime_differences = runtime_attention.check(
            run.runtime_record, run.attention)
        # and against the suite's expected_layers: measured anyway, a build whose kernels
        # received other attention still fails naming the layer, from the run itself
        run.contract = [*run.contract, *runtime_attention.expected_differences(
            run.loaded.suite, run.attention_runtime)]
    if run.contract_record is not None:
        run.draft_contract_runtime, more = runtime_contract.check(run.contract_record,
                                                                  run.draft_contract)
        runtime_differences = [*runtime_differences, *more]
        # what reached the model, against the suite's expectation too: a build measured
        # anyway (--no-enforce-contract) still fails naming the clause, from the run itself
        run.contract = [*run.contract, *runtime_contract.expected_differences(
            run.loaded.suite, run.draft_contract, run.draft_contract_runtime)]
    assert run.workload is not None  # recorded with the prompts, before any measuring
    run.workload.rendered_sha256 = rendered_sha256(result.rows, len(prompts))
    run.measurement.stopped_early = result.stopped_early
    _check_window(engine.adapter, result, info, run.measurement)
    custom = options.stop_rule  # a caller's rule (bisect): its decision is not the verdict's
    if options.sequential or custom is not None:
        settings = (custom.settings() if custom is not None
                    else rule_settings(suite, len(prompts), run.stop_rule))
        run.measurement.sequential = {
            "looks": result.looks, "settled": result.settled_as,
            "order": f"stratified by category, seeded {suite.workload.seed} "
                     "(one category: the data's order)",
            # continuous dispatch (harness.run.drive.Driver.measure): questions in flight
            # when the rule settled were cancelled; every finished row is kept
            "dispatch": "continuous", "cancelled": result.cancelled,
            # what harness.run.dispatch was given, whichever rule ran (bisect's too)
            "in_flight": suite.workload.concurrency,
            "in_flight_past_look": (suite.workload.sequential_in_flight
                                    or suite.workload.concurrency), **settings}
        if (note := sequential_saving_note(suite.workload.concurrency, len(prompts),
                                           suite.workload.sequential_in_flight)):
            run.notes.append(note)
        if custom is None:
            run.measurement.sequential["floors"] = dict(rule_decisions(run))
    run.runtime_differences = list(runtime_differences)


def per_rank(measurement: Measurement, rows: Sequence[RequestRow], topology: Topology,
             adapter: EngineAdapter, info: object) -> list[str]:
    """A data-parallel topology's figures per DP rank and per node (harness.metrics.ranks),
    each rank cross-checked against its own state in `/server_info`; the server's pooled
    figure is then theirs weighted by verify steps. Returns the notes for the verdict."""
    if topology.dp_ranks < 2:
        return []
    per_rank = ranks.by_rank(rows, topology.dp_ranks, topology.node_of_rank)
    read = getattr(adapter, "server_rank_states", None)
    measurement.server_rank_match = ranks.match_server(per_rank, read(info) if read else None)
    measurement.per_rank = per_rank
    measurement.per_node = ranks.by_node(rows, per_rank) if topology.nnodes > 1 else None
    pooled = ranks.pooled_server_figure(per_rank) if measurement.server_rank_match else None
    measurement.server_reported_accept_length = pooled
    own = measurement.accept_length_server_avg
    measurement.server_disagreement = None if pooled is None or own is None else \
        (pooled - own) / own
    return [*ranks.summary(measurement),
            *ranks.disagreements(per_rank, DISAGREEMENT_TOLERANCE)]


def rule_decisions(run: EntryRun) -> dict[str, str | None]:
    """Each floor's decision at the stop (`run/sequential.FloorsRule`), {} without one."""
    return dict(getattr(getattr(run, "stop_rule", None), "decisions", None) or {})


def _check_window(adapter: EngineAdapter, result: DriveResult, info: object,
                  measurement: Measurement) -> None:
    """An engine whose server-wide counters cover exactly the measured window (vLLM):
    their rise must equal the responses' own counts, or neither figure can be trusted."""
    check = getattr(adapter, "window_mismatches", None)
    if check is None:
        return
    rates = getattr(adapter, "position_rates", lambda _: None)(info)
    measurement.server_per_position_acceptance = rates
    if result.stopped_early:  # requests cut off mid-way leave counts no response has
        return
    steps = sum(row.verify_steps for row in result.rows)
    accepted = sum(row.correct_drafts or 0 for row in result.rows)
    problems = check(steps, accepted, info)
    if problems:
        raise EngineError("the server's counters disagree with its responses: "
                          + "; ".join(problems))
    # Stop strings the harness applied (vLLM): the engine generated past them, so its own
    # figure covers more than the measured requests and is no cross-check of theirs.
    beyond = getattr(adapter, "window_beyond_rows", None)
    if beyond is not None and beyond(steps, accepted, info):
        measurement.server_reported_accept_length = None
        measurement.server_disagreement = None
        measurement.server_per_position_acceptance = None


async def _drive(run: EntryRun, engine: ServedEngine, server: RunningServer,
                 workload_plan: WorkloadPlan, keep: Callable[[RequestRow], None]
                 ) -> tuple[DriveResult, object]:
    suite, options = run.loaded.suite, run.options
    prompts = workload_plan.prompts
    endpoint = Endpoint(server.base_url, engine.adapter,
                        engine.adapter.auth_headers(suite),
                        engine.adapter.auth_headers(suite, admin=True), server.death)
    driver = Driver(endpoint, suite.workload, workload_plan.stop)
    run.stage = "settings check"
    info = await driver.server_info()
    mismatches = engine.adapter.settings_mismatches(info, suite, engine.models)
    # an adapter without the method (the reference engine, DFlash only) makes 1 per step
    per_step = getattr(engine.adapter, "non_draft_tokens_per_step", None)
    driver.non_draft_tokens = per_step(info, suite) if per_step else 1
    driver.check_streaming(info)
    if driver.unstreamed is not None:
        say(f"{suite.name}: {driver.unstreamed}")
    if mismatches:
        raise EngineError("the server does not run what the suite declares: "
                          + "; ".join(mismatches))
    run.stage = "warm-up"
    await driver.warm_up_then_flush(prompts)
    run.stage = "measurement"
    if options.soak_s is not None:  # harness soak: the prompts over and over, for a time
        with _progress(None, options.progress) as advance:  # no total: a time
            def on_soak_row(row: RequestRow) -> None:
                keep(row)
                if advance is not None:
                    advance()

            soaked = await driver.measure_for(prompts, options.soak_s, on_soak_row)
        return soaked, await driver.server_info()
    rule = sequential_rule(suite, options, len(prompts))
    run.stop_rule = rule
    if rule is not None:
        # every look sees each category in proportion (seeded, the same for every build)
        prompts = stratified_order(prompts, suite.workload.seed)
    with _progress(run.planned or len(prompts), options.progress) as advance:
        def on_row(row: RequestRow) -> None:
            keep(row)
            if advance is not None:
                advance()

        result = await driver.measure(prompts, on_row, rule)
    return result, await driver.server_info()


@contextlib.contextmanager
def _progress(total: int | None, enabled: bool) -> Iterator[Callable[[], None] | None]:
    if not enabled:
        yield None
        return
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("requests", total=total)
        yield lambda: bar.advance(task)


def _driving(run: EntryRun, elapsed: float, bar: bool) -> str | None:
    if run.stage == "measurement" and bar:
        return None  # the progress bar says it
    planned = "" if run.options.soak_s is not None else f"/{run.planned}"  # a soak: a time
    done = f", {len(run.rows)}{planned} requests done" if run.stage == "measurement" \
        else ""
    return f"{run.loaded.suite.name}: {run.stage}{done} ({elapsed:.0f} s)"
