"""One run of a suite, stage by stage: preflight, build, launch, drive, measure, judge, record.

Every exit path (pass, failure, bad input, engine error, Ctrl-C, SIGTERM, a dead or hung
server) kills the server's whole process tree and leaves a run folder with what is known:
`requests.jsonl` (each request appended as it finishes), `server.log`, and `run.json`,
written exactly once, at the end, with the stage the run reached.
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

from harness.errors import BadInput, EngineError, ExitCode, HarnessError, Interrupted
from harness.judge import EXIT_CODES, judge
from harness.launch import LOOPBACK, Server, ServerSpec, free_port
from harness.layout import default_results_dir
from harness.record import (
    SERVER_LOG,
    BuildInfo,
    LaunchInfo,
    LayerRow,
    Measurement,
    Provenance,
    RequestRow,
    RowLog,
    RunRecord,
    SuiteInfo,
    Verdict,
    VerdictStatus,
    create_run_dir,
    new_run_id,
    utc_now,
    write_run,
)
from harness.suite import LoadedSuite, Suite


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


@dataclass
class RunOutcome:
    status: VerdictStatus
    exit_code: ExitCode
    reasons: list[str]
    run_dir: Path | None = None
    record: RunRecord | None = None
    plan: list[str] = field(default_factory=list)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (CI cancelling a job) unwinds like Ctrl-C, so cleanup always runs."""

    def handler(signum: int, _frame: Any) -> None:
        raise Interrupted(f"stopped by signal {signal.Signals(signum).name}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclass
class _Run:
    """What a run has learnt so far; `finish` writes run.json once, whatever happened."""

    loaded: LoadedSuite
    options: RunOptions
    run_dir: Path
    run_id: str
    started: Any
    stage: str = "preparation"
    build: BuildInfo | None = None
    provenance: Provenance | None = None
    launch: LaunchInfo | None = None
    attention: list[LayerRow] | None = None
    measurement: Measurement | None = None
    rows: list[RequestRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    record: RunRecord | None = None  # once written, run.json is never rewritten

    def finish(self, verdict: Verdict) -> RunRecord:
        from harness import plan as planning

        loaded = self.loaded
        verdict.reasons.extend(self.notes)
        record = RunRecord(
            run_id=self.run_id, started_at=self.started, finished_at=utc_now(),
            label=self.options.label,
            suite=SuiteInfo(name=loaded.suite.name, path=str(loaded.path), sha256=loaded.sha256,
                            document=planning.redacted_document(loaded)),
            build=self.build or BuildInfo(engine=loaded.suite.engine.kind,
                                          spec=self.options.sglang),
            provenance=self.provenance or planning.provenance(loaded, None, [], None, None),
            launch=self.launch, attention=self.attention, measurement=self.measurement,
            verdict=verdict, stage=self.stage,
        )
        write_run(self.run_dir, record)
        self.record = record
        return record

    def failed(self, error: BaseException) -> RunRecord:
        from harness.errors import error_text

        if self.record is not None:  # the run was complete (e.g. Ctrl-C while plotting)
            return self.record

        if isinstance(error, HarnessError):
            message = error.message
        elif isinstance(error, KeyboardInterrupt):
            message = "interrupted (SIGINT)"
        else:
            message = error_text(error)
        self._partial_measurement()
        return self.finish(Verdict(status="error", reasons=[f"{self.stage}: {message}"]))

    def _partial_measurement(self) -> None:
        """The requests that finished before the run ended: kept, never a pass."""
        if self.measurement is not None or not self.rows:
            return
        from harness.measure import summarise

        suite = self.loaded.suite
        with contextlib.suppress(HarnessError, ValueError):
            self.measurement = summarise(
                sorted(self.rows, key=lambda r: r.index), suite.floors.metric, 0.0, None,
                suite.workload.seed, planned=suite.workload.questions, partial=True)


def run_suite(loaded: LoadedSuite, options: RunOptions) -> RunOutcome:
    """Run one suite; user errors raise `HarnessError`, everything else ends in an outcome."""
    from harness import plan as planning
    from harness import preflight

    loaded, chosen = planning.choose_build(loaded, options)
    suite = loaded.suite
    gpus = preflight.gpu_inventory()
    fit = preflight.check_fit(suite.topology, gpus, options.gpu_devices)
    if options.dry_run:
        return RunOutcome("skipped" if not fit.fits else "pass", ExitCode.PASS,
                          [fit.reason], plan=planning.describe(loaded, options, fit, chosen))
    if not fit.fits:
        return RunOutcome("skipped", ExitCode.SKIPPED, [fit.reason],
                          plan=planning.describe(loaded, options, fit, chosen))
    models = planning.models(suite, options)  # bad input ends here, before a run folder
    started, run_id = utc_now(), new_run_id()
    run = _Run(loaded, options, create_run_dir(options.results_dir, suite.name, started,
                                               run_id), run_id, started)
    try:
        with sigterm_as_interrupt():
            return _prepare_and_measure(run, models, chosen, gpus, fit)
    except (KeyboardInterrupt, Interrupted) as error:
        if run.record is not None:
            raise Interrupted(f"interrupted after the run was recorded ({run.record.verdict.status}"
                              f"): the record in {run.run_dir} is complete") from None
        record = run.failed(error)
        raise Interrupted(f"{record.verdict.reasons[0]}; server stopped, partial record in "
                          f"{run.run_dir}") from None
    except BadInput as error:
        run.failed(error)
        raise
    except HarnessError as error:
        record = run.failed(error)
        return RunOutcome("error", ExitCode(error.exit_code), record.verdict.reasons,
                          run.run_dir, record)


def _prepare_and_measure(run: _Run, models: Any, chosen: Any, gpus: Any, fit: Any
                         ) -> RunOutcome:
    from harness import build as builds
    from harness import plan as planning

    loaded, options, suite = run.loaded, run.options, run.loaded.suite
    run.provenance = planning.provenance(loaded, None, gpus, fit, None)
    engine = planning.prepare_engine(suite, options, models, chosen)
    run.build = engine.build
    run.build.options.update(planning.build_options(suite))
    # The engine environment's dependency set, kept beside the record.
    if builds.copy_freeze(run.build.freeze_path, run.run_dir) is not None:
        run.build.freeze_path = builds.FREEZE_FILE
    run.provenance = planning.provenance(loaded, engine, gpus, fit, None)
    run.attention = planning.attention_table(loaded, engine)
    contract = planning.contract_differences(suite, run.attention)
    if contract and options.enforce_contract:
        record = run.finish(Verdict(status="fail", reasons=[
            "draft attention contract differs from the suite's expected_layers:", *contract]))
        return RunOutcome("fail", ExitCode.BELOW_FLOOR, record.verdict.reasons, run.run_dir,
                          record)
    if contract:
        # Measured anyway (an A/B of a build known to break the contract): say so.
        run.notes.append("note: draft attention contract differs (not enforced): "
                         + "; ".join(contract))
    verdict = _launch_and_measure(run, engine, gpus, fit)
    record = run.finish(verdict)
    if options.plot:
        planning.draw_plot(run.run_dir, options.results_dir)
    return RunOutcome(verdict.status, EXIT_CODES[verdict.status], record.verdict.reasons,
                      run.run_dir, record)


def _launch_and_measure(run: _Run, engine: Any, gpus: Any, fit: Any) -> Verdict:
    from harness import plan as planning
    from harness import workload as gsm8k
    from harness.measure import summarise

    loaded, options, suite = run.loaded, run.options, run.loaded.suite
    data = gsm8k.load_gsm8k(suite.workload.data)
    prompts = gsm8k.build_prompts(data, suite.workload)
    run.provenance = planning.provenance(loaded, engine, gpus, fit, data)
    port = free_port()
    command = engine.command(LOOPBACK, port)
    spec = ServerSpec(command=command, log_path=run.run_dir / SERVER_LOG, port=port,
                      env=planning.server_env(suite, fit),
                      launch_timeout_s=suite.engine.launch_timeout_s,
                      ready_paths=engine.adapter.ready_paths,
                      secrets=planning.secret_values(suite))
    run.launch = LaunchInfo(command=planning.redact_command(command, suite), host=LOOPBACK,
                            port=port)
    run.stage = "launch"
    with Server(spec) as server, RowLog(run.run_dir) as log:
        _say(f"launching {suite.name}: log {spec.log_path}")
        run.launch.ready_after_s = server.wait_ready()
        _say(f"server ready after {run.launch.ready_after_s:.1f} s; "
             f"{len(prompts)} prompts, concurrency {suite.workload.concurrency}")

        def keep(row: RequestRow) -> None:
            log.append(row)
            run.rows.append(row)

        result, info = asyncio.run(_drive(run, engine, server, prompts, keep))
        run.stage = "recording"
        attention = engine.adapter.attention_from_server(info)
        if run.attention is None and attention:
            run.attention = [LayerRow.model_validate(layer) for layer in attention]
        run.measurement = summarise(result.rows, suite.floors.metric, result.duration_s,
                                    engine.adapter.server_figure(info), suite.workload.seed,
                                    planned=result.planned)
    run.measurement.stopped_early = result.stopped_early
    if options.sequential:
        run.measurement.sequential = {"looks": result.looks, "settled": result.settled_as,
                                      **_rule_settings(suite)}
    return judge(run.measurement, suite.floors,
                 sequential=result.settled_as if options.sequential else None)


def _rule_settings(suite: Suite) -> dict[str, Any]:
    floors, rule = suite.floors, _stop_rule(suite).rule
    return {"alpha": floors.alpha, "beta": floors.beta, "floor": floors.accept_length,
            "metric": floors.metric, "wave": rule.wave,
            # requests in flight: the suite's concurrency, at most one wave
            "in_flight": min(rule.wave, suite.workload.concurrency)}


@dataclass
class _Sequential:
    """The suite's sequential rule on the numerators of its accept-length definition."""

    rule: Any
    metric: str

    def looks(self, max_n: int) -> list[int]:
        return list(self.rule.looks(max_n))

    def decide_rows(self, rows: Sequence[RequestRow]) -> str | None:
        from harness.measure import numerators, steps_of

        return self.rule.decide(numerators(rows, self.metric), steps_of(rows))


def _stop_rule(suite: Suite) -> _Sequential:
    from harness import stats

    floors = suite.floors
    rule = stats.SequentialRule(floor=floors.accept_length, alpha=floors.alpha,
                                beta=floors.beta, max_n=suite.workload.questions,
                                strict=floors.strict)
    return _Sequential(rule, floors.metric)


async def _drive(run: _Run, engine: Any, server: Server, prompts: Sequence[Any],
                 keep: Any) -> tuple[Any, Any]:
    from harness.drive import Driver, Endpoint
    from harness.workload import warmup_prompts

    suite, options = run.loaded.suite, run.options
    endpoint = Endpoint(server.spec.base_url, engine.adapter,
                        engine.adapter.auth_headers(suite),
                        engine.adapter.auth_headers(suite, admin=True), server.death)
    driver = Driver(endpoint, suite.workload)
    run.stage = "settings check"
    mismatches = engine.adapter.settings_mismatches(await driver.server_info(), suite,
                                                    engine.models)
    if mismatches:
        raise EngineError("the server does not run what the suite declares: "
                          + "; ".join(mismatches))
    warm = warmup_prompts(list(prompts), suite.workload.warmup_requests)
    run.stage = "warm-up"
    if warm:
        await driver.warm_up(warm)
    await driver.flush()
    run.stage = "measurement"
    rule = _stop_rule(suite) if options.sequential else None
    with _progress(len(prompts), options.progress) as advance:
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
