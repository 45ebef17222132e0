"""The paired gate's findings of stored runs, beside the floors (`harness paired`, the
nightly report): per series, the latest run that was paired against a reference build."""

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
    """Series -> the latest paired run record (None: no paired run that matches)."""
    root = Path(results) / RUNS_DIR
    names = list(series) if series else sorted(p.name for p in root.glob("*") if p.is_dir())
    out: dict[str, dict[str, Any] | None] = {}
    for name in names:
        found = None
        for run_dir in sorted((root / name).glob("*"), reverse=True):
            try:
                record = read_run_data(run_dir)  # the checked door (harness.results.readers)
            except (OSError, ValueError):
                continue
            if not isinstance(record, dict) or not isinstance(record.get("paired"), dict):
                continue
            started = _started(record)
            if since is not None and (started is None or started < since):
                continue
            if label is not None and record.get("label") != label:
                continue
            found = {**record, "path": str(run_dir)}
            break
        out[name] = found
    return out


def rows(found: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    table = []
    for series, record in found.items():
        if record is None:
            table.append({"series": series, "status": "no paired run"})
            continue
        paired, result = record["paired"], record["paired"]["result"]
        floors = (record.get("suite") or {}).get("document", {}).get("floors", {})
        measurement = record.get("measurement") or {}
        table.append({
            "series": series, "run_id": record.get("run_id"),
            "build": (record.get("build") or {}).get("spec"),
            "against": paired["against"]["spec"], "against_run": paired["against"]["run_id"],
            "reused": paired["against"]["reused"], "metric": measurement.get("metric"),
            "b": result["b"], "a": result["a"], "difference": result["difference"],
            "ci": result["difference_ci"], "level": result["level"],
            "relative_change": result["relative_change"],
            "tolerated_drop": result["tolerated_drop"], "tolerance": result["tolerance"],
            "decision": result["decision"], "status": paired["status"],
            "floor": floors.get("accept_length"), "floors_status": paired["floors_status"],
        })
    return table


def markdown(table: list[dict[str, Any]]) -> str:
    lines = ["| series | B | A (run) | B accept length | A | B - A (CI) | relative | tolerated "
             "| paired gate | floor | floors |", "|" + "---|" * 11]
    for r in table:
        if "b" not in r:
            lines.append(f"| {r['series']} | - | - | - | - | - | - | - | **{r['status']}** | - "
                         "| - |")
            continue
        ci = r["ci"]
        interval = f"{r['difference']:+.4f} ({r['level']:.0%} CI {ci[0]:+.3f}..{ci[1]:+.3f})"
        reused = ", reused" if r["reused"] else ""
        gate = f"{r['status'].upper()} ({r['decision'].replace('_', ' ')})"
        lines.append(
            f"| {r['series']} | {r['build'] or '-'} | {r['against']} ({r['against_run']}"
            f"{reused}) | {r['b']:.4f} ({r['metric']}) | {r['a']:.4f} | {interval} | "
            f"{r['relative_change']:+.2%} | {r['tolerated_drop']:.4f} = {r['tolerance']} | "
            f"{gate} | {r['floor']} | {r['floors_status'].upper()} |")
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
            f"{paired['against']['run_id']} ({paired['against']['spec']})")
