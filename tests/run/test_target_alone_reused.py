"""A run given another run's target alone (`RunOptions.target_alone_from`, how a forced
ladder's points share their real run's: harness.run.baseline.reuse_target_alone) takes it
only where it measured exactly the questions the run answered: its rows and log copied
beside the run's, `target_alone` "reused" naming the run, the speedup's pairing saying
whose. Anything else (other questions, a source with no measured target alone, a source
that cannot be read) is left to be measured as usual, and a record claiming reuse without
naming the source is refused by the one door."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.metrics.latency import summarise_latency
from harness.metrics.speedup import DEFINITIONS
from harness.results.layout import RUN_FILE, TARGET_ALONE_FILE, TARGET_ALONE_LOG
from harness.results.readers import read_run, read_target_alone
from harness.results.record import (
    LaunchInfo,
    Measurement,
    RequestRow,
    RequestTiming,
    TargetAloneInfo,
    WorkloadInfo,
)
from harness.results.writer import RowLog
from harness.run.baseline import reuse_target_alone
from harness.run.entry_run import EntryRun
from harness.run.outcome import RunOptions
from harness.suite.model import load_suite
from tests.results.records import make_night
from tests.tiny_variants import tiny_variant

START = datetime(2026, 1, 2, tzinfo=UTC)


def _row(question: int, tpot: float, verify_steps: int, tokens: int = 11) -> RequestRow:
    chunks = [0.1 + tpot * k for k in range(tokens)]  # one token a chunk
    return RequestRow(index=question, question_index=question, completion_tokens=tokens,
                      verify_steps=verify_steps, spec_accept_length=0.0 if not verify_steps
                      else tokens / verify_steps, latency_s=chunks[-1],
                      timing=RequestTiming(streamed=True, ttft_s=chunks[0], chunk_s=chunks))


def _source(root: Path, questions: list[int], status: str = "measured",
            like: EntryRun | None = None) -> Path:
    """A run folder whose target alone measured `questions` at 30 ms a token; `like`: the
    entry whose workload (as sent, and its suite's [workload] table) it sent."""
    folder = make_night(root, [11] * len(questions), [5] * len(questions), START,
                        questions=questions)
    alone = [_row(q, 0.03, 0) for q in questions]
    with RowLog(folder, [], TARGET_ALONE_FILE) as log:
        for row in alone:
            log.append(row)
    (folder / TARGET_ALONE_LOG).write_text("the target alone's server log\n")
    record = json.loads((folder / RUN_FILE).read_text())
    info = TargetAloneInfo(status=status,  # type: ignore[arg-type]
                           launch=LaunchInfo(command=["serve", "--no-speculation"],
                                             host="127.0.0.1", port=1),
                           n_requests=len(alone), n_planned=len(alone),
                           latency=summarise_latency(alone, sum(r.latency_s for r in alone), 1))
    record["target_alone"] = info.model_dump(mode="json")
    if like is not None:
        assert like.workload is not None
        record["workload"] = like.workload.model_dump(mode="json")
        record["suite"]["document"]["workload"] = like.loaded.document["workload"]
    (folder / RUN_FILE).write_text(json.dumps(record))
    return folder


def _entry(tmp_path: Path, questions: list[int]) -> EntryRun:
    """A measured [speedup] entry that answered `questions` at 10 ms a token."""
    suite = tmp_path / "tiny_point.toml"
    suite.write_text(tiny_variant("tiny_point", floor=1.0, questions=4)
                     + '\n[speedup]\nbaseline = "target_only"\n')
    run_dir = tmp_path / "point"
    run_dir.mkdir()
    run = EntryRun(loaded=load_suite(suite), options=RunOptions(results_dir=tmp_path),
                   run_dir=run_dir, run_id="point-run", started=START)
    run.workload = WorkloadInfo(kind="gsm8k", n_prompts=4, temperature=0.0,
                                prompts_sha256="p" * 64, data_sha256="d" * 64)
    run.rows = [_row(q, 0.01, 4) for q in questions]
    latency = summarise_latency(run.rows, sum(r.latency_s for r in run.rows), 1)
    run.measurement = Measurement(metric="server_avg", accept_length=2.75,
                                  n_requests=len(run.rows), latency=latency)
    return run


def test_the_same_questions_take_the_source_target_alone(tmp_path: Path) -> None:
    run = _entry(tmp_path, [0, 1, 2, 3])
    source = _source(tmp_path / "real", [0, 1, 2, 3], like=run)
    assert reuse_target_alone([run], source) == []
    real = read_run(source)
    alone = run.target_alone
    assert alone is not None and alone.status == "reused" and alone.reused_from == real.run_id
    assert real.target_alone is not None and alone.launch == real.target_alone.launch
    assert alone.n_requests == 4 and alone.latency == real.target_alone.latency
    # its rows and log beside the run's, as a run that measured it has them
    assert read_target_alone(run.run_dir) == read_target_alone(source) == run.target_alone_rows
    assert (run.run_dir / TARGET_ALONE_LOG).read_text() == "the target alone's server log\n"
    assert run.measurement is not None and run.measurement.speedup is not None
    found = run.measurement.speedup
    assert found.n_prompts == 4 and found.tpot == pytest.approx(3.0)
    assert real.run_id in found.definitions["pairing"]
    assert found.definitions["pairing"] != DEFINITIONS["pairing"]
    assert {k: v for k, v in found.definitions.items() if k != "pairing"} == \
        {k: v for k, v in DEFINITIONS.items() if k != "pairing"}


@pytest.mark.parametrize("questions", [[0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, 7]])
def test_other_questions_are_left_to_be_measured(tmp_path: Path, questions: list[int]) -> None:
    run = _entry(tmp_path, questions)
    source = _source(tmp_path / "real", [0, 1, 2, 3], like=run)
    assert reuse_target_alone([run], source) == [run]
    assert run.target_alone is None and run.target_alone_rows == []
    assert not (run.run_dir / TARGET_ALONE_FILE).exists()
    assert run.measurement is not None and run.measurement.speedup is None


@pytest.mark.parametrize("change", ["sampling", "prompts", "max_tokens"])
def test_another_workload_on_the_same_questions_is_left_to_be_measured(
        tmp_path: Path, change: str) -> None:
    run = _entry(tmp_path, [0, 1, 2, 3])
    source = _source(tmp_path / "real", [0, 1, 2, 3], like=run)
    assert run.workload is not None
    if change == "sampling":
        run.workload = run.workload.model_copy(update={"temperature": 0.6})
    elif change == "prompts":
        run.workload = run.workload.model_copy(update={"prompts_sha256": "q" * 64})
    else:
        run.loaded.document["workload"] = {**run.loaded.document["workload"],
                                           "max_tokens": 7}
    assert reuse_target_alone([run], source) == [run]
    assert run.target_alone is None and run.target_alone_rows == []
    assert not (run.run_dir / TARGET_ALONE_FILE).exists()
    assert run.measurement is not None and run.measurement.speedup is None


def test_a_source_without_a_measured_target_alone_is_left_alone(tmp_path: Path) -> None:
    run = _entry(tmp_path, [0, 1, 2, 3])
    failed = _source(tmp_path / "failed", [0, 1, 2, 3], status="failed", like=run)
    assert reuse_target_alone([run], failed) == [run]
    bare = make_night(tmp_path / "bare", [11] * 4, [5] * 4, START)  # no [speedup] at all
    assert reuse_target_alone([run], bare) == [run]
    assert reuse_target_alone([run], tmp_path / "nowhere") == [run]
    damaged = _source(tmp_path / "damaged", [0, 1, 2, 3], like=run)
    (damaged / RUN_FILE).write_bytes(b"\xff{not json")
    assert reuse_target_alone([run], damaged) == [run]
    assert run.target_alone is None and run.measurement is not None \
        and run.measurement.speedup is None


@pytest.mark.parametrize("reused_from", [None, "", "  ", 7])
def test_a_reuse_that_names_no_run_is_refused(tmp_path: Path, reused_from: object) -> None:
    source = _source(tmp_path / "real", [0, 1])
    record = json.loads((source / RUN_FILE).read_text())
    record["target_alone"] |= {"status": "reused", "reused_from": reused_from}
    (source / RUN_FILE).write_text(json.dumps(record))
    with pytest.raises(HarnessError, match="target_alone"):
        read_run(source)
