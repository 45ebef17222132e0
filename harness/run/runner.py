"""One run of a suite, stage by stage: preflight, build, launch, drive, measure, judge, record.

Every exit path (pass, failure, bad input, engine error, Ctrl-C, SIGTERM, a dead or hung
server) kills the server's whole process tree and leaves a run folder with what is known:
`requests.jsonl` (each request appended as it finishes), `server.log`, and `run.json`,
written exactly once, at the end, with the stage the run reached.

A suite with `[[workloads]]` entries runs each entry (the main workload first) on one
server launch: each has its own warm-up, flush and measured phase, and its own run folder
and record (series `<suite>.<entry>`, `harness.suite.model.suite_entries`), judged by its own
floors. The outcome is the worst of the entries'.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import (
    TERMINATION,
    BadInput,
    EngineError,
    ExitCode,
    HarnessError,
    Interrupted,
    Terminated,
    interruption_text,
)
from harness.results.layout import RUN_FILE, default_results_dir
from harness.results.record import (
    SERVER_LOG,
    BuildInfo,
    LaunchInfo,
    LayerRow,
    Measurement,
    Provenance,
    RequestRow,
    RunRecord,
    RuntimeLayerRow,
    SuiteInfo,
    Verdict,
    VerdictStatus,
    new_run_id,
    utc_now,
)
from harness.results.writer import RowLog, create_run_dir, write_run
from harness.run import runtime_attention
from harness.run.heartbeat import heartbeat
from harness.run.judge import EXIT_CODES, Evidence, decide, judge_entry
from harness.run.launch import LOOPBACK, Server, ServerSpec, free_port
from harness.run.sequential import rule_settings, sequential_rule, sequential_saving_note
from harness.suite.model import Entry, LoadedSuite
from harness.suite.secrets import redact_text, redact_url

SEVERITY = {"pass": 0, "skipped": 1, "fail": 2, "error": 3}


@dataclass
class RunOptions:
    results_dir: Path = field(default_factory=default_results_dir)
    sglang: str | None = None  # build spec (harness.build grammar)
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
    stop_rule: Any = None
    # `harness run --against`: the paired gate's judge (harness.run.pairing.PairedJudge);
    # each entry is also judged against the reference build's run, paired by question.
    pairing: Any = None


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
    """The suite's outcome: the worst entry's status; run_dir and record of the first
    (the main workload); with several entries each reason names its series."""
    if len(outcomes) == 1:
        return outcomes[0]
    worst = max(outcomes, key=lambda o: SEVERITY[o.status])
    reasons = []
    for outcome in outcomes:
        series = outcome.record.suite.name if outcome.record else "?"
        reasons += [f"{series}: {outcome.status.upper()}"]
        reasons += [f"{series}: {reason}" for reason in outcome.reasons]
        if outcome is not outcomes[0] and outcome.run_dir is not None:
            reasons.append(f"{series}: record {outcome.run_dir}")
    return RunOutcome(worst.status, worst.exit_code, reasons, outcomes[0].run_dir,
                      outcomes[0].record, entries=outcomes)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _preparing(elapsed: float) -> str:
    from harness.build.common import current_step

    step = current_step()
    return (f"preparing the engine: {redact_url(step) if step else 'its environment and models'}"
            f" ({elapsed:.0f} s)")


def _launching(elapsed: float, log: Path) -> str:
    from harness.run.heartbeat import last_log_line

    said = last_log_line(log)
    return f"launching ({elapsed:.0f} s): " + (f"log: {said}" if said else "log still empty")


def _driving(run: _Run, elapsed: float, bar: bool) -> str | None:
    if run.stage == "measurement" and bar:
        return None  # the progress bar says it
    done = f", {len(run.rows)}/{run.planned} requests done" if run.stage == "measurement" \
        else ""
    return f"{run.loaded.suite.name}: {run.stage}{done} ({elapsed:.0f} s)"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (CI cancelling a job) unwinds like Ctrl-C, so cleanup always runs."""

    def handler(signum: int, _frame: Any) -> None:
        TERMINATION.signum = signum  # kept: the raise may land where it is swallowed
        raise Terminated(signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        TERMINATION.signum = None


@dataclass
class _Run:
    """What a run has learnt so far; `finish` writes run.json once, whatever happened."""

    loaded: LoadedSuite  # the suite as this entry runs it
    options: RunOptions
    run_dir: Path
    run_id: str
    started: Any
    entry: str | None = None
    stage: str = "preparation"
    planned: int | None = None  # requests the workload plans
    workload: Any = None  # record.WorkloadInfo once the prompts are built
    build: BuildInfo | None = None
    provenance: Provenance | None = None
    launch: LaunchInfo | None = None
    attention: list[LayerRow] | None = None
    attention_runtime: list[RuntimeLayerRow] | None = None  # harness.run.runtime_attention
    runtime_record: Path | None = None  # the file the kernel records its calls in
    measurement: Measurement | None = None
    rows: list[RequestRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    record: RunRecord | None = None  # once written, run.json is never rewritten
    paired: dict[str, Any] | None = None  # the paired gate's finding (RunOptions.pairing)
    stop_rule: Any = None  # the stop rule the measurement ran under, if any
    data: Any = None  # the workload's prompts (workloads.prepare), loaded before any build
    contract: list[str] = field(default_factory=list)  # attention contract differences

    def finish(self, verdict: Verdict) -> RunRecord:
        from harness.run import plan as planning

        loaded = self.loaded
        verdict.reasons.extend(self.notes)
        hidden = planning.secret_values(loaded.suite)  # error texts may quote them
        verdict.reasons[:] = [redact_text(reason, hidden) for reason in verdict.reasons]
        record = RunRecord(
            run_id=self.run_id, started_at=self.started, finished_at=utc_now(),
            label=self.options.label,
            suite=SuiteInfo(name=loaded.suite.name, path=str(loaded.path), sha256=loaded.sha256,
                            document=planning.redacted_document(loaded), entry=self.entry),
            build=self.build or BuildInfo(engine=loaded.suite.engine.kind,
                                          spec=redact_url(self.options.sglang or "") or None),
            provenance=self.provenance or planning.provenance(loaded, None, [], None, None),
            launch=self.launch, attention=self.attention,
            attention_runtime=self.attention_runtime, workload=self.workload,
            measurement=self.measurement, verdict=verdict, stage=self.stage,
            paired=self.paired,
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
        from harness.errors import error_text

        if isinstance(error, HarnessError):
            message = error.message
        elif isinstance(error, KeyboardInterrupt):
            message = interruption_text(error)
        else:
            message = error_text(error)
        self._partial_measurement()
        return self.finish(Verdict(status="error", reasons=[f"{self.stage}: {message}"]))

    def _partial_measurement(self) -> None:
        """The requests that finished before the run ended: kept, never a pass."""
        if self.measurement is not None or not self.rows:
            return
        from harness.metrics.measure import summarise

        suite = self.loaded.suite
        with contextlib.suppress(HarnessError, ValueError):
            self.measurement = summarise(
                sorted(self.rows, key=lambda r: r.index), suite.floors.metric, 0.0, None,
                suite.workload.seed, planned=self.planned, partial=True)


def run_suite(loaded: LoadedSuite, options: RunOptions) -> RunOutcome:
    """Run one suite; user errors raise `HarnessError`, everything else ends in an outcome."""
    from harness.run import dry_run, preflight
    from harness.run import plan as planning
    from harness.suite.model import suite_entries

    planning.check_suite(loaded)  # what `harness validate` checks, before any work
    loaded, chosen = planning.choose_build(loaded, options)
    suite = loaded.suite
    entries = suite_entries(loaded, list(options.entries) if options.entries else None)
    gpus = preflight.gpu_inventory()
    fit = preflight.check_fit(suite.topology, gpus, options.gpu_devices)
    if options.dry_run:
        return RunOutcome("skipped" if not fit.fits else "pass", ExitCode.PASS,
                          [fit.reason], plan=dry_run.describe(loaded, options, fit, chosen,
                                                               entries))
    if not fit.fits:
        return RunOutcome("skipped", ExitCode.SKIPPED, [fit.reason],
                          plan=dry_run.describe(loaded, options, fit, chosen, entries))
    models = planning.models(suite, options)  # bad input ends here, before a run folder
    planning.check_models(models)
    # each entry's data too, before any build or launch: missing data costs seconds
    from harness.workloads import prepare

    data = [prepare(entry.loaded.suite.workload) for entry in entries]
    runs = [_new_run(entry, options) for entry in entries]
    for run, workload_plan in zip(runs, data, strict=True):
        run.data = workload_plan
    try:
        with sigterm_as_interrupt():
            return _prepare_and_measure(runs, models, chosen, gpus, fit)
    except (KeyboardInterrupt, Interrupted) as error:
        records = _fail_unfinished(runs, error)
        if not records:  # e.g. Ctrl-C while the plot was drawn
            raise Interrupted(f"interrupted after the run was recorded: the record in "
                              f"{runs[0].run_dir} is complete") from None
        raise Interrupted(f"{records[0].verdict.reasons[0]}; server stopped, partial record "
                          f"in {runs[0].run_dir}") from None
    except BadInput as error:
        _fail_unfinished(runs, error)
        raise
    except HarnessError as error:
        _fail_unfinished(runs, error)
        outcome = combined([run.outcome() for run in runs])
        if outcome.status == "error":  # the error's own code (5: the version rejects it)
            outcome.exit_code = ExitCode(error.exit_code)
        return outcome


def _new_run(entry: Entry, options: RunOptions) -> _Run:
    started, run_id = utc_now(), new_run_id()
    folder = create_run_dir(options.results_dir, entry.series, started, run_id)
    return _Run(entry.loaded, options, folder, run_id, started, entry.name)


def _fail_unfinished(runs: list[_Run], error: BaseException) -> list[RunRecord]:
    """Error records for the entries not yet finished (the one running keeps its rows)."""
    records = []
    for run in runs:
        if run.record is None:
            records.append(run.failed(error))
        else:
            run.ensure_written()  # a finished record stays as it is
    return records


def _prepare_and_measure(runs: list[_Run], models: Any, chosen: Any, gpus: Any, fit: Any
                         ) -> RunOutcome:
    from harness import build as builds
    from harness.run import plan as planning

    first = runs[0]
    options = first.options
    suite = first.loaded.suite
    for run in runs:
        run.provenance = planning.provenance(run.loaded, None, gpus, fit, None)
    with heartbeat(_preparing):
        engine = planning.prepare_engine(suite, options, models, chosen)
    engine.build.options.update(planning.build_options(suite))
    from harness.run.identity import SERVED_KEY, served

    engine.build.options[SERVED_KEY] = served(engine.models, engine.checkpoints)
    attention = planning.attention_table(first.loaded, engine)
    contract = planning.contract_differences(suite, attention)
    for run in runs:
        run.build = engine.build.model_copy(deep=True)
        # The engine environment's dependency set, kept beside each record.
        if builds.copy_freeze(engine.build.freeze_path, run.run_dir) is not None:
            run.build.freeze_path = builds.FREEZE_FILE
        run.provenance = planning.provenance(run.loaded, engine, gpus, fit, None)
        run.attention = attention
    for run in runs:
        run.contract = list(contract)
    if contract and options.enforce_contract:
        for run in runs:
            run.finish(decide(Evidence(None, run.loaded.suite.floors,
                                       contract=contract)).verdict)
        return combined([run.outcome() for run in runs])
    # Not enforced (an A/B of a build known to break the contract, a reference build):
    # measured anyway, and the judge still records the contract's failure.
    _launch_and_measure(runs, engine, gpus, fit)
    if options.plot:
        for run in runs:
            planning.draw_plot(run.run_dir, options.results_dir)
    return combined([run.outcome() for run in runs])


def _launch_and_measure(runs: list[_Run], engine: Any, gpus: Any, fit: Any) -> None:
    from harness.run import plan as planning
    from harness.run import workload_record as described
    from harness.workloads import prepare

    first = runs[0]
    suite = first.loaded.suite
    plans = []
    for run in runs:  # every entry's data before the launch: bad data costs no GPU time
        workload_plan = run.data if run.data is not None else prepare(run.loaded.suite.workload)
        run.planned = sum(len(prompt.turns) for prompt in workload_plan.prompts)
        run.provenance = planning.provenance(run.loaded, engine, gpus, fit, workload_plan)
        run.workload = described.workload_info(run.loaded.suite, run.entry, workload_plan,
                                               engine)
        plans.append(workload_plan)
    port = free_port()
    command = engine.command(LOOPBACK, port)
    env = planning.server_env(suite, fit, engine.facts)
    if runtime_attention.wanted(suite):  # the kernel records what each layer received
        record = first.run_dir / runtime_attention.RECORD_FILE
        env[runtime_attention.RECORD_ENV] = str(record)
        for run in runs:
            run.runtime_record = record
    spec = ServerSpec(command=command, log_path=first.run_dir / SERVER_LOG, port=port,
                      env=env,
                      launch_timeout_s=suite.engine.launch_timeout_s,
                      ready_paths=engine.adapter.ready_paths,
                      secrets=planning.secret_values(suite))
    launch = LaunchInfo(command=planning.redact_command(command, suite), host=LOOPBACK,
                        port=port)
    for run in runs:
        run.launch = launch
        run.stage = "launch"
    try:
        with Server(spec) as server:
            _say(f"launching {suite.name}: log {spec.log_path}")
            with heartbeat(lambda elapsed: _launching(elapsed, spec.log_path)):
                launch.ready_after_s = server.wait_ready()
            _say(f"server ready after {launch.ready_after_s:.1f} s")
            for run in runs:
                run.stage = "queued"  # waiting for the entries before it
                described.add_chat_template(run.workload, run.loaded.suite, engine)
            for run, workload_plan in zip(runs, plans, strict=True):
                verdict = _measure_entry(run, engine, server, workload_plan)
                run.finish(verdict)
    finally:
        for run in runs[1:]:  # one server, one log: each record's folder holds it
            with contextlib.suppress(OSError):
                (run.run_dir / SERVER_LOG).write_bytes(spec.log_path.read_bytes())


def _measure_entry(run: _Run, engine: Any, server: Server, workload_plan: Any) -> Verdict:
    from harness.metrics.measure import summarise
    from harness.run.workload_record import rendered_sha256

    options, suite = run.options, run.loaded.suite
    prompts = workload_plan.prompts
    _say(f"{suite.name}: {len(prompts)} prompts ({run.planned} requests), "
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
    runtime_differences = []
    if run.runtime_record is not None:
        run.attention_runtime, runtime_differences = runtime_attention.check(
            run.runtime_record, run.attention)
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
            "dispatch": "continuous", "cancelled": result.cancelled, **settings}
        if (note := sequential_saving_note(suite.workload.concurrency, len(prompts))):
            run.notes.append(note)
        if custom is None:
            run.measurement.sequential["floors"] = dict(rule_decisions(run))
    judged = judge_entry(suite, options, run.measurement, result.rows, run.stop_rule,
                         run.contract, run.workload.prompts_sha256 if run.workload else None,
                         runtime_differences)
    run.paired = judged.paired
    return judged.verdict


def rule_decisions(run: Any) -> dict[str, str | None]:
    """Each floor's decision at the stop (`run/sequential.FloorsRule`), {} without one."""
    return dict(getattr(getattr(run, "stop_rule", None), "decisions", None) or {})


def _check_window(adapter: Any, result: Any, info: Any, measurement: Any) -> None:
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


async def _drive(run: _Run, engine: Any, server: Server, workload_plan: Any,
                 keep: Any) -> tuple[Any, Any]:
    from harness.run.drive import Driver, Endpoint
    from harness.workloads import warmup_prompts

    suite, options = run.loaded.suite, run.options
    prompts = workload_plan.prompts
    endpoint = Endpoint(server.spec.base_url, engine.adapter,
                        engine.adapter.auth_headers(suite),
                        engine.adapter.auth_headers(suite, admin=True), server.death)
    driver = Driver(endpoint, suite.workload, workload_plan.stop)
    run.stage = "settings check"
    info = await driver.server_info()
    mismatches = engine.adapter.settings_mismatches(info, suite, engine.models)
    # an adapter without the method (the reference engine, DFlash only) makes 1 per step
    per_step = getattr(engine.adapter, "non_draft_tokens_per_step", None)
    driver.non_draft_tokens = per_step(info, suite) if per_step else 1
    if mismatches:
        raise EngineError("the server does not run what the suite declares: "
                          + "; ".join(mismatches))
    warm = warmup_prompts(list(prompts), suite.workload.warmup_requests)
    run.stage = "warm-up"
    if warm:
        await driver.warm_up(warm)
    await driver.flush()
    run.stage = "measurement"
    rule = sequential_rule(suite, options, len(prompts))
    run.stop_rule = rule
    if rule is not None:
        # every look sees each category in proportion (seeded, the same for every build)
        from harness.run.sequential import stratified_order

        prompts = stratified_order(prompts, suite.workload.seed)
    with _progress(run.planned or len(prompts), options.progress) as advance:
        def on_row(row: RequestRow) -> None:
            keep(row)
            if advance is not None:
                advance()

        result = await driver.measure(prompts, on_row, rule)
    return result, await driver.server_info()


@contextlib.contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Any]:
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task("requests", total=total)
        yield lambda: bar.advance(task)
