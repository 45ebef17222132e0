"""One run of a suite, stage by stage: preflight, build, launch, drive, measure, judge, record.

Every exit path (pass, failure, engine error, Ctrl-C, SIGTERM, timeout)
kills the server's whole process tree and leaves a run folder with what is
known: `run.json`, `requests.jsonl` and `server.log`.
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

from harness.errors import EngineError, ExitCode, HarnessError, Interrupted
from harness.judge import EXIT_CODES, judge
from harness.launch import LOOPBACK, Server, ServerSpec, free_port
from harness.record import (
    SERVER_LOG,
    BuildInfo,
    LaunchInfo,
    LayerRow,
    Measurement,
    RequestRow,
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

RESULTS_DIR = Path("results")


@dataclass
class RunOptions:
    results_dir: Path = RESULTS_DIR
    sglang: str | None = None
    patch: Path | None = None
    dry_run: bool = False
    gpu_devices: Sequence[int] | None = None  # devices this run may use (pytest plugin leases)
    engine_python: str | None = None
    label: str | None = None
    plot: bool = True
    sequential: bool = False
    progress: bool = True
    enforce_contract: bool = True  # False: record contract differences, measure anyway


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


def _record(
    loaded: LoadedSuite, build: BuildInfo, run_id: str, started: Any, verdict: Verdict,
    **parts: Any,
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        started_at=started,
        finished_at=utc_now(),
        suite=SuiteInfo(name=loaded.suite.name, path=str(loaded.path), sha256=loaded.sha256,
                        document=loaded.document),
        build=build,
        verdict=verdict,
        **parts,
    )


def _stop_rule(suite: Suite) -> Any:
    from harness import stats

    return stats.SequentialRule(floor=suite.floors.accept_length, alpha=suite.floors.alpha,
                                beta=suite.floors.beta, max_n=suite.workload.questions,
                                strict=suite.floors.strict)


def _confidence_interval(rows: Sequence[RequestRow], seed: int) -> tuple[float, float] | None:
    from harness import stats

    if len(rows) < 2:
        return None
    return stats.bootstrap_ci([r.completion_tokens for r in rows],
                              [r.verify_steps for r in rows], seed=seed)


async def _drive(
    base_url: str, prompts: Sequence[Any], suite: Suite, options: RunOptions
) -> tuple[Any, Any]:
    from harness import drive
    from harness import plan as planning
    from harness.workload import warmup_prompts

    workload = suite.workload
    mismatches = planning.server_mismatches(await drive.server_info(base_url), suite)
    if mismatches:
        raise EngineError("the server does not run what the suite declares: "
                          + "; ".join(mismatches))
    warm = warmup_prompts(list(prompts), workload.warmup_requests)
    if warm:
        await drive.warm_up(base_url, warm, workload)
    await drive.flush_cache(base_url)
    rule = _stop_rule(suite) if options.sequential else None
    with _progress(len(prompts), options.progress) as advance:
        result = await drive.measure_phase(base_url, prompts, workload, advance, rule)
    return result, await drive.server_info(base_url)


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


def run_suite(loaded: LoadedSuite, options: RunOptions) -> RunOutcome:
    """Run one suite; user errors raise `HarnessError`, everything else ends in an outcome."""
    from harness import plan as planning
    from harness import preflight

    loaded = planning.with_reference_build(loaded, options.sglang)
    suite = loaded.suite
    gpus = preflight.gpu_inventory()
    fit = preflight.check_fit(suite.topology, gpus, options.gpu_devices)
    if options.dry_run:
        return RunOutcome("skipped" if not fit.fits else "pass", ExitCode.PASS,
                          [fit.reason], plan=planning.describe(loaded, options, fit))
    if not fit.fits:
        return RunOutcome("skipped", ExitCode.SKIPPED, [fit.reason],
                          plan=planning.describe(loaded, options, fit))

    started, run_id = utc_now(), new_run_id()
    run_dir = create_run_dir(options.results_dir, suite.name, started, run_id)
    with sigterm_as_interrupt():
        engine = planning.prepare_engine(suite, options)
        build = engine.build
        build.options.update(planning.build_options(suite))
        attention = planning.attention_table(loaded, engine)
        contract = planning.contract_differences(suite, attention)
        if contract and options.enforce_contract:
            verdict = Verdict(status="fail", reasons=[
                "draft attention contract differs from the suite's expected_layers:", *contract])
            record = _record(loaded, build, run_id, started, verdict, label=options.label,
                             attention=attention,
                             provenance=planning.provenance(loaded, engine, gpus, fit, None))
            write_run(run_dir, record)
            return RunOutcome("fail", ExitCode.BELOW_FLOOR, verdict.reasons, run_dir, record)
        outcome = _launch_and_measure(loaded, options, engine, attention, gpus, fit,
                                      run_dir, run_id, started)
    if contract and outcome.record is not None:
        # Measured anyway (an A/B of a build known to break the contract): say so.
        outcome.record.verdict.reasons.append(
            "note: draft attention contract differs (not enforced): " + "; ".join(contract))
        write_run(run_dir, outcome.record)
        outcome.reasons = outcome.record.verdict.reasons
    return outcome


def _launch_and_measure(
    loaded: LoadedSuite, options: RunOptions, engine: Any, attention: list[LayerRow] | None,
    gpus: Any, fit: Any, run_dir: Path, run_id: str, started: Any,
) -> RunOutcome:
    from harness import plan as planning
    from harness import workload as gsm8k
    from harness.measure import server_accept_length, summarise

    suite = loaded.suite
    data = gsm8k.load_gsm8k(suite.workload.data)
    prompts = gsm8k.build_prompts(data, suite.workload)
    port = free_port()
    command = engine.command(LOOPBACK, port)
    env = planning.server_env(suite, fit)
    spec = ServerSpec(command=command, log_path=run_dir / SERVER_LOG, port=port, env=env,
                      launch_timeout_s=suite.engine.launch_timeout_s)
    provenance = planning.provenance(loaded, engine, gpus, fit, data)
    launch = LaunchInfo(command=command, host=LOOPBACK, port=port)
    rows: list[RequestRow] = []
    measurement: Measurement | None = None
    server = Server(spec)
    try:
        with server:
            _say(f"launching {suite.name}: log {spec.log_path}")
            launch.ready_after_s = server.wait_ready()
            _say(f"server ready after {launch.ready_after_s:.1f} s; "
                 f"{len(prompts)} prompts, concurrency {suite.workload.concurrency}")
            result, info = asyncio.run(_drive(spec.base_url, prompts, suite, options))
            rows = result.rows
            server_figure = server_accept_length(info)
            attention = attention or planning.attention_from_server(info)
            measurement = summarise(rows, result.duration_s, server_figure,
                                    _confidence_interval(rows, suite.workload.seed))
            measurement.stopped_early = result.stopped_early
        verdict = judge(measurement, suite.floors)
        if result.stopped_early and result.settled_as in ("pass", "fail"):
            # The sequential rule, not the point estimate, carries the stated error rates.
            verdict = Verdict(status=result.settled_as, reasons=[
                f"sequential stopping settled {result.settled_as} after {len(rows)} of "
                f"{len(prompts)} requests (alpha {suite.floors.alpha:g}, "
                f"beta {suite.floors.beta:g})", *verdict.reasons])
    except (HarnessError, KeyboardInterrupt) as error:
        if isinstance(error, HarnessError) and not isinstance(error, EngineError | Interrupted):
            raise
        message = error.message if isinstance(error, HarnessError) else "interrupted (SIGINT)"
        verdict = Verdict(status="error", reasons=[message])
        record = _record(loaded, engine.build, run_id, started, verdict, label=options.label,
                         provenance=provenance, launch=launch, attention=attention,
                         measurement=measurement)
        write_run(run_dir, record, rows)
        if isinstance(error, KeyboardInterrupt | Interrupted):
            raise Interrupted(f"{message}; server stopped, partial record in {run_dir}") from None
        return RunOutcome("error", ExitCode.ENGINE_ERROR, verdict.reasons, run_dir, record)
    record = _record(loaded, engine.build, run_id, started, verdict, label=options.label,
                     provenance=provenance, launch=launch, attention=attention,
                     measurement=measurement)
    write_run(run_dir, record, rows)
    if options.plot:
        planning.draw_plot(run_dir, options.results_dir)
    return RunOutcome(verdict.status, EXIT_CODES[verdict.status], verdict.reasons, run_dir, record)
