"""A paired record whose difference CI has a bound of exactly 0.0 (two identical builds:
every question's difference is 0) is a valid record: every reader keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.metrics.paired_gate import Tolerance, paired_test
from harness.results import possible
from harness.results.layout import RUN_FILE
from harness.results.readers import read_run
from harness.results.store import load_runs
from tests.publish.history import night


def identical_pair(results: Path) -> Path:
    """A night paired against a build whose every answer was the same: B - A = 0, CI
    [0.0, 0.0], as the gate computes it."""
    folder = night(results, day=0, accept=2.6, paired_with="ref00001")
    pairs = ([26, 25, 27, 26], [10, 10, 10, 10])
    result = paired_test(pairs, pairs, Tolerance(0.02, True, "per_request")).to_dict()
    assert tuple(result["difference_ci"]) == (0.0, 0.0)
    data = json.loads((folder / RUN_FILE).read_text())
    data["paired"]["result"] = result
    (folder / RUN_FILE).write_text(json.dumps(data))
    return folder


def test_an_interval_bound_of_zero_is_a_bound() -> None:
    possible.interval("d", [0.0, 0.0], -9.0, 9.0, 0.0, "difference")
    possible.interval("d", [-0.5, 0.0], -9.0, 9.0, -0.2, "difference")
    possible.interval("p", [0.0, 0.0], 0.0, 1.0, 0.0, "rate")
    with pytest.raises(possible.BadFile, match="outside its own interval"):
        possible.interval("d", [-0.5, 0.0], -9.0, 9.0, 0.1, "difference")
    with pytest.raises(possible.BadFile, match="above high"):
        possible.interval("d", [0.0, -0.5], -9.0, 9.0, None, "difference")


def test_a_pair_of_identical_builds_reaches_every_reader(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = identical_pair(tmp_path)
    finding = read_run(folder).paired
    assert finding is not None and finding.result.difference_ci == (0.0, 0.0)
    runs = load_runs(tmp_path)
    assert list(runs["run_id"]) == [folder.name[-8:]] and runs.attrs["skipped"] == []
    capsys.readouterr()
    assert main(["paired", "--results", str(tmp_path), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["run_id"] == folder.name[-8:] and row["status"] == "pass"
    assert row["difference"] == 0.0 and row["ci"] == [0.0, 0.0]
    assert main(["trend", "--results", str(tmp_path), "--json"]) == 0
    (summary,) = json.loads(capsys.readouterr().out)
    assert summary["verdict"] == "pass"
