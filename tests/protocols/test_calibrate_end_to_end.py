"""`harness calibrate` end to end on the CPU reference engine, and `harness show` reading
the record it wrote (a 20-question variant of the tiny suite, two launches)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from tests.protocols.harness_cli import run_harness
from tests.tiny_variants import tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e



def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, timeout=1800)


@pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                    reason="this environment lacks the reference extra")
def test_calibrate_writes_a_record_that_show_reads(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_cal.toml"
    suite.write_text(tiny_variant("tiny_cal", floor=1.5, questions=20))
    results = tmp_path / "results"
    made = harness("calibrate", str(suite), "--runs", "2", "--build", "reference:noise=0",
                   "--results", str(results))
    assert made.returncode == 0, made.stdout + made.stderr
    path = Path(re.search(r"^record: (.+)$", made.stdout, re.M).group(1))
    record = json.loads(path.read_text())
    assert path.parent == results / "calibrations" / "tiny_cal"
    assert record["kind"] == "calibration" and record["n_runs"] == 2
    assert record["build"]["spec"] == "reference:noise=0" and record["host"]["tp_size"] == 1
    series = record["series"]["tiny_cal"]
    assert len(series["runs"]) == 2 and series["n_questions"] == 20
    # greedy decoding on the CPU reference engine repeats exactly across launches
    assert series["run_sd"] == 0 and series["identical_answers"]
    assert series["suggested_floor"] < series["mean"]
    for run_id in series["runs"]:
        assert list((results / "runs" / "tiny_cal").glob(f"*-{run_id}/run.json"))

    shown = harness("show", str(suite), "--results", str(results))
    assert "floors and tolerance: external" in shown.stdout  # the variant names none
    text = suite.read_text().replace(
        re.search(r'^calibration = .*$', suite.read_text(), re.M).group(0),
        f'calibration = "calibration: {record["calibration_id"]}"')
    suite.write_text(text)
    shown = harness("show", str(suite), "--results", str(results))
    assert shown.returncode == 0, shown.stderr
    assert f"calibration {record['calibration_id']}" in shown.stdout
    assert "suggested floor" in shown.stdout and "run-to-run sd 0.0000" in shown.stdout
