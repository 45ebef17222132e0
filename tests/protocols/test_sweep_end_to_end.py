"""`harness sweep` end to end on the CPU reference engine: concurrency 1 and 4 on one
launch, one normal run record per point (read by `trend`, `compare` and `plot` through
the one door), the sweep's record and plot, and the concurrency gate passing. The
reference engine decodes each request alone (docs/reference-engine.md), so its accept
length is the same at every concurrency: the gate passes at any tolerated drop; the gate's
failure is shown on the SGLang double, whose acceptance falls with the running batch
(test_sweep_against_sglang_double.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from harness.results.readers import read_requests, read_run
from harness.results.sweeps import read_sweep
from tests.protocols.harness_cli import run_harness
from tests.tiny_variants import tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e,  # nox -s e2e
              pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                                 reason="this environment lacks the reference extra")]

QUESTIONS = 8


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, timeout=1200)


def test_a_sweep_of_one_and_four(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_sweep.toml"
    suite.write_text(tiny_variant("tiny_sweep", floor=1.5, questions=QUESTIONS, max_tokens=32,
                                  warmup_requests=1))
    results = tmp_path / "results"
    done = harness("sweep", str(suite), "--concurrency", "4,1", "--results", str(results),
                   "--max-drop", "0.02", "--no-progress")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr

    # one normal record per point, the concurrency in its series, document and latency
    folders = {}
    for concurrency in (1, 4):
        [run_dir] = [p.parent for p in (results / "runs" / f"tiny_sweep.c{concurrency}")
                     .glob("*/run.json")]
        record = read_run(run_dir)
        assert record.suite.name == f"tiny_sweep.c{concurrency}"
        assert record.suite.entry == f"c{concurrency}"
        assert record.suite.document["workload"]["concurrency"] == concurrency
        assert record.verdict is not None and record.verdict.status == "pass"
        latency = record.measurement.latency
        assert latency is not None and latency.concurrency == concurrency
        assert latency.tpot_s is not None and latency.output_tok_s is not None
        assert len(read_requests(run_dir, record, strict=True)) == QUESTIONS
        folders[concurrency] = (run_dir, record)
    assert folders[1][1].launch == folders[4][1].launch  # one server for both points

    # printed per point: accept length with its definition and CI, the speed figures
    for concurrency in (1, 4):
        record = folders[concurrency][1]
        line = next(line for line in out.splitlines()
                    if line.startswith(f"concurrency {concurrency}:"))
        assert f"accept length (server_avg) {record.measurement.accept_length:.4f}" in line
        assert "95% CI" in line
    assert out.count("TPOT") >= 2 and out.count("output tokens/s") >= 2
    assert "definition" in out

    # the gate: accept length at 4 within 2% of concurrency 1, paired by prompt
    assert "concurrency 4: relative gate PASS" in out
    assert "sweep: PASS" in out

    # the sweep's own record and plot
    [sweep_dir] = [p.parent for p in (results / "sweeps" / "tiny_sweep").glob("*/sweep.json")]
    sweep = read_sweep(sweep_dir)
    assert [point.concurrency for point in sweep.points] == [1, 4]
    assert [point.run_id for point in sweep.points] == [folders[1][1].run_id,
                                                        folders[4][1].run_id]
    assert sweep.metric == "server_avg" and "verify step" in sweep.definition
    assert sweep.gate is not None and sweep.gate.max_drop == 0.02
    [finding] = sweep.gate.findings
    assert finding.concurrency == 4 and finding.status == "pass"
    assert finding.result["decision"] == "not_worse" and finding.result["n"] == QUESTIONS
    assert sweep.status == "pass"
    png = sweep_dir / "sweep.png"
    assert png.stat().st_size > 10_000
    assert f"plot:   {png}" in out

    # the points are normal runs: the other commands read them through the one door
    compare = harness("compare", str(folders[1][0]), str(folders[4][0]), "--results",
                      str(results))
    assert compare.returncode == 0, compare.stdout + compare.stderr
    # each concurrency is a series of its own (the main series was never run here)
    trend = harness("trend", "--results", str(results), "--json")
    assert trend.returncode == 0, trend.stdout + trend.stderr
    assert {item["suite"] for item in json.loads(trend.stdout)} == {"tiny_sweep.c1",
                                                                   "tiny_sweep.c4"}
    redraw = harness("plot", str(sweep_dir), "--results", str(results),
                     "--out", str(tmp_path / "again.png"))
    assert redraw.returncode == 0, redraw.stdout + redraw.stderr
    assert (tmp_path / "again.png").stat().st_size > 10_000

    # an impossible gate with the same figures: the tolerated drop is refused, not judged
    refused = harness("sweep", str(suite), "--concurrency", "1,4", "--results", str(results),
                      "--max-drop", "0")
    assert refused.returncode == 2 and "--max-drop" in refused.stderr
