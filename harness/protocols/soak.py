"""`harness soak SUITE --duration 10m --window 1m`: drift over serving time. One server, the
suite's main workload repeated for a set time with prefix caching on (each engine's own
flag, `harness.suite.prefix_caching`; the reference engine has none, and the record says
so), accept length per window of serving time, and a gate on its trend within the run.

The soak is one run (`harness.run.runner.run_suite` with `RunOptions.soak_s`: the measured
phase sends the prompts over and over until the duration is up, `Driver.measure_for`), a
normal run record of the series `<suite>-soak`, judged by the suite's floors; with
`--server` (`RunOptions.server`) the run attaches to a server someone else started, as
`harness run --server` does (`harness.run.attach`: no launch, no kill, the server checked
against the suite first), and its prefix cache is as that server was started; each row
carries when it finished, so the soak's windows are read from its rows (through the door,
`harness.results.readers`). The drift (`harness.metrics.drift`) is judged with the floors
by the one judge (`harness.run.judge.decide`, `Evidence.drift`), and the soak's record
(`harness.results.soaks`) keeps every window's figure, its definition and CI, and the
gate's finding. Ctrl-C keeps the windows measured so far: the run's rows stay in its
requests.jsonl, and the soak's record is written from them, status error.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from harness.errors import BadInput, ExitCode, Interrupted
from harness.metrics.drift import (
    DRIFT_DEFINITION,
    WINDOW_DEFINITION,
    DriftResult,
    WindowFigure,
    drift_test,
    status_of,
    window_figures,
)
from harness.protocols.entry_suites import derived_suite
from harness.results.layout import RUNS_DIR, started_from_name
from harness.results.readers import read_requests, read_run
from harness.results.record import RequestRow, RunRecord, VerdictStatus, new_run_id, utc_now
from harness.results.soaks import SOAKS, SoakDrift, SoakRecord, SoakWindow
from harness.run import runner
from harness.run.evidence import DriftEvidence
from harness.run.exit_codes import report_status, sweep_exit
from harness.run.judge import Evidence, decide
from harness.run.outcome import RunOptions, RunOutcome
from harness.suite.entries import METRIC_DEFINITIONS
from harness.suite.model import LoadedSuite
from harness.suite.prefix_caching import prefix_cache_for, with_prefix_cache
from harness.suite.soak import MAX_DURATION_S, Soak, window_problem

SERIES_SUFFIX = "-soak"
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(s|m|h)?")
_UNITS = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, flag: str) -> float:
    """`90`, `90s`, `10m`, `1.5h` as seconds; BadInput naming `flag` for anything else, a
    zero, or more than a week."""
    shown = text if len(text) <= 24 else text[:20] + "..."
    found = _DURATION.fullmatch(text.strip())
    if found is None:
        raise BadInput(f"{flag} {shown!r}: not a duration; give seconds or a number with s, "
                       "m or h (e.g. 90s, 10m, 1h)")
    seconds = float(found.group(1)) * _UNITS[found.group(2)]
    if seconds <= 0:
        raise BadInput(f"{flag} {shown}: a duration above 0 is needed")
    if seconds > MAX_DURATION_S:
        raise BadInput(f"{flag} {shown}: more than {MAX_DURATION_S / 3600:g} h; a soak "
                       "runs at most a week")
    return seconds


@dataclass(frozen=True)
class SoakSettings:
    """The soak's duration, windows and drift gate (the suite's [soak], flags over it)."""

    duration_s: float
    window_s: float
    max_drift: float = 0.05
    alpha: float = 0.05
    inconclusive: Literal["pass", "fail"] = "pass"


def check_flags(duration: str | None, window: str | None, max_drift: float | None,
                alpha: float | None) -> None:
    """The flags' own errors, before any suite is read (BadInput naming the flag)."""
    duration_s = parse_duration(duration, "--duration") if duration is not None else None
    window_s = parse_duration(window, "--window") if window is not None else None
    if duration_s is not None and window_s is not None:
        problem = window_problem(duration_s, window_s)
        if problem is not None:
            raise BadInput(f"--window: {problem}")
    if max_drift is not None:
        _check_drift(max_drift)
    if alpha is not None:
        _check_alpha(alpha)


def soak_settings(declared: Soak | None, duration: str | None = None,
                  window: str | None = None, max_drift: float | None = None,
                  alpha: float | None = None, inconclusive: str | None = None
                  ) -> SoakSettings:
    """The settings the flags and the suite's [soak] give; BadInput naming the flag or
    field that is missing, out of range, or that cannot cut the duration into windows."""
    soak = declared or Soak()
    duration_s = parse_duration(duration, "--duration") if duration is not None \
        else soak.duration_s
    window_s = parse_duration(window, "--window") if window is not None else soak.window_s
    if duration_s is None:
        raise BadInput("no soak duration: give --duration (e.g. --duration 10m) or the "
                       "suite's soak.duration_s")
    if window_s is None:
        raise BadInput("no soak window: give --window (e.g. --window 1m) or the suite's "
                       "soak.window_s")
    problem = window_problem(duration_s, window_s)
    if problem is not None:
        field = "--window" if window is not None or duration is not None else "soak.window_s"
        raise BadInput(f"{field}: {problem}")
    drift = _check_drift(soak.max_drift if max_drift is None else max_drift)
    level = _check_alpha(soak.alpha if alpha is None else alpha)
    judged = soak.inconclusive if inconclusive is None else inconclusive
    if judged not in ("pass", "fail"):
        raise BadInput(f"--inconclusive {judged!r}: pass or fail")
    return SoakSettings(duration_s, window_s, drift, level, judged)  # type: ignore[arg-type]


def _check_drift(value: float) -> float:
    if not 0.0 < value < 1.0:  # also NaN
        raise BadInput(f"--max-drift {value:g}: the tolerated fall is a share of the run's "
                       "accept length, above 0 and below 1 (e.g. 0.05)")
    return value


def _check_alpha(value: float) -> float:
    if not 0.0 < value < 0.5:
        raise BadInput(f"--alpha {value:g}: the gate's one-sided level is in (0, 0.5)")
    return value


def soak_suite(loaded: LoadedSuite, questions: int | None) -> LoadedSuite:
    """The suite of the soak: its main workload alone (questions capped when asked), no
    sequential rule, no entries, gate, grid or target-alone run, prefix caching on; series
    `<suite>-soak`. BadInput naming engine.extra_args where the suite turns the cache off."""
    suite = loaded.suite
    document = copy.deepcopy(loaded.document)
    for key in ("workloads", "gate", "baselines", "speedup", "grid"):
        document.pop(key, None)
    document["name"] = f"{suite.name}{SERIES_SUFFIX}"
    document["nightly"] = False
    declared = document["workload"]
    engine_table = document["engine"]
    if not isinstance(declared, dict) or not isinstance(engine_table, dict):
        raise BadInput(f"suite {suite.name}: [workload] and [engine] must be tables")
    workload = {k: v for k, v in declared.items() if k != "sequential_in_flight"}
    if questions is not None:
        workload["questions"] = questions
    document["workload"] = workload
    engine = dict(engine_table)
    extra = engine.get("extra_args") or []
    if not isinstance(extra, list) or not all(isinstance(arg, str) for arg in extra):
        raise BadInput(f"suite {suite.name}: engine.extra_args is not a list of strings")
    args, refused = with_prefix_cache(suite.engine.kind, list(extra))
    if refused is not None:
        raise BadInput(f"suite {suite.name}: engine.extra_args {refused}: a soak measures "
                       "drift with prefix caching on; remove the flag")
    if args != extra:
        engine["extra_args"] = args
    document["engine"] = engine
    return derived_suite(loaded, document, "soak")


def prefix_cache_said(kind: str, server: str | None) -> str:
    """The prefix cache as the record states it: the engine's own flag, on the launch the
    soak made; on an attached server (`--server`) as that server was started, which the
    harness neither sets nor reads."""
    said = prefix_cache_for(kind).describe()
    if server is None:
        return said
    return (f"attached server (--server): prefix caching as the server was started, not "
            f"set by the harness; {said}")


@dataclass
class SoakOutcome:
    record: SoakRecord
    folder: Path | None
    exit_code: ExitCode
    plan: list[str] = dataclasses.field(default_factory=list)


def run_soak(loaded: LoadedSuite, settings: SoakSettings, options: RunOptions,
             questions: int | None = None) -> SoakOutcome:
    """One launch, the workload repeated for the duration, its windows and drift judged."""
    if questions is not None and questions < 1:
        raise BadInput(f"--questions {questions}: at least 1 question")
    derived = soak_suite(loaded, questions)
    started, soak_id = utc_now(), new_run_id()
    run_options = dataclasses.replace(options, soak_s=settings.duration_s, sequential=False,
                                      entries=None, stop_rule=None, pairing=None)
    try:
        outcome = runner.run_suite(derived, run_options)
    except Interrupted as error:  # the windows measured so far are kept, status error
        if not options.dry_run:
            with contextlib.suppress(OSError, BadInput):
                _record_interrupted(loaded, derived, settings, soak_id, started, options,
                                    error.message)
        raise
    if options.dry_run:
        plan = [*outcome.plan,
                f"soak       the workload repeated for {settings.duration_s:g} s on this one "
                f"launch, windows of {settings.window_s:g} s; "
                f"{prefix_cache_said(loaded.suite.engine.kind, options.server)}",
                f"gate       drift of accept length over the run within a fall of "
                f"{settings.max_drift:.1%} (one-sided alpha {settings.alpha:g}, inconclusive "
                f"judged {settings.inconclusive})"]
        record = _record(loaded, derived, settings, soak_id, started, options, None, None,
                         [], None, "pass", [])
        return SoakOutcome(record, None, ExitCode.PASS, plan)
    record, status = _judged(loaded, derived, settings, soak_id, started, options, outcome)
    folder = SOAKS.save(record, options.results_dir, loaded.suite.name, started, soak_id)
    return SoakOutcome(record, folder, sweep_exit([status], outcome.status, outcome.exit_code))


def _judged(loaded: LoadedSuite, derived: LoadedSuite, settings: SoakSettings, soak_id: str,
            started: datetime, options: RunOptions, outcome: RunOutcome
            ) -> tuple[SoakRecord, VerdictStatus]:
    """The soak's windows and verdict: the run's floors and the drift gate, by the judge."""
    run_dir, run = outcome.run_dir, outcome.record
    if outcome.status == "skipped" or run is None or run_dir is None:
        status: VerdictStatus = "skipped" if outcome.status == "skipped" else "error"
        return _record(loaded, derived, settings, soak_id, started, options, run_dir, run, [],
                       None, status, list(outcome.reasons)), status
    if outcome.status == "error" and run.measurement is None:
        # nothing measured (a server that never answered, one that died before its first
        # request): the run's own error, with the windows of any rows it kept
        windows, _ = _windows(read_requests(run_dir, run), derived.suite.floors.metric,
                              settings, derived.suite.workload.seed)
        return _record(loaded, derived, settings, soak_id, started, options, run_dir, run,
                       windows, None, "error", list(outcome.reasons)), "error"
    rows = read_requests(run_dir, run, strict=True)
    metric = derived.suite.floors.metric
    windows, problem = _windows(rows, metric, settings, derived.suite.workload.seed)
    result: DriftResult | None = None
    reason = problem
    if problem is None and run.measurement is not None and not run.measurement.partial:
        try:
            result = drift_test(rows, metric, settings.duration_s, settings.max_drift,
                                settings.alpha)
        except ValueError as error:
            reason = str(error)
    elif problem is None:
        reason = "the soak's run has no whole measurement"
    evidence = DriftEvidence(result, settings.inconclusive, reason)
    judged = decide(Evidence(run.measurement, derived.suite.floors, drift=evidence))
    status = judged.verdict.status
    reasons = list(judged.verdict.reasons)
    if outcome.status == "error":  # the run's own error (a dead server) stands too
        status = report_status([status, "error"])
        reasons = [*outcome.reasons, *reasons]
    drift = _drift(settings, result, reason, evidence)
    return _record(loaded, derived, settings, soak_id, started, options, run_dir, run, windows,
                   drift, status, reasons), status


def _windows(rows: list[RequestRow], metric: str, settings: SoakSettings, seed: int
             ) -> tuple[list[SoakWindow], str | None]:
    try:
        figures = window_figures(rows, metric, settings.duration_s, settings.window_s, seed)
    except ValueError as error:
        return [], str(error)
    return [_window(figure) for figure in figures], None


def _window(figure: WindowFigure) -> SoakWindow:
    return SoakWindow(index=figure.index, start_s=figure.start_s, end_s=figure.end_s,
                      n_requests=figure.n_requests, n_questions=figure.n_questions,
                      accept_length=figure.accept_length, ci=figure.ci)


def _drift(settings: SoakSettings, result: DriftResult | None, reason: str | None,
           evidence: DriftEvidence) -> SoakDrift:
    status: VerdictStatus = "error" if result is None else \
        status_of(result.decision, evidence.inconclusive)
    return SoakDrift(status=status, max_drift=settings.max_drift, alpha=settings.alpha,
                     inconclusive=settings.inconclusive, definition=DRIFT_DEFINITION,
                     result=result.to_dict() if result is not None else None,
                     reason=None if result is not None else reason)


def _record_interrupted(loaded: LoadedSuite, derived: LoadedSuite, settings: SoakSettings,
                        soak_id: str, started: datetime, options: RunOptions,
                        why: str) -> None:
    """The soak's record after Ctrl-C: the windows of the rows its run kept (the newest
    run of its series started since the soak began), status error."""
    since = started.replace(microsecond=0)
    folder = Path(options.results_dir) / RUNS_DIR / derived.suite.name
    ours = sorted(run_dir for run_dir in folder.glob("*")
                  if (when := started_from_name(run_dir.name)) is not None and when >= since)
    run_dir = ours[-1] if ours else None
    run: RunRecord | None = None
    windows: list[SoakWindow] = []
    if run_dir is not None:
        with contextlib.suppress(BadInput):  # a run cut before its record: named as absent
            run = read_run(run_dir)
        rows = read_requests(run_dir, run)
        windows, _ = _windows(rows, derived.suite.floors.metric, settings,
                              derived.suite.workload.seed)
    kept = sum(window.n_requests for window in windows)
    record = _record(loaded, derived, settings, soak_id, started, options, run_dir, run,
                     windows, None, "error",
                     [f"interrupted: {why}", f"{kept} requests measured before it, kept in "
                      "the windows below; no drift gate on a cut run"])
    SOAKS.save(record, options.results_dir, loaded.suite.name, started, soak_id)


def _record(loaded: LoadedSuite, derived: LoadedSuite, settings: SoakSettings, soak_id: str,
            started: datetime, options: RunOptions, run_dir: Path | None,
            run: RunRecord | None, windows: list[SoakWindow], drift: SoakDrift | None,
            status: VerdictStatus, reasons: list[str]) -> SoakRecord:
    metric = derived.suite.floors.metric
    measurement = run.measurement if run is not None else None
    return SoakRecord(
        soak_id=soak_id, suite=loaded.suite.name, engine=loaded.suite.engine.kind,
        prefix_cache=prefix_cache_said(loaded.suite.engine.kind, options.server),
        started_at=started, finished_at=utc_now(), label=options.label,
        duration_s=settings.duration_s, window_s=settings.window_s,
        measured_s=measurement.duration_s if measurement is not None else None,
        metric=metric,
        window_definition=f"{metric} ({METRIC_DEFINITIONS[metric]}): {WINDOW_DEFINITION}",
        series=derived.suite.name, run_id=run.run_id if run is not None else None,
        run_dir=None if run_dir is None else os.path.relpath(run_dir, options.results_dir),
        windows=windows, drift=drift, status=status, reasons=reasons)
