"""Workload kinds end to end on the CPU reference engine: entries on one server, sampled
runs that repeat exactly, per-category and per-position tables, the PNGs, and the chat
protocol (`tiny_spec_bench_cpu`) once the reference engine serves SGLang's chat route.

Every stage runs for real (checkpoints from the cache, a server process, HTTP, records).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.builds import has_reference_dependencies
from harness.results.record import RunRecord
from harness.suite.model import SUITES_DIR
from tests.tiny_variants import tiny_variant

pytestmark = [pytest.mark.slow, pytest.mark.e2e]  # nox -s e2e

TINY_SPEC_BENCH = SUITES_DIR / "tiny_spec_bench_cpu.toml"

# A sampled entry beside the greedy workload, both small: one server, two series.
ENTRY = """
[[workloads]]
name = "t06"
kind = "gsm8k"
shots = 0
questions = 6
max_tokens = 48
concurrency = 3
temperature = 0.6
top_p = 0.95
sampling_seed = 5

[workloads.floors]
accept_length = 1.0
"""


def harness_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, env=dict(os.environ), timeout=1800)


def _needs_engine() -> None:
    if not has_reference_dependencies(sys.executable):
        pytest.skip("this environment lacks the reference extra (pip install -e '.[reference]')")


def _records(results: Path, series: str) -> list[tuple[RunRecord, list[dict]]]:
    found = []
    for run_dir in sorted(p.parent for p in (results / "runs" / series).glob("*/run.json")):
        record = RunRecord.model_validate_json((run_dir / "run.json").read_text())
        rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().split(
            "\n") if line.strip()]
        found.append((record, sorted(rows, key=lambda row: row["index"])))  # file: as finished
    return found


@pytest.fixture(scope="module")
def two_entry_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny suite cut to 6 questions with a T = 0.6 entry, run twice."""
    _needs_engine()
    folder = tmp_path_factory.mktemp("entries")
    suite = folder / "tiny_entries.toml"
    suite.write_text(tiny_variant("tiny_entries", floor=1.0, questions=6, max_tokens=48)
                     + ENTRY)
    results = folder / "results"
    for _ in range(2):
        done = harness_cli("run", str(suite), "--results", str(results), "--no-progress")
        assert done.returncode == 0, done.stdout + done.stderr
    return results


def test_each_entry_is_its_own_record(two_entry_runs: Path) -> None:
    greedy = _records(two_entry_runs, "tiny_entries")
    sampled = _records(two_entry_runs, "tiny_entries.t06")
    assert len(greedy) == len(sampled) == 2
    for record, rows in sampled:
        assert record.suite.entry == "t06" and record.suite.name == "tiny_entries.t06"
        assert record.suite.document["workload"]["temperature"] == 0.6
        assert record.suite.document["floors"]["accept_length"] == 1.0
        assert record.workload.sampling_seed == 5 and record.workload.temperature == 0.6
        assert record.verdict.status == "pass"
        assert {row["category"] for row in rows} == {"gsm8k"}
        assert record.measurement.categories["gsm8k"].n_prompts == 6
    for record, _ in greedy:
        assert record.suite.entry is None and record.workload.sampling_seed is None
        assert record.workload.data_sha256 == record.provenance.data_sha256
        # the series' document is the suite without its entries: history unaffected
        assert "workloads" not in record.suite.document
    # one server launch served both entries of a run: the same port and launch line
    assert greedy[0][0].launch == sampled[0][0].launch


def test_sampled_runs_repeat_exactly(two_entry_runs: Path) -> None:
    first, second = _records(two_entry_runs, "tiny_entries.t06")
    assert first[0].measurement.accept_length == second[0].measurement.accept_length
    assert [r["output"] for r in first[1]] == [r["output"] for r in second[1]]
    assert first[0].workload.prompts_sha256 == second[0].workload.prompts_sha256
    greedy = _records(two_entry_runs, "tiny_entries")
    # sampling changed what was generated (seeded, so differently from greedy)
    assert [r["output"] for r in first[1]] != [r["output"] for r in greedy[0][1]]


def test_position_tables_and_pngs(two_entry_runs: Path) -> None:
    for series in ("tiny_entries", "tiny_entries.t06"):
        for record, _ in _records(two_entry_runs, series):
            measurement = record.measurement
            rates, cis = measurement.per_position_acceptance, measurement.per_position_ci
            assert rates and cis and len(rates) == len(cis)
            for rate, (low, high) in zip(rates, cis, strict=True):
                assert low <= rate <= high
    run_dir = next((two_entry_runs / "runs" / "tiny_entries.t06").glob("*/run.json")).parent
    for name in ("accept_length.png", "categories.png", "server.log"):
        assert (run_dir / name).is_file(), name


@pytest.fixture(scope="module")
def spec_bench_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _needs_engine()
    results = tmp_path_factory.mktemp("spec_bench") / "results"
    # both entries once, then the sampled entry again (its figures must repeat)
    for entries in ((), ("--entry", "t06")):
        done = harness_cli("run", str(TINY_SPEC_BENCH), "--results", str(results),
                           "--no-progress", *entries)
        assert done.returncode == 0, done.stdout + done.stderr
    return results


def test_tiny_spec_bench_passes_per_category(spec_bench_runs: Path) -> None:
    for record, rows in _records(spec_bench_runs, "tiny_spec_bench_cpu"):
        assert record.verdict.status == "pass", record.verdict.reasons
        categories = record.measurement.categories
        assert set(categories) == {"mt_bench", "translation", "summarization", "qa",
                                   "math_reasoning", "rag"}
        assert all(result.n_prompts == 3 for result in categories.values())
        assert categories["mt_bench"].n_requests == 6  # two turns each
        assert record.workload.protocol == "chat"
        assert record.workload.route == "/v1/chat/completions"
        assert record.workload.chat_template_sha256 is not None
        assert {row["turn"] for row in rows if row["category"] == "mt_bench"} == {0, 1}
        assert record.measurement.per_position_ci
        run_dir = next(d for d in (spec_bench_runs / "runs" / "tiny_spec_bench_cpu").glob("*")
                       if d.is_dir() and d.name.endswith(record.run_id))
        assert (run_dir / "categories.png").is_file()


def test_tiny_spec_bench_sampled_entry_repeats(spec_bench_runs: Path) -> None:
    first, second = _records(spec_bench_runs, "tiny_spec_bench_cpu.t06")
    assert first[0].verdict.status == second[0].verdict.status == "pass"
    assert first[0].measurement.accept_length == second[0].measurement.accept_length
    assert {k: v.accept_length for k, v in first[0].measurement.categories.items()} == {
        k: v.accept_length for k, v in second[0].measurement.categories.items()}
    assert [r["output"] for r in first[1]] == [r["output"] for r in second[1]]
