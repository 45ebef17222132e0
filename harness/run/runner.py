"""One run of a suite, stage by stage: preflight, build, launch, drive, measure, judge, record.

Every exit path (pass, failure, bad input, engine error, Ctrl-C, SIGTERM, a dead or hung
server) kills the server's whole process tree and leaves a run folder with what is known:
`requests.jsonl` (each request appended as it finishes), `server.log`, and `run.json`,
written exactly once, at the end, with the stage the run reached.

A suite with `[[workloads]]` entries runs each entry (the main workload first) on one
server launch: each has its own warm-up, flush and measured phase, and its own run folder
and record (series `<suite>.<entry>`, `harness.suite.series.suite_entries`), judged by its own
floors. The outcome is the worst of the entries'.

Its parts live beside it: `harness.run.outcome` (RunOptions, re-exported here:
`--harness-runner` names a module giving RunOptions and run_suite; RunOutcome),
`entry_run` (an entry's state and its record) and `measuring` (its measured phase).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

from harness import builds
from harness.builds.common import current_step
from harness.errors import (
    BadInput,
    ExitCode,
    HarnessError,
    Interrupted,
    sigterm_as_interrupt,
)
from harness.results.record import (
    SERVER_LOG,
    GPUInfo,
    LaunchInfo,
    RunRecord,
    new_run_id,
    utc_now,
)
from harness.results.writer import create_run_dir
from harness.run import (
    baseline,
    draft_attention,
    dry_run,
    preflight,
    recorded,
    runtime_attention,
    runtime_contract,
)
from harness.run import plan as planning
from harness.run import workload_record as described
from harness.run.attach import measure_attached
from harness.run.entry_run import EntryRun, unexpected_text
from harness.run.heartbeat import heartbeat, last_log_line, say
from harness.run.identity import SERVED_KEY, served
from harness.run.judge import Evidence, decide
from harness.run.launch import LOOPBACK, Server, ServerSpec, free_port
from harness.run.lifeline import end_leftovers, lifeline
from harness.run.measuring import judge_measured, measure_entries, measure_entry, measure_only
from harness.run.outcome import RunOptions as RunOptions
from harness.run.outcome import RunOutcome, combined
from harness.run.plan import ChosenBuild, PreparedEngine
from harness.run.preflight import Fit
from harness.run.schedulers import slurm
from harness.run.schedulers.deployment import NodeLine, checked_lines, node_lines
from harness.run.schedulers.local import LocalNodes, rendezvous
from harness.run.schedulers.slurm import SlurmJob
from harness.secrets import redact_text
from harness.suite.checkpoints import Models
from harness.suite.model import Entry, LoadedSuite, Suite, suite_entries
from harness.workloads import WorkloadPlan, prepare


def _preparing(elapsed: float) -> str:
    step = current_step()
    return (f"preparing the engine: {redact_text(step) if step else 'its environment and models'}"
            f" ({elapsed:.0f} s)")


def _launching(elapsed: float, log: Path) -> str:
    said = last_log_line(log)
    return f"launching ({elapsed:.0f} s): " + (f"log: {said}" if said else "log still empty")


def run_suite(loaded: LoadedSuite, options: RunOptions) -> RunOutcome:
    """Run one suite; user errors raise `HarnessError`, everything else ends in an outcome."""
    planning.check_suite(loaded)  # what `harness validate` checks, before any work
    loaded, chosen = planning.choose_build(loaded, options)
    suite = loaded.suite
    entries = suite_entries(loaded, list(options.entries) if options.entries else None)
    gpus = preflight.gpu_inventory()
    fit = preflight.check_fit(suite.topology, gpus, options.gpu_devices)
    if suite.topology.disaggregation is not None and options.server is None and \
            options.launcher is None and not options.dry_run:
        raise BadInput(f"suite {suite.name}: the harness does not launch a prefill/decode "
                       "split itself (two servers and the engine's router); start it and "
                       "measure it through its router with `harness run SUITE --server URL`,"
                       " or print its lines with --dry-run")
    if options.launcher == "slurm" and not options.dry_run:
        slurm.preflight(suite.topology, options.launcher_options or slurm.SlurmOptions())
    if options.server is not None or options.launcher is not None:
        # the deployment's GPUs are its own (a server someone runs, a scheduler's nodes)
        where = f"the server at {options.server}" if options.server else \
            f"the nodes {options.launcher} gives it"
        fit = preflight.Fit(True, f"{suite.topology.parallel_text()} on {where}")
        gpus = []
    if options.prepare_only:  # the GPUs are the later run's: no fit is asked of this host
        return _prepare_only(suite, options, chosen)
    if options.dry_run:
        return RunOutcome("skipped" if not fit.fits else "pass", ExitCode.PASS,
                          [fit.reason], plan=dry_run.describe(loaded, options, fit, chosen,
                                                               entries))
    if not fit.fits:
        return RunOutcome("skipped", ExitCode.SKIPPED, [fit.reason],
                          plan=dry_run.describe(loaded, options, fit, chosen, entries))
    baseline.check_possible(suite, options)  # [speedup] where no target alone can launch
    for entry in entries:
        baseline.check_possible(entry.loaded.suite, options)
    models = planning.models(suite, options)  # bad input ends here, before a run folder
    if options.server is None:  # an attached server's paths are on its own machine
        planning.check_models(models)
        planning.check_context(entries, models)
    # each entry's data too, before any build or launch: missing data costs seconds
    data = [prepare(entry.loaded.suite.workload) for entry in entries]
    if options.server is None:  # an attached server is never touched
        # what a harness killed on this results folder left (its watchdog killed with it)
        for line in end_leftovers(options.results_dir):
            say(line)
        lifeline().keep_ledger_in(options.results_dir)
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
        verdict = records[0].verdict  # set by _fail_unfinished
        reason = verdict.reasons[0] if verdict is not None and verdict.reasons else "interrupted"
        raise Interrupted(f"{reason}; server stopped, partial record "
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
    except Exception as error:  # a defect of ours, or a library missing
        # the rows measured stay, and every unfinished entry's record says it errored,
        # naming the error: an error outcome (exit 3), never a traceback and no run.json
        if not _fail_unfinished(runs, error):  # recorded before it (e.g. the plot)
            outcome = combined([run.outcome() for run in runs])
            outcome.reasons.append(f"after the run was recorded: {unexpected_text(error)}")
            return outcome
        return combined([run.outcome() for run in runs])


def _prepare_only(suite: Suite, options: RunOptions, chosen: ChosenBuild) -> RunOutcome:
    """`harness run --prepare-only`: the heavy part of a run (the engine's environment, the
    models the harness makes), done ahead so that the run itself only launches; nothing is
    launched and no run folder is made."""
    models = planning.models(suite, options)
    planning.check_models(models)
    with heartbeat(_preparing):
        engine = planning.prepare_engine(suite, options, models, chosen)
    served = engine.models
    lines = [f"engine environment: {engine.python} ({engine.build.engine} "
             f"{engine.build.version or engine.build.spec})"]
    if served is not None:
        lines.append(f"models: target {served.target}, draft {served.draft}")
    return RunOutcome("pass", ExitCode.PASS, lines)


def _new_run(entry: Entry, options: RunOptions) -> EntryRun:
    started, run_id = utc_now(), new_run_id()
    folder = create_run_dir(options.results_dir, entry.series, started, run_id)
    return EntryRun(entry.loaded, options, folder, run_id, started, entry.name)


def _fail_unfinished(runs: list[EntryRun], error: BaseException) -> list[RunRecord]:
    """Error records for the entries not yet finished (the one running keeps its rows)."""
    records = []
    for run in runs:
        if run.record is None:
            records.append(run.failed(error))
        else:
            run.ensure_written()  # a finished record stays as it is
    return records


def _prepare_and_measure(runs: list[EntryRun], models: Models | None, chosen: ChosenBuild,
                         gpus: Sequence[GPUInfo], fit: Fit) -> RunOutcome:
    first = runs[0]
    options = first.options
    suite = first.loaded.suite
    for run in runs:
        run.provenance = recorded.provenance(run.loaded, None, gpus, fit, None)
    if options.server is not None:
        return measure_attached(runs, models, gpus, fit)
    with heartbeat(_preparing):
        engine = planning.prepare_engine(suite, options, models, chosen)
    engine.build.options.update(planning.build_options(suite))
    engine.build.options[SERVED_KEY] = served(engine.models, engine.checkpoints)
    checked = draft_attention.preflight(first.loaded, engine)
    attention = checked.attention
    contract = draft_attention.contract_differences(suite, attention, checked)
    for run in runs:
        run.build = engine.build.model_copy(deep=True)
        # The engine environment's dependency set, kept beside each record.
        if builds.copy_freeze(engine.build.freeze_path, run.run_dir) is not None:
            run.build.freeze_path = builds.FREEZE_FILE
        run.provenance = recorded.provenance(run.loaded, engine, gpus, fit, None)
        run.attention = attention
        run.draft_contract = checked.clause_rows()
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
            recorded.draw_plot(run.run_dir, options.results_dir)
    return combined([run.outcome() for run in runs])


def _topology_lines(run: EntryRun, engine: PreparedEngine, port: int, env: dict[str, str]
                    ) -> list[NodeLine]:
    """A topology's launch lines on this host (every node over 127.0.0.1), once the
    release's own parser has read them (exit 2 with its message where it refuses one); []
    for one node of tensor parallelism alone, which launches as it always has (its lines
    are checked by SGLang's parser in `nox -s sglang_args`)."""
    topology = run.loaded.suite.topology
    if topology.tensor_parallel_only:
        return []  # one process tree: launched as it always has been
    lines = node_lines(engine, LOOPBACK, port, rendezvous(free_port()),
                       node_port=lambda _rank: free_port())
    check = getattr(engine.adapter, "check_release", None)
    if check is not None:
        run.stage = "topology check"
        with heartbeat(lambda elapsed: f"the engine's own parser reads the topology "
                                       f"({elapsed:.0f} s)"):
            check(run.loaded.suite, engine.python, checked_lines(lines), env,
                  engine.build.version)
    return lines


def _slurm_job(run: EntryRun, engine: PreparedEngine, env: dict[str, str]) -> SlurmJob:
    suite = run.loaded.suite
    return slurm.prepare(engine, suite, env, run.run_dir, run.options.launcher_options
                         or slurm.SlurmOptions(),
                         engine.adapter.ready_paths, slurm.commands())


def _measure_on(runs: list[EntryRun], engine: PreparedEngine, plans: list[WorkloadPlan],
                job: SlurmJob) -> None:
    """Measure every entry on a deployment a scheduler starts (`job`: a context manager
    that submits it, waits until it runs, and cancels it on every exit path)."""
    first = runs[0]
    suite = first.loaded.suite
    launch = LaunchInfo(command=[], host="", port=0, launcher="slurm")
    for run in runs:
        run.launch = launch
        run.stage = "launch"
    say(f"submitting {suite.name} to Slurm: script {first.run_dir}")
    try:
        with job:
            launch.launcher = f"slurm job {job.job_id}"
            say(f"Slurm job {job.job_id} runs; waiting for the server")
            with heartbeat(lambda elapsed: _launching(elapsed, job.spec.log_path)):
                launch.ready_after_s = job.wait_ready()
            launch.host, launch.port = job.base_url.split("//", 1)[1].rsplit(":", 1)[0], \
                job.spec.port
            launch.command = [job.tools["sbatch"], str(first.run_dir / job.script_name)]
            say(f"server ready at {job.base_url} after {launch.ready_after_s:.1f} s")
            measure_entries(runs, engine, job, plans)
    finally:
        for run in runs[1:]:
            with contextlib.suppress(OSError):
                (run.run_dir / SERVER_LOG).write_bytes(job.spec.log_path.read_bytes())


def _server(spec: ServerSpec, lines: list[NodeLine], logs: Path) -> Server | LocalNodes:
    """The process tree to launch: one server, or one per node on this host."""
    if len(lines) <= 1:
        return Server(spec)
    return LocalNodes(lines, spec, logs)


def _launch_and_measure(runs: list[EntryRun], engine: PreparedEngine, gpus: Sequence[GPUInfo],
                        fit: Fit) -> None:
    first = runs[0]
    suite = first.loaded.suite
    plans = []
    for run in runs:  # every entry's data before the launch: bad data costs no GPU time
        workload_plan = run.data if run.data is not None else prepare(run.loaded.suite.workload)
        run.planned = sum(len(prompt.turns) for prompt in workload_plan.prompts)
        run.provenance = recorded.provenance(run.loaded, engine, gpus, fit, workload_plan)
        run.workload = described.workload_info(run.loaded.suite, run.entry, workload_plan,
                                               engine)
        plans.append(workload_plan)
    port = free_port()
    env = planning.server_env(suite, fit, engine.facts)
    if runtime_attention.wanted(suite):  # the kernel records what each layer received
        record = first.run_dir / runtime_attention.RECORD_FILE
        env[runtime_attention.RECORD_ENV] = str(record)
        # ... and the stand-ins what reached the draft of every other clause
        clauses = first.run_dir / runtime_contract.RECORD_FILE
        env[runtime_contract.RECORD_ENV] = str(clauses)
        if (path := runtime_attention.recorder_path(suite, env)) is not None:
            env["PYTHONPATH"] = path  # vLLM: its recorder, first on the server's path
        for run in runs:
            run.runtime_record = record
            run.contract_record = clauses if run.draft_contract else None
    lines = _topology_lines(first, engine, port, env)
    if first.options.launcher == "slurm":
        return _measure_on(runs, engine, plans, _slurm_job(first, engine, env))
    command = lines[0].command if lines else engine.command(LOOPBACK, port)
    spec = ServerSpec(command=command, log_path=first.run_dir / SERVER_LOG, port=port,
                      env=env,
                      launch_timeout_s=suite.engine.launch_timeout_s,
                      ready_paths=engine.adapter.ready_paths)
    launch = LaunchInfo(command=recorded.redact_command(command, suite), host=LOOPBACK,
                        port=port)
    if len(lines) > 1:
        launch.node_commands = {line.name: recorded.redact_command(line.command, suite)
                                for line in lines}
    for run in runs:
        run.launch = launch
        run.stage = "launch"
    try:
        with _server(spec, lines, first.run_dir) as server:
            say(f"launching {suite.name}: log {spec.log_path}")
            with heartbeat(lambda elapsed: _launching(elapsed, spec.log_path)):
                launch.ready_after_s = server.wait_ready()
            say(f"server ready after {launch.ready_after_s:.1f} s")
            for run in runs:
                run.stage = "queued"  # waiting for the entries before it
                described.add_chat_template(run.workload, run.loaded.suite, engine)
            for run, workload_plan in zip(runs, plans, strict=True):
                if run.loaded.suite.speedup is None:
                    run.finish(measure_entry(run, engine, server, workload_plan))
                else:  # judged once its target alone is measured too
                    measure_only(run, engine, server, workload_plan)
    finally:
        for run in runs[1:]:  # one server, one log: each record's folder holds it
            with contextlib.suppress(OSError):
                (run.run_dir / SERVER_LOG).write_bytes(spec.log_path.read_bytes())
    # [speedup]: the target alone, back to back, once the speculative server has stopped
    pending = baseline.wanted(runs)
    if pending:
        source = first.options.target_alone_from
        unmatched = pending if source is None else baseline.reuse_target_alone(pending, source)
        if unmatched:
            baseline.measure_target_alone(unmatched, engine,
                                          planning.server_env(suite, fit, engine.facts))
        for run in pending:
            run.finish(judge_measured(run))
