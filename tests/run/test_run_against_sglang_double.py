"""`harness run` end to end against the SGLang test double: records, verdicts, cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.results.readers import read_run
from harness.results.record import RunRecord
from tests.fixtures.sglang_double import assert_no_orphans, server_pids


def only_run_dir(results: Path) -> Path:
    runs = list((results / "runs").glob("*/*/run.json"))
    assert len(runs) == 1, runs
    return runs[0].parent


def run_cli(suite: Path, results: Path, *extra: str) -> int:
    return main(["run", str(suite), "--results", str(results), "--no-progress", "--no-plot",
                 *extra])


def sequential_record(suite: Path, results: Path, exit_code: int,
                      edit: tuple[str, str] = ("", "")) -> RunRecord:
    """`harness run --sequential` of `suite` with `edit` made to its text: it must end with
    `exit_code`; its one record."""
    suite.write_text(suite.read_text().replace(*edit))
    assert run_cli(suite, results, "--sequential") == exit_code
    return RunRecord.model_validate_json((only_run_dir(results) / "run.json").read_text())


def test_pass_records_exact_accept_length(fake_env: dict[str, str], write_suite, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    assert run_cli(write_suite(floor=2.0), results) == 0
    out = capsys.readouterr().out
    assert "verdict: PASS" in out
    assert "TTFT  p50 " in out and "output tokens/s [" in out
    run_dir = only_run_dir(results)
    record = RunRecord.model_validate_json((run_dir / "run.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 8
    # appended as each request finished; `index` gives the submission order
    rows.sort(key=lambda r: r["index"])
    assert [r["question_index"] for r in rows] == list(range(5, 13))
    tokens = sum(r["completion_tokens"] for r in rows)
    steps = sum(r["verify_steps"] for r in rows)
    drafts = sum(r["correct_drafts"] for r in rows)
    measurement = record.measurement
    assert measurement is not None
    # judged in the floors' definition (server_avg by default), both kept
    assert measurement.metric == "server_avg"
    assert measurement.accept_length == pytest.approx((drafts + steps) / steps)
    assert measurement.accept_length_per_request == pytest.approx(tokens / steps)
    assert measurement.verify_steps == steps
    # SGLang's own figure, folded every iteration, covers the flushed window only: it is
    # the exact server_avg (warm-up left out)
    assert measurement.server_reported_accept_length == pytest.approx(measurement.accept_length)
    assert record.verdict.status == "pass"
    # every request streamed, its output's arrivals kept; streaming changed no count
    for row in rows:
        timing = row["timing"]
        assert timing["streamed"] and timing["note"] is None
        assert sum(timing["chunk_tokens"]) == row["completion_tokens"]
    latency = read_run(run_dir / "run.json").measurement.latency
    assert (latency.n_requests, latency.n_timed) == (8, 8)
    assert set(latency.definitions) >= {"ttft", "tpot", "itl", "e2e", "output_throughput"}
    assert latency.output_tok_s == pytest.approx(tokens / measurement.duration_s)
    assert latency.ttft_s.p50 <= latency.ttft_s.p99 and latency.ttft_s.p50_ci is not None
    assert record.launch is not None and "--tp-size" in record.launch.command
    assert record.provenance.env.get("CUDA_VISIBLE_DEVICES") == "0,1"
    assert record.build.engine == "sglang" and record.build.version == "0.5.23"
    assert record.provenance.data_sha256 and record.suite.sha256
    assert (run_dir / "server.log").read_text()
    assert_no_orphans(server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"])))


@pytest.mark.parametrize(("env", "floor", "code", "status", "reason", "printed"), [
    ({"FAKE_SGLANG_ACCEPT": "3.0"}, 5.4, 1, "fail", "below the floor", None),
    ({"FAKE_SGLANG_MODE": "no_meta"}, 1.0, 3, "error", None, "no verify count"),
    ({"FAKE_SGLANG_MODE": "crash_mid"}, 1.0, 3, "error", None, None),
], ids=["below_floor_exits_1", "missing_spec_metric_is_an_error_not_a_pass",
        "crash_mid_run_is_an_engine_error"])
def test_verdict_and_exit_code(fake_env: dict[str, str], write_suite, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str], env: dict[str, str],
                               floor: float, code: int, status: str, reason: str | None,
                               printed: str | None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    results = tmp_path / "results"
    assert run_cli(write_suite(floor=floor), results) == code
    if printed is not None:
        assert printed in capsys.readouterr().out
    record = json.loads((only_run_dir(results) / "run.json").read_text())
    assert record["verdict"]["status"] == status
    if reason is not None:
        assert reason in record["verdict"]["reasons"][0]
    if printed == "no verify count":  # nothing measured without the counts
        assert record["measurement"] is None
    assert_no_orphans(server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"])))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_harness_cleans_up(fake_env: dict[str, str], write_suite, tmp_path: Path,
                                     signum: signal.Signals) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "FAKE_SGLANG_DELAY_S": "3"}
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness", "run", str(write_suite(floor=1.0)),
         "--results", str(results), "--no-progress", "--no-plot"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        pids = server_pids(Path(fake_env["FAKE_SGLANG_PIDFILE"]), wait_s=30)
        logs = list(results.glob("runs/*/*/server.log"))
        deadline = time.monotonic() + 30
        while not (logs and "ready to roll" in logs[0].read_text()):
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.1)
            logs = list(results.glob("runs/*/*/server.log"))
        time.sleep(1.0)  # mid-request: every generation takes 3 s
        harness.send_signal(signum)
        output, _ = harness.communicate(timeout=60)
    finally:
        if harness.poll() is None:
            harness.kill()
    assert harness.returncode == 130, output
    assert "Traceback" not in output
    assert "partial record" in output
    assert_no_orphans(pids)
    record = json.loads((only_run_dir(results) / "run.json").read_text())
    assert record["verdict"]["status"] == "error"


def test_sequential_stopping_settles_early(fake_env: dict[str, str], write_suite,
                                           tmp_path: Path) -> None:
    """Far above the floor, the verdict is settled long before every question is sent."""
    results = tmp_path / "results"
    record = sequential_record(write_suite(floor=2.0, questions=150), results, 0)
    assert record.measurement is not None and record.measurement.stopped_early
    measurement = record.measurement
    sequential = measurement.sequential
    # continuous dispatch (concurrency 4): the rule saw exactly the questions before its
    # settling look; those in flight then were cancelled and named; every row that
    # finished is on disk and in the figure
    assert sequential["dispatch"] == "continuous"
    assert 30 <= sequential["looks"][-1] <= measurement.n_requests < 150
    assert measurement.n_requests <= sequential["looks"][-1] + 4
    assert len(sequential["cancelled"]) <= 4
    rows = [json.loads(line) for line in
            (only_run_dir(results) / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == measurement.n_requests
    asked = {row["question_index"] for row in rows}
    assert not asked & set(sequential["cancelled"])
    assert sequential["in_flight"] == 4
    assert sequential["in_flight_past_look"] == 4  # sequential_in_flight unset: every slot
    assert record.verdict.status == "pass"
    assert "the sequential rule settles above the floor" in record.verdict.reasons[0]


def test_sequential_in_flight_bounds_what_runs_past_a_look(fake_env: dict[str, str],
                                                          write_suite, tmp_path: Path) -> None:
    """workload.sequential_in_flight = 1: past the next look a question is sent only into
    an empty engine, so at the settle at most one request is cancelled; the record says
    what the dispatch was given."""
    record = sequential_record(write_suite(floor=2.0, questions=150), tmp_path / "results", 0,
                               ("concurrency = 4", "concurrency = 4\nsequential_in_flight = 1"))
    assert record.measurement is not None and record.measurement.stopped_early
    sequential = record.measurement.sequential
    assert (sequential["in_flight"], sequential["in_flight_past_look"]) == (4, 1)
    assert len(sequential["cancelled"]) <= 1
    assert sequential["looks"][-1] <= record.measurement.n_requests <= sequential["looks"][-1] + 1


def test_sequential_never_overrides_a_failed_accuracy_floor(
        fake_env: dict[str, str], write_suite, tmp_path: Path) -> None:
    """--sequential with an accuracy floor the build misses: FAIL, exit 1 (it once said PASS)."""
    record = sequential_record(write_suite(floor=2.0, questions=90), tmp_path / "results", 1,
                               ("accept_length = 2.0", "accept_length = 2.0\naccuracy = 0.99"))
    assert record.verdict.status == "fail"
    assert any("accuracy" in r and "below the floor" in r for r in record.verdict.reasons)
