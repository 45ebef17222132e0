"""The paired gate's findings of stored runs, beside the floors (`harness paired`, the
nightly report): per series (a suite named expands to its workload entries'
`<suite>.<entry>` series), the LATEST run that matches the time and label filters, and
nothing older: a latest run that errored is an error (exit 3), never the night before's
pass, and a latest run that was not paired says so. The status shown is the verdict the
one judge recorded (`harness.run.judge.decide`), beside the gate's own finding."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.results.layout import RUN_FILE, RUNS_DIR
from harness.results.readers import read_run_data


def _started(record: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(record.get("started_at")))
    except ValueError:
        return None


def latest_paired(results: Path, series: Sequence[str] | None = None,
                  since: datetime | None = None, label: str | None = None
                  ) -> dict[str, dict[str, Any] | None]:
    """Series -> the latest run record that matches (None: no run that matches)."""
    root = Path(results) / RUNS_DIR
    recorded = sorted(p.name for p in root.glob("*") if p.is_dir())
    names = expand(series, recorded) if series else recorded
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        found = None
        for run_dir in sorted((root / name).glob("*"), reverse=True):
            try:
                record = read_run_data(run_dir)  # the checked door (harness.results.readers)
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict):
                continue
            started = _started(record)
            if since is not None and (started is None or started < since):
                continue
            if label is not None and record.get("label") != label:
                continue
            found = {**record, "path": str(run_dir)}
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


def _verdict(record: dict[str, Any]) -> str:
    verdict = (record.get("verdict") or {}).get("status")
    if verdict is None:  # a record written before verdicts were combined: the gate's
        verdict = (record.get("paired") or {}).get("status")
    if (record.get("measurement") or {}).get("partial"):
        verdict = "error"
    return str(verdict or "error")


def rows(found: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    table = []
    for series, record in found.items():
        if record is None:
            table.append({"series": series, "status": "no paired run"})
            continue
        verdict = _verdict(record)
        if not isinstance(record.get("paired"), dict) or "result" not in record["paired"]:
            reasons = (record.get("verdict") or {}).get("reasons") or []
            table.append({"series": series, "run_id": record.get("run_id"),
                          "status": "error" if verdict == "error" else "not paired",
                          "verdict": verdict, "reason": "; ".join(map(str, reasons[:1]))})
            continue
        paired, result = record["paired"], record["paired"]["result"]
        floors = (record.get("suite") or {}).get("document", {}).get("floors", {})
        measurement = record.get("measurement") or {}
        table.append({
            "series": series, "run_id": record.get("run_id"),
            "build": (record.get("build") or {}).get("spec"),
            "against": paired["against"].get("spec"), "against_run": paired["against"]["run_id"],
            "reused": paired["against"]["reused"], "metric": measurement.get("metric"),
            "b": result["b"], "a": result["a"], "difference": result["difference"],
            "ci": result["difference_ci"], "level": result["level"],
            "relative_change": result["relative_change"],
            "tolerated_drop": result["tolerated_drop"], "tolerance": result["tolerance"],
            "decision": result["decision"], "status": verdict,
            "floor": floors.get("accept_length"), "floors_status": paired["floors_status"],
            "gate_status": paired["status"], "verdict": verdict,
        })
    return table


def markdown(table: list[dict[str, Any]]) -> str:
    lines = ["| series | B | A (run) | B accept length | A | B - A (CI) | relative | tolerated "
             "| paired gate | floor | floors | verdict |", "|" + "---|" * 12]
    for r in table:
        if "b" not in r:
            why = f" ({r['reason']})" if r.get("reason") else ""
            lines.append(f"| {r['series']} | - | - | - | - | - | - | - | **{r['status']}**"
                         f"{why} | - | - | {str(r.get('verdict', '-')).upper()} |")
            continue
        ci = r["ci"]
        interval = f"{r['difference']:+.4f} ({r['level']:.0%} CI {ci[0]:+.3f}..{ci[1]:+.3f})"
        reused = ", reused" if r["reused"] else ""
        gate = f"{r['gate_status'].upper()} ({r['decision'].replace('_', ' ')})"
        lines.append(
            f"| {r['series']} | {r['build'] or '-'} | {r['against']} ({r['against_run']}"
            f"{reused}) | {r['b']:.4f} ({r['metric']}) | {r['a']:.4f} | {interval} | "
            f"{r['relative_change']:+.2%} | {r['tolerated_drop']:.4f} = {r['tolerance']} | "
            f"{gate} | {r['floor']} | {r['floors_status'].upper()} | "
            f"{r['verdict'].upper()} |")
    return "\n".join(lines)


def stored_finding(side: Any) -> dict[str, Any] | None:
    """The paired gate's finding stored with a one-run side's record (`harness compare`)."""
    if len(getattr(side, "records", [])) != 1:
        return None
    path = side.records[0].get("path")
    if not path:
        return None
    file = Path(str(path))
    file = file / RUN_FILE if file.is_dir() else file
    try:
        record = read_run_data(file)
    except (OSError, ValueError):
        return None
    paired = record.get("paired") if isinstance(record, dict) else None
    return paired if isinstance(paired, dict) and "result" in paired else None


def finding_line(paired: dict[str, Any]) -> str:
    r = paired["result"]
    ci = r["difference_ci"]
    return (f"paired gate {paired['status'].upper()} ({r['decision'].replace('_', ' ')}): "
            f"B - A = {r['difference']:+.4f} ({r['relative_change']:+.2%}; {r['level']:.0%} CI "
            f"{ci[0]:+.3f}..{ci[1]:+.3f}) on {r['n']} questions, tolerated drop "
            f"{r['tolerated_drop']:.4f} = {r['tolerance']}, against run "
            f"{paired['against']['run_id']}"
            + (f" ({paired['against']['spec']})" if paired["against"].get("spec") else ""))
