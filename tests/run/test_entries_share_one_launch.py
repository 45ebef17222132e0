"""A suite with two workload entries against the SGLang test double: one launch, two
records, and a failure in the second entry that leaves the first one's verdict intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from tests.fixtures.sglang_double import SUITE_TEMPLATE, crash_after

ENTRY = """
[[workloads]]
name = "t06"
questions = 4
shots = 5
max_tokens = 64
concurrency = 2
warmup_requests = 1
temperature = 0.6
top_p = 0.95
sampling_seed = 3

[workloads.floors]
accept_length = 1.5
"""


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "fake_pair.toml"
    path.write_text(SUITE_TEMPLATE.format(name="fake_pair", floor=1.0, questions=4, timeout=30)
                    + ENTRY)
    return path


def _record(results: Path, series: str) -> tuple[dict, Path]:
    [run_dir] = [p.parent for p in (results / "runs" / series).glob("*/run.json")]
    return json.loads((run_dir / "run.json").read_text()), run_dir


def test_two_entries_one_launch_two_records(fake_env: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    code = main(["run", str(_suite(tmp_path)), "--results", str(results), "--no-progress",
                 "--no-plot"])
    out = capsys.readouterr().out
    assert code == 0, out
    main_record, main_dir = _record(results, "fake_pair")
    entry_record, entry_dir = _record(results, "fake_pair.t06")
    assert main_record["suite"]["entry"] is None and entry_record["suite"]["entry"] == "t06"
    assert main_record["launch"] == entry_record["launch"]  # one server for both
    assert main_record["verdict"]["status"] == entry_record["verdict"]["status"] == "pass"
    assert entry_record["suite"]["document"]["floors"]["accept_length"] == 1.5
    assert entry_record["workload"]["temperature"] == 0.6
    for folder in (main_dir, entry_dir):
        assert (folder / "server.log").read_text() == (main_dir / "server.log").read_text()
        assert len((folder / "requests.jsonl").read_text().splitlines()) == 4
    assert "fake_pair.t06: PASS" in out and f"fake_pair.t06: record {entry_dir}" in out


def test_a_crash_in_the_second_entry(fake_env: dict[str, str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    crash_after(monkeypatch, 7)  # main: 1 + 4 requests; t06 dies
    results = tmp_path / "results"
    code = main(["run", str(_suite(tmp_path)), "--results", str(results), "--no-progress",
                 "--no-plot"])
    assert code == 3, capsys.readouterr().out
    main_record, _ = _record(results, "fake_pair")
    entry_record, entry_dir = _record(results, "fake_pair.t06")
    assert main_record["verdict"]["status"] == "pass"
    assert entry_record["verdict"]["status"] == "error"
    assert entry_record["stage"] == "measurement"
    assert "server exited" in entry_record["verdict"]["reasons"][0]
    partial = entry_record["measurement"]
    assert partial is None or partial["partial"] is True
    rows = (entry_dir / "requests.jsonl").read_text().splitlines()
    assert len(rows) < 4
