"""Speedup across concurrency and across builds, end to end on the CPU reference engine:
`harness sweep` of a suite with [speedup] measures the target alone at every point (one
launch of each server) and prints, records and plots each point's speedup; `harness run
--against` with `[speedup] max_drop` judges B's speedups against the reference build's,
paired by question, and records the finding that `harness paired` shows. CPU speedups are
what they are: the test asserts the pipeline and holds the verdict to what the gate found,
not a figure (no two CPU runs time alike; the deterministic cases are
tests/protocols/test_paired_speedup_gate.py's)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import tomli_w

from harness.analysis.sweep_plot import sweep_figure, sweep_points
from harness.results.readers import read_run
from harness.results.sweeps import read_sweep
from tests.protocols.test_sweep_end_to_end import harness, pytestmark  # noqa: F401  (its runner, marks)
from tests.tiny_variants import PACED_ENGINE, tiny_variant

QUESTIONS = 4


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_REFERENCE_WORKERS", "1")  # a quicker launch, the same figures


def speedup_suite(folder: Path) -> Path:
    # paced forwards and answers long enough that a busy client still reads them in more
    # than one chunk: an answer whose tokens after the first all arrive at once has a TPOT
    # of 0, no ratio
    document = tomllib.loads(tiny_variant("tiny_speed", floor=1.0, engine=PACED_ENGINE,
                                          questions=QUESTIONS, max_tokens=64, concurrency=2,
                                          warmup_requests=1))
    document["speedup"] = {"baseline": "target_only", "max_drop": 0.9}
    document.pop("baselines", None)
    path = folder / "tiny_speed.toml"
    path.write_text(tomli_w.dumps(document))
    return path


def test_speedup_at_each_concurrency_and_against_a_reference_build(tmp_path: Path) -> None:
    suite = speedup_suite(tmp_path)
    results = tmp_path / "results"
    done = harness("sweep", str(suite), "--concurrency", "1,2", "--results", str(results),
                   "--no-progress")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("speedup over the target alone") == 2
    [sweep_dir] = [p.parent for p in (results / "sweeps" / "tiny_speed").glob("*/sweep.json")]
    sweep = read_sweep(sweep_dir)
    points = sweep_points(sweep, results)
    assert [c for c, _ in points] == [1, 2]
    for concurrency, record in points:
        found = record.measurement.speedup
        assert found is not None and found.tpot is not None and found.throughput is not None
        assert found.per_question is not None and len(found.per_question) == QUESTIONS
        assert record.target_alone is not None and record.target_alone.status == "measured"
        assert record.target_alone.latency.concurrency == concurrency
    assert len(sweep_figure(sweep, points).axes) == 4  # accept length, TPOT, rate, speedup
    assert (sweep_dir / "sweep.png").stat().st_size > 10_000

    paired = harness("run", str(suite), "--build", "reference:noise=0", "--against",
                     "reference:noise=0", "--results", str(results), "--no-progress",
                     "--no-plot")
    # identical greedy builds: accept length is the same, answer for answer; wall-clock
    # speedups on a shared CPU are not (a 4-question TPOT swings by far more than 90%), so
    # the speedup gate may find either way: the test holds what it found to the record
    assert paired.returncode in (0, 1), paired.stdout + paired.stderr
    assert "relative gate PASS" in paired.stdout and "floors: PASS" in paired.stdout
    line = next(line for line in paired.stdout.splitlines() if line.startswith("record: "))
    record = read_run(line.removeprefix("record: "))
    assert record.paired is not None and record.paired.speedup is not None
    assert [f.figure for f in record.paired.speedup] == ["speedup_tpot", "speedup_throughput"]
    gate = record.paired.gate
    assert gate is not None and gate.inconclusive in ("pass", "fail")
    for finding in record.paired.speedup:
        assert finding.decision in ("not_worse", "worse", "inconclusive")
        assert finding.status == {"not_worse": "pass", "worse": "fail"}.get(
            finding.decision, gate.inconclusive)  # inconclusive: as the suite's [gate] says
        assert finding.n == QUESTIONS and finding.max_drop == 0.9
        assert finding.ratio == pytest.approx(finding.b / finding.a, rel=1e-9)
        assert f"speedup gate ({finding.figure}) {finding.status.upper()}" in paired.stdout
    failed = any(f.status == "fail" for f in record.paired.speedup)
    assert record.verdict is not None
    assert record.verdict.status == ("fail" if failed else "pass")
    assert paired.returncode == (1 if failed else 0)
    # every paired series of the results (the sweep's points were not paired: left out)
    report = harness("paired", "--results", str(results), "--json")
    assert report.returncode == paired.returncode, report.stdout + report.stderr
    [row] = [r for r in json.loads(report.stdout) if r["series"] == "tiny_speed"]
    assert row["speedup_gate"].startswith("tpot ")
    assert all(f"{f.figure.removeprefix('speedup_')} {f.status.upper()} B/A" in
               row["speedup_gate"] for f in record.paired.speedup)
