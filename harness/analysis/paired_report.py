"""The paired gate's findings of stored runs, beside the floors (`harness paired`, the
nightly report): per series (a suite named expands to its workload entries'
`<suite>.<entry>` series), the LATEST run that matches the time and label filters, and
nothing older: a latest run that errored is an error (exit 3), never the night before's
pass, and so is a latest run folder without a readable record (a harness killed before it
wrote run.json, a damaged run.json); a latest run that was not paired says so. Every
record is read through the door (`harness.results.readers`). The status shown is the verdict the
one judge recorded (`harness.run.judge.decide`), beside the gate's own finding."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Required, TypedDict

from harness.analysis.sides import Side
from harness.analysis.staleness import as_utc, latest_night_text, overdue_reason
from harness.results.layout import RUNS_DIR
from harness.results.readers import BadRecord, read_run
from harness.results.record import PairedFinding, PairedResultInfo, RunRecord
from harness.results.store import UnrecordedRun, unrecorded_run


@dataclass(frozen=True)
class Latest:
    """A series' latest run: its record, or (a harness killed before it wrote run.json,
    a damaged run.json) the folder without one, which is an error, never a pass."""

    path: Path
    record: RunRecord | None
    unrecorded: UnrecordedRun | None = None


def _started(record: RunRecord) -> datetime | None:
    started = record.started_at
    return started.replace(tzinfo=UTC) if started and started.tzinfo is None else started


def latest_paired(results: Path, series: Sequence[str] | None = None,
                  since: datetime | None = None, label: str | None = None
                  ) -> dict[str, Latest | None]:
    """Series -> its latest run that matches (None: no run that matches). A run folder
    without a readable record started since `since` is the latest whatever `label` says:
    its label is unknown, and a missing record is never passed over for an older pass."""
    root = Path(results) / RUNS_DIR
    recorded = sorted(p.name for p in root.glob("*") if p.is_dir())
    names = expand(series, recorded) if series else recorded
    out: dict[str, Latest | None] = {}
    for name in names:
        found = None
        for run_dir in sorted((root / name).glob("*"), reverse=True):  # newest first
            if run_dir.name.startswith(".") or not run_dir.is_dir():
                continue  # the loader's index, stray files
            try:
                record = read_run(run_dir)
            except BadRecord as error:
                missing = unrecorded_run(name, run_dir, error.reason)
                if since is not None and missing.started_at < since:
                    continue  # not tonight's
                found = Latest(run_dir, None, missing)
                break
            started = _started(record)
            if since is not None and (started is None or started < since):
                continue
            if label is not None and record.label != label:
                continue
            found = Latest(run_dir, record)
            break
        if found is None and series is None and since is not None:
            continue  # not tonight's: a suite nobody named and nothing ran since
        out[name] = found
    return out


def expand(names: Sequence[str], recorded: Sequence[str]) -> list[str]:
    """Each name and the series of its workload entries (`<name>.<entry>`)."""
    out: list[str] = []
    for name in names:
        for series in [name, *[r for r in recorded if r.startswith(name + ".")]]:
            if series not in out:
                out.append(series)
    return out


def _verdict(record: RunRecord) -> str:
    verdict = record.verdict.status if record.verdict else None
    if verdict is None:  # a record written before verdicts were combined: the gate's
        verdict = record.paired.status if record.paired is not None else None
    if record.measurement is not None and record.measurement.partial:
        verdict = "error"
    return str(verdict or "error")


class PairedRow(TypedDict, total=False):
    """One series' line of the paired report (`harness paired`; --json prints it)."""

    series: Required[str]
    status: Required[str]  # the row's: its verdict, "not paired", "no paired run"
    run_id: str | None
    verdict: str
    reason: str
    build: str | None  # B's spec
    against: str | None  # A's spec (None: as installed)
    against_run: str
    reused: bool
    metric: str | None
    b: float
    a: float
    difference: float
    ci: list[float] | None
    level: float
    relative_change: float
    tolerated_drop: float
    tolerance: str
    decision: str
    floor: object  # the suite document's floors.accept_length, as its TOML holds it
    floors_status: str
    gate_status: str
    speedup_gate: str
    started_at: str | None
    latest_night: str
    stale: str


def rows(found: dict[str, Latest | None], now: datetime | None = None,
         max_age: timedelta | None = None) -> list[PairedRow]:
    """Each series' row, with its latest night's time and age at `now`; under `max_age` a
    series whose latest night is older is an error (`staleness.overdue_reason`)."""
    now = now or datetime.now(UTC)
    out = []
    for series, latest in found.items():
        shown = row(series, latest)
        started = _night_of(latest)
        shown["started_at"] = started.isoformat() if started else None
        shown["latest_night"] = latest_night_text(started, now)
        overdue = overdue_reason(started, now, max_age)
        if overdue is not None:
            reason = "; ".join(filter(None, [shown.get("reason") or "", f"stale: {overdue}"]))
            shown["status"], shown["verdict"], shown["stale"] = "error", "error", overdue
            shown["reason"] = reason
        out.append(shown)
    return out


def _night_of(latest: Latest | None) -> datetime | None:
    if latest is None:
        return None
    if latest.record is not None:
        return _started(latest.record)
    return as_utc(latest.unrecorded.started_at) if latest.unrecorded is not None else None


def row(series: str, latest: Latest | None) -> PairedRow:
    """One series' line of the report: its latest run's paired finding and verdict."""
    if latest is None:
        return {"series": series, "status": "no paired run"}
    record = latest.record
    if record is None:
        missing = latest.unrecorded
        return {"series": series, "run_id": None, "status": "error", "verdict": "error",
                "reason": missing.describe() if missing else f"{latest.path}: no record"}
    verdict = _verdict(record)
    paired = record.paired
    if paired is None:
        reasons = record.verdict.reasons if record.verdict else []
        return {"series": series, "run_id": record.run_id,
                "status": "error" if verdict == "error" else "not paired",
                "verdict": verdict, "reason": "; ".join(reasons[:1])}
    result = paired.result
    floors = record.suite.document.get("floors")
    return {
        "series": series, "run_id": record.run_id, "build": record.build.spec,
        "against": paired.against.spec, "against_run": paired.against.run_id,
        "reused": paired.against.reused,
        "metric": record.measurement.metric if record.measurement else None,
        "b": result.b, "a": result.a, "difference": result.difference,
        "ci": list(result.difference_ci) if result.difference_ci is not None else None,
        "level": result.level,
        "relative_change": result.relative_change,
        "tolerated_drop": result.tolerated_drop, "tolerance": result.tolerance,
        "decision": result.decision, "status": verdict,
        "floor": floors.get("accept_length") if isinstance(floors, dict) else None,
        "floors_status": paired.floors_status, "gate_status": paired.status,
        "speedup_gate": speedup_gate_text(paired), "verdict": verdict,
    }


def speedup_gate_text(paired: PairedFinding) -> str:
    """The paired speedup gate's findings in one cell: each figure's status and B / A of
    its speedups (`[speedup] max_drop`); "-" where the run did not gate speedup."""
    cells = []
    for found in paired.speedup or []:
        name = found.figure.removeprefix("speedup_")
        shown = f" B/A {found.ratio:.3f}" if found.ratio is not None else ""
        cells.append(f"{name} {found.status.upper()}{shown}")
    return "; ".join(cells) or "-"


def markdown(table: list[PairedRow]) -> str:
    lines = ["| series | B | A (run) | B accept length | A | B - A (CI) | relative | tolerated "
             "| paired gate | speedup gate | floor | floors | verdict | latest night |",
             "|" + "---|" * 14]
    for r in table:
        if "b" not in r:
            why = f" ({r['reason']})" if r.get("reason") else ""
            lines.append(f"| {r['series']} | - | - | - | - | - | - | - | **{r['status']}**"
                         f"{why} | - | - | - | {str(r.get('verdict', '-')).upper()} | "
                         f"{r.get('latest_night', '-')} |")
            continue
        ci = r["ci"]
        shown = f"{r['level']:.0%} CI {ci[0]:+.3f}..{ci[1]:+.3f}" if ci else "no CI"
        interval = f"{r['difference']:+.4f} ({shown})"
        reused = ", reused" if r["reused"] else ""
        gate = f"{r['gate_status'].upper()} ({r['decision'].replace('_', ' ')})"
        lines.append(
            f"| {r['series']} | {r['build'] or '-'} | {r['against']} ({r['against_run']}"
            f"{reused}) | {r['b']:.4f} ({r['metric']}) | {r['a']:.4f} | {interval} | "
            f"{r['relative_change']:+.2%} | {r['tolerated_drop']:.4f} = {r['tolerance']} | "
            f"{gate} | {r['speedup_gate']} | {r['floor']} | {r['floors_status'].upper()} | "
            f"{r['verdict'].upper()} | {r.get('latest_night', '-')}"
            + (f" (**stale**: {r['stale']})" if r.get("stale") else "") + " |")
    return "\n".join(lines)


def stored_finding(side: Side) -> PairedFinding | None:
    """The paired gate's finding stored with a one-run side's record (`harness compare`)."""
    if len(side.records) != 1:
        return None
    path = side.records[0].get("path")
    if not path:
        return None
    try:
        return read_run(str(path)).paired
    except BadRecord:
        return None


def interval_text(result: PairedResultInfo, digits: int) -> str:
    """The difference's CI as every reader prints it ("no CI" where the record has none)."""
    ci = result.difference_ci
    if ci is None:
        return "no CI"
    return f"{result.level:.0%} CI {ci[0]:+.{digits}f}..{ci[1]:+.{digits}f}"


def finding_line(paired: PairedFinding) -> str:
    r = paired.result
    return (f"paired gate {paired.status.upper()} ({r.decision.replace('_', ' ')}): "
            f"B - A = {r.difference:+.4f} ({r.relative_change:+.2%}; {interval_text(r, 3)}"
            f") on {r.n} questions, tolerated drop "
            f"{r.tolerated_drop:.4f} = {r.tolerance}, against run "
            f"{paired.against.run_id}"
            + (f" ({paired.against.spec})" if paired.against.spec else ""))
