"""The target alone ([speedup]): the suite's target served by the same build on the same
host without speculation, measured right after the speculative run on the prompts it
answered, with the same sampling, and paired with it by question (harness.metrics.speedup).

Its launch line is the engine adapter's (`target_alone_command`: the speculative line
less its speculative flags); its answers are read by the adapter's parser without spec
counts (`parse_target_alone`), and the server is checked to run no speculation
(`target_alone_mismatches`). Its rows go to `target-alone.jsonl` as they finish, its
server's log to `target-alone.log`, its summary to the record's `target_alone`.

A target-alone run that fails (its server dies or never answers, a request fails) is
named in the record and the verdict; the speculative run's rows and figures are kept,
and its speedup figures are missing, which the judge never passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from harness.engines.interface import (
    EngineAdapter,
    ParsedResponse,
    Placement,
    StreamAssembler,
)
from harness.errors import BadInput, EngineError, HarnessError, Interrupted
from harness.metrics.latency import summarise_latency
from harness.metrics.speedup import DEFINITIONS, reused_pairing, speedup
from harness.results.layout import TARGET_ALONE_FILE, TARGET_ALONE_LOG
from harness.results.readers import read_run, read_target_alone
from harness.results.record import LaunchInfo, RunRecord, Speedup, TargetAloneInfo
from harness.results.writer import RowLog
from harness.run.drive import Driver, DriveResult, Endpoint
from harness.run.entry_run import EntryRun
from harness.run.heartbeat import heartbeat, say
from harness.run.launch import LOOPBACK, Server, ServerSpec, free_port
from harness.run.recorded import redact_command
from harness.workloads import Prompt

if TYPE_CHECKING:
    from pathlib import Path

    from harness.results.record import RequestRow
    from harness.run.outcome import RunOptions
    from harness.run.plan import PreparedEngine
    from harness.suite.checkpoints import Models
    from harness.suite.model import Suite

NOT_LAUNCHED = ("the harness launches the target alone itself, on the host and build it "
                "launched the speculative server with")


def wanted(runs: Sequence[EntryRun]) -> list[EntryRun]:
    """The entries whose suite declares [speedup]."""
    return [run for run in runs if run.loaded.suite.speedup is not None]


def check_possible(suite: Suite, options: RunOptions, adapter: EngineAdapter | None = None
                   ) -> None:
    """BadInput, before anything runs, where no target-alone run can be launched: a server
    attached with --server or a scheduler's deployment (neither is the harness's to
    relaunch), a topology of several launch lines, or an engine without the line."""
    if suite.speedup is None or options.dry_run:
        return
    where = f"{suite.name}: [speedup] baseline = {suite.speedup.baseline!r}"
    if options.server is not None:
        raise BadInput(f"suite {where} cannot be measured against a server attached with "
                       f"--server: {NOT_LAUNCHED}; run it without --server")
    if options.launcher is not None:
        raise BadInput(f"suite {where} cannot be measured on a {options.launcher} "
                       f"deployment: {NOT_LAUNCHED}")
    if not suite.topology.tensor_parallel_only:
        raise BadInput(f"suite {where}: the target alone is launched as one server; this "
                       f"topology ({suite.topology.parallel_text()}) takes several")
    if adapter is not None and not hasattr(adapter, "target_alone_command"):
        raise BadInput(f"suite {where}: the {suite.engine.kind} adapter has no launch line "
                       "without speculation")


class TargetAloneAdapter:
    """An engine adapter as the driver sees it for the target alone: its answers read
    without spec counts, the server checked to run no speculation, the rest the engine's.

    Every member of the adapter protocol is forwarded by name, so it is an `EngineAdapter`;
    the engine's optional members the driver looks for (`read_server_info`, `cut_at_stop`)
    are None where the engine has none, as the driver reads an adapter without them."""

    def __init__(self, adapter: EngineAdapter) -> None:
        self.inner = adapter
        self.kind = adapter.kind
        self.ready_paths = adapter.ready_paths
        self.generate_path = adapter.generate_path
        self.chat_path = adapter.chat_path
        self.flush_path = adapter.flush_path
        self.server_info_paths = adapter.server_info_paths
        self.reserved_flags = adapter.reserved_flags
        self.secret_flags = adapter.secret_flags
        self.identity_paths = adapter.identity_paths
        self.liveness_path = adapter.liveness_path
        # an engine that reads its own figures (vLLM: /metrics over a window)
        self.read_server_info: Callable[..., Awaitable[object]] | None = getattr(
            adapter, "read_server_info", None)
        # an engine whose stop strings the harness applies (vLLM): the target alone's
        # answer has no verify step to place the stop on
        inner_cut = getattr(adapter, "cut_at_stop", None)
        self.cut_at_stop: Callable[..., ParsedResponse] | None = (
            None if inner_cut is None else functools.partial(inner_cut, speculative=False))

    def parse_generate(self, payload: object, where: str) -> ParsedResponse:
        return self.inner.parse_target_alone(payload, where, chat=False)

    def parse_chat(self, payload: object, where: str) -> ParsedResponse:
        return self.inner.parse_target_alone(payload, where, chat=True)

    def settings_mismatches(self, info: object, suite: Suite,
                            models: Models | None = None) -> list[str]:
        return list(self.inner.target_alone_mismatches(info))

    def non_draft_tokens_per_step(self, info: object, suite: Suite) -> int:
        return 1  # no verify step: every token is the target's own

    # The rest is the engine's own.
    def check_flags(self, suite: Suite) -> None:
        self.inner.check_flags(suite)

    def launch_command(self, suite: Suite, python: str, host: str, port: int,
                       models: Models | None = None,
                       checkpoints: tuple[Path, Path] | None = None,
                       placement: Placement | None = None) -> list[str]:
        return self.inner.launch_command(suite, python, host, port, models, checkpoints,
                                         placement)

    def target_alone_command(self, command: Sequence[str]) -> list[str]:
        return self.inner.target_alone_command(command)

    def target_alone_mismatches(self, info: object) -> list[str]:
        return self.inner.target_alone_mismatches(info)

    def parse_target_alone(self, payload: object, where: str, chat: bool) -> ParsedResponse:
        return self.inner.parse_target_alone(payload, where, chat)

    def generate_body(self, text: str, params: Mapping[str, object],
                      rid: str) -> dict[str, object]:
        return self.inner.generate_body(text, params, rid)

    def chat_body(self, messages: Sequence[Mapping[str, str]], params: Mapping[str, object],
                  rid: str, template_kwargs: Mapping[str, object]) -> dict[str, object]:
        return self.inner.chat_body(messages, params, rid, template_kwargs)

    def stream_body(self, body: Mapping[str, object], chat: bool) -> dict[str, object]:
        return self.inner.stream_body(body, chat)

    def stream_assembler(self, chat: bool) -> StreamAssembler:
        return self.inner.stream_assembler(chat)

    def stream_refusal(self, info: object, chat: bool) -> str | None:
        return self.inner.stream_refusal(info, chat)

    def server_figure(self, info: object) -> float | None:
        return self.inner.server_figure(info)

    def attention_from_server(self, info: object) -> list[dict[str, object]] | None:
        return self.inner.attention_from_server(info)

    def auth_headers(self, suite: Suite, admin: bool = False) -> dict[str, str]:
        return self.inner.auth_headers(suite, admin)

    def identity(self, reports: Mapping[str, object]) -> dict[str, object]:
        return self.inner.identity(reports)


def measure_target_alone(runs: Sequence[EntryRun], engine: PreparedEngine, env: Mapping[str, str]
                         ) -> None:
    """Launch the target alone and measure each [speedup] entry's prompts on it, after
    the speculative server has stopped; each entry gets its `target_alone` and its
    measurement's `speedup`. A failure is recorded on every entry not yet measured."""
    runs = [run for run in wanted(runs) if run.measurement is not None]
    if not runs:
        return
    first = runs[0]
    suite = first.loaded.suite
    port = free_port()
    command = engine.adapter.target_alone_command(engine.command(LOOPBACK, port))
    spec = ServerSpec(command=command, log_path=first.run_dir / TARGET_ALONE_LOG, port=port,
                      env=dict(env), launch_timeout_s=suite.engine.launch_timeout_s,
                      ready_paths=engine.adapter.ready_paths)
    launch = LaunchInfo(command=redact_command(command, suite), host=LOOPBACK, port=port)
    pending = list(runs)
    try:
        with Server(spec) as server:
            for run in runs:
                run.stage = "target alone"
            say(f"launching the target alone of {suite.name}: log {spec.log_path}")
            with heartbeat(lambda elapsed: f"launching the target alone ({elapsed:.0f} s)"):
                launch.ready_after_s = server.wait_ready()
            for run in runs:
                _measure(run, engine, server, launch)
                pending.remove(run)
    except (KeyboardInterrupt, Interrupted):
        raise
    except (HarnessError, OSError) as error:
        reason = error.message if isinstance(error, HarnessError) else str(error)
        for run in pending:
            _failed(run, launch, f"{run.stage}: {reason}")
    finally:
        for run in runs[1:]:  # one server, one log: each record's folder holds it
            with contextlib.suppress(OSError):
                (run.run_dir / TARGET_ALONE_LOG).write_bytes(spec.log_path.read_bytes())


def reuse_target_alone(runs: Sequence[EntryRun], source: Path) -> list[EntryRun]:
    """Give each measured [speedup] entry the target alone `source` (another run's folder)
    measured, where that run sent the same workload (its prompts as rendered, its
    sampling, its [workload] table) and its target alone answered exactly the questions
    the entry answered: its rows copied to the entry's `target-alone.jsonl`, its log beside
    them, `target_alone` "reused" naming the run, the speedup's pairing saying whose.
    Returns the entries it cannot serve (another workload or set of questions, a source
    without a measured target alone, one that cannot be read), to be measured as usual."""
    try:
        record, rows = read_run(source), read_target_alone(source)
    except (HarnessError, OSError) as error:
        reason = error.message if isinstance(error, HarnessError) else str(error)
        say(f"the target alone of {source} cannot be reused ({reason}): measuring it")
        return list(runs)
    info = record.target_alone
    if info is None or info.status != "measured" or info.latency is None or not rows:
        say(f"{source} has no measured target alone to reuse: measuring it")
        return list(runs)
    measured = {row.question_index for row in rows}
    unmatched = []
    for run in runs:
        if run.measurement is None:  # nothing to pair: measure_target_alone passes it by
            unmatched.append(run)
        elif run.workload != record.workload or \
                run.loaded.document.get("workload") != record.suite.document.get("workload") \
                or {row.question_index for row in run.rows} != measured:
            say(f"the target alone of run {record.run_id} answered another workload or "
                f"other questions than {run.loaded.suite.name}: measuring it")
            unmatched.append(run)
        else:
            _reuse(run, record, info, rows, source)
    return unmatched


def _reuse(run: EntryRun, record: RunRecord, info: TargetAloneInfo,
           rows: Sequence[RequestRow], source: Path) -> None:
    suite = run.loaded.suite
    say(f"{suite.name}: the target alone of run {record.run_id}, on the same "
        f"{len({row.question_index for row in rows})} questions")
    with RowLog(run.run_dir, run.target_alone_rows, TARGET_ALONE_FILE) as log:
        for row in rows:
            log.append(row)
    with contextlib.suppress(OSError):  # its server's log, as a run that measured it has
        (run.run_dir / TARGET_ALONE_LOG).write_bytes((source / TARGET_ALONE_LOG).read_bytes())
    run.target_alone = TargetAloneInfo(status="reused", reused_from=record.run_id,
                                       launch=info.launch, n_requests=len(rows),
                                       n_planned=info.n_planned, latency=info.latency)
    assert run.measurement is not None and info.latency is not None  # reuse_target_alone
    found = speedup(sorted(run.rows, key=lambda row: row.index), rows,
                    run.measurement.latency, info.latency, suite.workload.seed)
    found.definitions["pairing"] = reused_pairing(record.run_id)
    run.measurement.speedup = found


def _measure(run: EntryRun, engine: PreparedEngine, server: Server, launch: LaunchInfo) -> None:
    suite = run.loaded.suite
    answered = {row.question_index for row in run.rows}
    data = run.data
    assert data is not None  # every entry's data is loaded before any launch (runner)
    prompts = [prompt for prompt in data.prompts if prompt.question_index in answered]
    planned = sum(len(prompt.turns) for prompt in prompts)
    say(f"{suite.name}: the target alone, {len(prompts)} prompts ({planned} requests)")
    with RowLog(run.run_dir, run.target_alone_rows, TARGET_ALONE_FILE) as log:
        result = asyncio.run(_drive(run, engine, server, prompts, data.stop, log.append))
    latency = summarise_latency(result.rows, result.duration_s, suite.workload.concurrency,
                                suite.workload.seed)
    run.target_alone = TargetAloneInfo(status="measured", launch=launch,
                                       n_requests=len(result.rows), n_planned=planned,
                                       latency=latency)
    assert run.measurement is not None
    run.measurement.speedup = speedup(sorted(run.rows, key=lambda row: row.index),
                                      result.rows, run.measurement.latency, latency,
                                      suite.workload.seed)


async def _drive(run: EntryRun, engine: PreparedEngine, server: Server, prompts: Sequence[Prompt],
                 stop: Sequence[str], keep: Callable[[RequestRow], None]) -> DriveResult:
    suite = run.loaded.suite
    adapter = TargetAloneAdapter(engine.adapter)
    endpoint = Endpoint(server.spec.base_url, adapter,
                        engine.adapter.auth_headers(suite),
                        engine.adapter.auth_headers(suite, admin=True), server.death)
    driver = Driver(endpoint, suite.workload, stop)
    run.stage = "target alone: settings check"
    info = await driver.server_info()
    mismatches = adapter.settings_mismatches(info, suite)
    if mismatches:
        raise EngineError("the target-alone server: " + "; ".join(mismatches))
    driver.non_draft_tokens = 1
    driver.check_streaming(info)
    run.stage = "target alone: warm-up"
    await driver.warm_up_then_flush(prompts)
    run.stage = "target alone: measurement"
    result = await driver.measure(prompts, keep, None)
    if len(result.rows) < result.planned:
        raise EngineError(f"the target alone finished {len(result.rows)} of {result.planned} "
                          "requests")
    return result


def _failed(run: EntryRun, launch: LaunchInfo, reason: str) -> None:
    """The target alone failed: named, its finished rows kept, no speedup figure."""
    run.target_alone = TargetAloneInfo(status="failed", reason=reason, launch=launch,
                                       n_requests=len(run.target_alone_rows))
    if run.measurement is not None:
        run.measurement.speedup = Speedup(definitions=dict(DEFINITIONS), n_prompts=0,
                                          note=f"the target-alone run failed: {reason}")
    say(f"{run.loaded.suite.name}: the target-alone run failed: {reason}")
