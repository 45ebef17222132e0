"""[speedup] end to end on the CPU reference engine: `harness run` measures the suite, then
the target alone on the same prompts, and records both sides, the paired speedup figures
with their CIs, and the one judge's verdict on the speedup floors, both ways; a
target-alone run that fails is named, the speculative rows kept, and the run exits
non-zero. (4 questions of 24 tokens a side; the launches take the time.)"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from harness.builds import has_reference_dependencies
from harness.cli import main
from harness.engines.reference_adapter import ReferenceAdapter
from harness.results.readers import read_requests, read_run, read_target_alone
from tests.tiny_variants import PACED_ENGINE, tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e,  # whole runs, minutes: nox -s e2e
              pytest.mark.skipif(not has_reference_dependencies(sys.executable),
                                 reason="this environment lacks the reference extra")]


@pytest.fixture(autouse=True)
def one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_REFERENCE_WORKERS", "1")  # a quicker launch, the same figures


def speedup_suite(folder: Path, **floors: float) -> Path:
    # paced forwards and answers long enough to stream in more than one chunk on a loaded
    # machine (a TPOT of 0 leaves no ratio)
    document = tomllib.loads(tiny_variant("tiny_speedup", floor=1.0, engine=PACED_ENGINE,
                                          questions=4, max_tokens=64, concurrency=2,
                                          warmup_requests=1))
    document["speedup"] = {"baseline": "target_only"}
    document["floors"] |= floors
    document.pop("baselines", None)
    path = folder / "tiny_speedup.toml"
    path.write_text(tomli_w.dumps(document))
    return path


def run(suite: Path, results: Path, capsys: pytest.CaptureFixture[str]
        ) -> tuple[int, str, Path]:
    code = main(["run", str(suite), "--results", str(results), "--no-progress", "--no-plot"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("record: "))
    return code, out, Path(line.removeprefix("record: "))


def test_both_sides_recorded_paired_and_judged_both_ways(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a TPOT floor any measured run meets, a throughput floor no CPU run reaches
    suite = speedup_suite(tmp_path, speedup_tpot=0.001, speedup_throughput=999.0)
    code, out, folder = run(suite, tmp_path / "results", capsys)
    assert code == 1, out  # below a floor
    record = read_run(folder)
    assert record.verdict is not None and record.verdict.status == "fail"
    reasons = "\n".join(record.verdict.reasons)
    assert "speedup_tpot (speedup_tpot)" in reasons and ">= floor 0.001" in reasons
    assert "speedup_throughput (speedup_throughput)" in reasons
    assert "is below the floor: needs >= 999" in reasons
    # both sides: the speculative rows and the target alone's, the same prompts
    spec_rows, alone_rows = read_requests(folder, record), read_target_alone(folder)
    assert len(spec_rows) == len(alone_rows) == 4
    assert {r.question_index for r in spec_rows} == {r.question_index for r in alone_rows}
    assert all(r.verify_steps > 0 for r in spec_rows)
    assert all(r.verify_steps == 0 and r.timing and r.timing.streamed for r in alone_rows)
    # greedy decoding is lossless: the target alone says what speculation said
    assert [r.output for r in sorted(spec_rows, key=lambda r: r.question_index)] == \
        [r.output for r in sorted(alone_rows, key=lambda r: r.question_index)]
    alone = record.target_alone
    assert alone is not None and alone.status == "measured" and alone.n_requests == 4
    assert alone.launch is not None and "--no-speculation" in alone.launch.command
    assert "--block-size" not in alone.launch.command
    assert alone.latency is not None and alone.latency.tpot_s is not None
    found = record.measurement.speedup if record.measurement else None
    assert found is not None and found.n_prompts == 4
    assert found.definitions["speedup_tpot"] and found.definitions["speedup_throughput"]
    for value, ci in ((found.tpot, found.tpot_ci), (found.throughput, found.throughput_ci)):
        assert value is not None and value > 0 and ci is not None
        assert ci[0] <= value <= ci[1]
    # the figure is the ratio of the two sides' stated figures
    assert found.tpot == pytest.approx(found.target_alone_tpot_s / found.speculative_tpot_s)
    assert found.throughput == pytest.approx(
        found.speculative_output_tok_s / found.target_alone_output_tok_s)
    assert "speedup over the target alone (4 prompts paired" in out
    assert (folder / "target-alone.log").is_file()


def test_a_target_alone_that_fails_is_named_and_nothing_is_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def dies(self: Any, command: list[str]) -> list[str]:
        return [sys.executable, "-c", "import sys; sys.exit(3)"]

    monkeypatch.setattr(ReferenceAdapter, "target_alone_command", dies)
    suite = speedup_suite(tmp_path)  # no speedup floor: a missing figure is still an error
    code, out, folder = run(suite, tmp_path / "results", capsys)
    assert code == 3, out  # an engine error, never a pass
    record = read_run(folder)
    assert record.verdict is not None and record.verdict.status == "error"
    reasons = "\n".join(record.verdict.reasons)
    assert "the target-alone run failed" in reasons and "exited" in reasons
    assert "accept length" in reasons  # the speculative run was judged as ever
    assert record.target_alone is not None and record.target_alone.status == "failed"
    assert record.measurement is not None and record.measurement.n_requests == 4
    assert len(read_requests(folder, record)) == 4  # the speculative rows kept
    assert record.measurement.speedup is not None and record.measurement.speedup.tpot is None
    json.loads((folder / "run.json").read_text())  # one readable record
