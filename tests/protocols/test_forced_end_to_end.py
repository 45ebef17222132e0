"""`harness forced` end to end on the CPU reference engine: the real run and a forced
full block, each a launch, the ladder's one target alone measured after the real run and
reused by the forced point; the ladder's record (forced and achieved accept length and the
speedups per point, the real run marked, the break-even) and plot; each point a normal run
record whose suite carries the knob in engine.env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from harness.results.readers import read_run, read_target_alone
from reference_engine.forced import LENGTH_ENV
from tests.protocols.harness_cli import run_harness
from tests.tiny_variants import PACED_ENGINE, tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e,  # nox -s e2e: three and six launches
              pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                                 reason="this environment lacks the reference extra")]



def harness(*args: str, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
    return run_harness(*args, timeout=timeout)


def test_the_real_run_and_a_forced_full_block(tmp_path: Path) -> None:
    suite = tmp_path / "tiny_forced.toml"
    # paced forwards and answers long enough that a busy client still reads them in more
    # than one chunk: an answer whose tokens after the first all arrive at once has a TPOT
    # of 0, no ratio
    suite.write_text(tiny_variant("tiny_forced", floor=1.5, engine=PACED_ENGINE, questions=3,
                                  max_tokens=64, warmup_requests=1))
    results = tmp_path / "results"
    done = harness("forced", str(suite), "--ladder", "8", "--results", str(results),
                   "--no-progress")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "break-even (speedup_tpot):" in out and "forced: PASS" in out

    [folder] = (results / "forced" / "tiny_forced").iterdir()
    record = json.loads((folder / "forced.json").read_text())
    assert (folder / "forced.png").stat().st_size > 0
    real, full = record["points"]
    assert real["forced"] is None and full["forced"] == 8.0
    assert full["achieved"] == 8.0  # every verify step committed the whole block
    assert 1.0 < real["achieved"] < 8.0  # the draft's own acceptance
    for point in (real, full):
        assert point["status"] == "pass"
        assert point["speedup_tpot"] > 0 and point["speedup_throughput"] > 0
        assert point["speedup_tpot_ci"][0] <= point["speedup_tpot"] <= point["speedup_tpot_ci"][1]
    assert full["settings"] == {LENGTH_ENV: "8", "REFERENCE_SIMULATE_ACC_METHOD": "match-expected"}
    assert real["settings"] == {}
    assert record["block_size"] == 8 and record["metric"] == "server_avg"
    assert {b["figure"] for b in record["break_even"]} == {"speedup_tpot", "speedup_throughput"}
    # one forced point: no curve to cross, said so
    assert all(b["accept_length"] is None and b["note"].startswith("none in range")
               for b in record["break_even"])

    # each point a normal run record, read through the one door, the knob in its suite
    run = read_run(results / full["run_dir"])
    assert run.suite.name == "tiny_forced-forced-8"
    engine = run.suite.document["engine"]
    assert isinstance(engine, dict) and engine["env"][LENGTH_ENV] == "8"
    assert run.measurement is not None and run.measurement.accept_length == 8.0
    assert run.measurement.speedup is not None
    assert run.measurement.speedup.tpot == pytest.approx(full["speedup_tpot"])
    real_run = read_run(results / real["run_dir"])
    assert real_run.measurement is not None
    assert real_run.measurement.accept_length == pytest.approx(real["achieved"])
    # one target alone for the ladder: measured after the real run, the forced point's
    # speedup over it (three launches, not four)
    assert real_run.target_alone is not None and real_run.target_alone.status == "measured"
    assert run.target_alone is not None and run.target_alone.status == "reused"
    assert run.target_alone.reused_from == real_run.run_id
    assert real_run.run_id in run.measurement.speedup.definitions["pairing"]
    assert read_target_alone(results / full["run_dir"]) == \
        read_target_alone(results / real["run_dir"])
    assert "target_alone" in record["definitions"]


def test_against_names_the_draft_when_only_the_draft_lost(tmp_path: Path) -> None:
    """A noisy draft (B) against a clean one (A), the same engine otherwise: at A's real
    accept length forced on both, the system's speed is the same (its share passes);
    B's real accept length is lower (the draft's share fails): exit 1, the draft named."""
    suite = tmp_path / "tiny_split.toml"
    # answers long enough that a busy client still reads them in more than one chunk (as
    # above): at 16 tokens a loaded CI read every forced answer whole, a TPOT of 0 on both
    # sides, and the system's share had no ratio
    suite.write_text(tiny_variant("tiny_split", floor=1.0, engine=PACED_ENGINE, questions=4,
                                  max_tokens=64, warmup_requests=1)
                     + "\n[forced]\nsystem_max_drop = 0.5\ndraft_relative_drop = 0.05\n")
    results = tmp_path / "results"
    # six launches: both builds' real and forced points, and each build's target alone
    # once (after its real run; B's forced point reuses B's)
    done = harness("forced", str(suite), "--ladder", "real", "--build", "reference:noise=0.5",
                   "--against", "reference:noise=0", "--results", str(results),
                   "--no-progress", timeout=3000)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "whose fault: the draft lost the speedup" in out
    assert "system PASS" in out and "draft FAIL" in out

    folders = sorted((results / "forced" / "tiny_split").iterdir())
    records = [json.loads((f / "forced.json").read_text()) for f in folders]
    [a] = [r for r in records if r["split"] is None]
    [b] = [r for r in records if r["split"] is not None]
    split = b["split"]
    assert split["blamed"] == ["draft"] and split["against_forced_id"] == a["forced_id"]
    assert split["system_status"] == "pass" and split["draft_status"] == "fail"
    # B forced at A's own real accept length: the same acceptance on both builds
    a_real = next(p for p in a["points"] if p["forced"] is None)["achieved"]
    [b_forced] = [p for p in b["points"] if p["forced"] is not None]
    assert b_forced["forced"] == pytest.approx(round(a_real, 2))
    assert b_forced["achieved"] == pytest.approx(b_forced["forced"], abs=0.3)
    b_real = next(p for p in b["points"] if p["forced"] is None)
    alone = read_run(results / b_forced["run_dir"]).target_alone
    assert alone is not None and alone.status == "reused"
    assert alone.reused_from == b_real["run_id"]  # its own build's, never A's
    assert split["draft"]["b"] < split["draft"]["a"]
    assert {s["figure"] for s in split["system"]} == {"speedup_tpot", "speedup_throughput"}
    [b_folder] = [f for f, r in zip(folders, records, strict=True) if r["split"] is not None]
    assert (b_folder / "forced.png").stat().st_size > 0  # B's curve with A's beside it
