"""`harness paired` and the stored finding `compare` shows, on run folders written here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from harness.analysis.paired_report import (
    finding_line,
    latest_paired,
    markdown,
    rows,
    stored_finding,
)
from harness.analysis.sides import Side

ROOT = Path(__file__).resolve().parents[2]


def day(n: int) -> str:
    return f"2026-01-{n:02d}T00:00:00+00:00"


def whole(run_id: str, started: str, label: str = "main", **fields: object) -> dict:
    """A whole run record (the door reads no other); `write` names its suite."""
    return {
        "schema_version": 2, "kind": "run", "run_id": run_id, "started_at": started,
        "label": label, "suite": {"name": "-", "sha256": "0" * 64,
                                  "document": {"floors": {"accept_length": 5.4}}},
        "build": {"engine": "sglang", "spec": "sglang==0.6"},
        "provenance": {"harness_version": "0.1.0", "python": "3.11", "platform": "linux"},
        "measurement": {"metric": "server_avg", "accept_length": 5.40},
        "verdict": {"status": "pass"}, **fields}


def paired_record(run_id: str, started: str, status: str, label: str = "main") -> dict:
    return whole(
        run_id, started, label, verdict={"status": status},
        paired={"against": {"run_id": "ref1", "spec": "sglang==0.5.23", "reused": True,
                            "path": "x"}, "status": status, "floors_status": "pass",
                "result": {"decision": "worse" if status == "fail" else "not_worse",
                           "n": 200, "a": 5.62, "b": 5.40, "difference": -0.22,
                           "difference_ci": [-0.3, -0.14], "level": 0.9,
                           "relative_change": -0.039, "tolerated_drop": 0.1124,
                           "tolerance": "2.0% of A (server_avg)"}})


def write(root: Path, series: str, name: str, data: dict) -> Path:
    folder = root / "runs" / series / name
    folder.mkdir(parents=True)
    data = {**data, "suite": {**data["suite"], "name": series}}
    (folder / "run.json").write_text(json.dumps(data))
    return folder


def _paired(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`harness paired --results RESULTS ARGS` from this tree."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "harness", "paired", "--results",
                           str(results), *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_latest_paired_run_per_series_by_time_and_label(tmp_path: Path) -> None:
    write(tmp_path, "g", "20260101T000000Z-old", paired_record("old", day(1), "pass"))
    write(tmp_path, "g", "20260102T000000Z-new", paired_record("new", day(2), "fail"))
    write(tmp_path, "g", "20260103T000000Z-rel", paired_record("rel", day(3),
                                                               "pass", label="release"))
    write(tmp_path, "g", "20260104T000000Z-plain", whole("plain", day(4), "other"))
    found = latest_paired(tmp_path, ["g", "h"], label="main")
    assert found["g"].record.run_id == "new" and found["h"] is None  # type: ignore[union-attr]
    late = latest_paired(tmp_path, ["g"], since=datetime(2026, 1, 5, tzinfo=UTC), label="main")
    assert late["g"] is None
    table = rows(found)
    text = markdown(table)
    assert "FAIL (worse)" in text and "-0.2200 (90% CI -0.300..-0.140)" in text
    assert "2.0% of A (server_avg)" in text and "| 5.4 | PASS | FAIL |" in text
    assert "no paired run" in text


def test_harness_paired_exit_codes(tmp_path: Path) -> None:
    paired = partial(_paired, tmp_path)
    write(tmp_path, "g", "20260101T000000Z-a", paired_record("a", day(1), "pass"))
    assert paired("g").returncode == 0
    assert paired("g", "missing").returncode == 3
    write(tmp_path, "g", "20260102T000000Z-b", paired_record("b", day(2), "fail"))
    result = paired("g", "--markdown")
    assert result.returncode == 1 and "FAIL (worse)" in result.stdout
    assert paired("--since", "not a time").returncode == 2


def test_compare_shows_the_finding_stored_with_a_one_run_side(tmp_path: Path) -> None:
    folder = write(tmp_path, "g", "20260101T000000Z-a", paired_record("a", day(1), "fail"))
    side = Side(name="b", records=[{"path": str(folder)}])
    found = stored_finding(side)
    assert found is not None
    line = finding_line(found)
    assert "paired gate FAIL (worse)" in line and "against run ref1 (sglang==0.5.23)" in line
    assert stored_finding(Side(name="two", records=[{"path": str(folder)}] * 2)) is None


def errored(run_id: str, started: str, label: str = "main") -> dict:
    return whole(run_id, started, label, measurement=None,
                 verdict={"status": "error", "reasons": ["launch: server exited with 1"]})


def test_only_the_latest_run_of_each_series_and_entry_is_judged(tmp_path: Path) -> None:
    """Issue 27, case 5: entries expanded (`q` covers `q.t06`), a latest run that errored
    is an error (exit 3), never the night before's pass; `--since` without names keeps an
    errored suite."""
    paired = partial(_paired, tmp_path)
    write(tmp_path, "q", "20260101T000000Z-a", paired_record("a", day(1), "pass"))
    failed_entry = {**paired_record("t", day(1), "fail"), "verdict": {"status": "fail"}}
    write(tmp_path, "q.t06", "20260101T000000Z-t", failed_entry)
    found = latest_paired(tmp_path, ["q"])
    assert list(found) == ["q", "q.t06"]
    assert paired("q").returncode == 1  # the entry's failure counts
    write(tmp_path, "g", "20260101T000000Z-a", paired_record("a", day(1), "pass"))
    write(tmp_path, "g", "20260102T000000Z-e", errored("e", day(2)))
    assert paired("g").returncode == 3
    assert "**error** (launch: server exited with 1)" in paired("g", "--markdown").stdout
    # --since without names: the errored suite is tonight's, the older ones are left out
    shown = paired("--since", day(2), "--json")
    assert shown.returncode == 3
    assert [r["series"] for r in json.loads(shown.stdout)] == ["g"]
    # a verdict the judge recorded stands over the gate's own status (floors failed)
    floors_failed = {**paired_record("f", day(3), "pass"), "verdict": {"status": "fail"}}
    write(tmp_path, "g", "20260103T000000Z-f", floors_failed)
    assert paired("g").returncode == 1
