"""`harness export`: what a user's tool reads of a stored run is the record's own figures,
under the tool's names and units; every acceptance figure is named by its definition and
its aggregation (pooled over verify steps, or the mean of per-request means); a run
recorded before streaming exports its acceptance and says its latency is absent (null, not
zero); secrets never reach the file."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.metrics.latency import request_figures
from harness.results.readers import read_requests, read_run
from harness.results.record import Measurement, RequestRow
from harness.suite.entries import METRIC_DEFINITIONS

LATENCY_FIELDS = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}


def export(run: Path, fmt: str, *extra: str) -> int:
    return main(["export", str(run), "--format", fmt, *extra])


def summary_of(run: Path) -> dict[str, Any]:
    assert export(run, "vllm-bench") == 0
    return json.loads((run / "vllm_bench_serve.json").read_text())


def lines_of(run: Path) -> list[dict[str, Any]]:
    assert export(run, "aiperf") == 0
    return [json.loads(line) for line in (run / "profile_export.jsonl").read_text().splitlines()]


def numbers_named(document: Any, word: str, parent: Any = None) -> Iterator[tuple[str, Any]]:
    """(key, the dict holding it) of every number whose key contains `word`."""
    if isinstance(document, dict):
        for key, value in document.items():
            if word in key and isinstance(value, int | float) and not isinstance(value, bool):
                yield key, document
            yield from numbers_named(value, word, document)
    elif isinstance(document, list):
        for item in document:
            yield from numbers_named(item, word, parent)


def exported(run_copy: Callable[[], Path]
             ) -> tuple[Path, dict[str, Any], Measurement, list[RequestRow]]:
    """A fresh copy of the stored run, its exported summary, its measurement and rows."""
    run = run_copy()
    summary = summary_of(run)
    record = read_run(run)
    rows = read_requests(run, record, strict=True)
    assert record.measurement is not None
    return run, summary, record.measurement, rows


def test_summary_figures_are_the_records(run_copy: Callable[[], Path]) -> None:
    _, summary, measurement, rows = exported(run_copy)
    assert measurement.latency is not None
    latency = measurement.latency
    assert summary["completed"] == len(rows) == measurement.n_requests == 8
    assert summary["total_output_tokens"] == sum(r.completion_tokens for r in rows)
    assert summary["request_throughput"] == latency.requests_s
    assert summary["output_throughput"] == latency.output_tok_s
    assert summary["duration"] == latency.duration_s
    assert summary["max_concurrency"] == latency.concurrency == 4
    for stem, field in LATENCY_FIELDS.items():
        spread = getattr(latency, field)
        assert spread is not None, field
        assert summary[f"mean_{stem}_ms"] == pytest.approx(spread.mean * 1000)
        assert summary[f"median_{stem}_ms"] == pytest.approx(spread.p50 * 1000)
        assert summary[f"p99_{stem}_ms"] == pytest.approx(spread.p99 * 1000)
        assert summary["harness"]["ci_95"][f"mean_{stem}_ms"] == pytest.approx(
            [bound * 1000 for bound in spread.mean_ci])
    ttfts = [request_figures(r).ttft for r in rows]
    assert summary["std_ttft_ms"] == pytest.approx(statistics.pstdev(ttfts) * 1000)
    # vLLM's speculative keys, in vLLM's definitions, from the same counts
    assert summary["spec_decode_num_drafts"] == measurement.verify_steps
    assert summary["spec_decode_accepted_tokens"] == measurement.correct_drafts
    assert summary["spec_decode_acceptance_length"] == pytest.approx(
        measurement.accept_length_server_avg)
    assert summary["spec_decode_per_position_acceptance_rates"] == \
        measurement.per_position_acceptance
    assert summary["harness"]["units"]["*_ms"] == "milliseconds"
    assert summary["harness"]["definitions"] == latency.definitions


def test_acceptance_named_by_definition_and_aggregation(run_copy: Callable[[], Path]) -> None:
    run, summary, measurement, rows = exported(run_copy)
    acceptance = summary["harness"]["acceptance"]
    assert acceptance["judged_definition"] == measurement.metric == "server_avg"
    assert acceptance["server_avg"]["pooled_over_verify_steps"] == \
        measurement.accept_length_server_avg == measurement.accept_length
    assert acceptance["per_request"]["pooled_over_verify_steps"] == \
        measurement.accept_length_per_request
    per_row = [(r.correct_drafts + r.verify_steps) / r.verify_steps for r in rows]
    assert acceptance["server_avg"]["mean_of_per_request_means"] == pytest.approx(
        statistics.fmean(per_row))
    assert acceptance["per_request"]["mean_of_per_request_means"] == pytest.approx(
        statistics.fmean(r.completion_tokens / r.verify_steps for r in rows))
    for metric in ("server_avg", "per_request"):
        assert acceptance[metric]["definition"] == METRIC_DEFINITIONS[metric]
    (floor,) = acceptance["floors"]
    assert floor["floor"] == "accept length (server_avg) >= 2"
    assert floor["definition_text"] == METRIC_DEFINITIONS["server_avg"]
    assert floor["aggregation"] == "pooled_over_verify_steps"
    # no acceptance figure anywhere without its definition beside it
    named = summary["harness"]["speculative_definitions"]
    found = list(numbers_named(summary, "accept"))
    assert len(found) >= 2
    for key, holder in found:
        assert key in named or "definition" in holder, (key, holder)
    for line in lines_of(run):
        tags = [tag for tag in line["metrics"] if "acceptance" in tag]
        assert tags == ["spec_decode_acceptance_length"]
        assert "verify steps" in line["harness"][tags[0]]
        for metric, figure in line["harness"]["accept_length"].items():
            assert figure["definition"] == METRIC_DEFINITIONS[metric]


def test_aiperf_lines_are_the_rows(run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    lines = lines_of(run)
    record = read_run(run)
    rows = sorted(read_requests(run, record, strict=True), key=lambda r: r.index)
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows, strict=True):
        figures = request_figures(row)
        metrics = line["metrics"]
        assert metrics["request_latency"] == {"value": pytest.approx(figures.e2e * 1000),
                                              "unit": "ms"}
        assert metrics["time_to_first_token"]["value"] == pytest.approx(figures.ttft * 1000)
        assert metrics["inter_token_latency"]["value"] == pytest.approx(figures.tpot * 1000)
        assert metrics["inter_chunk_latency"]["value"] == pytest.approx(
            [gap * 1000 for gap in figures.gaps])
        assert metrics["output_sequence_length"] == {"value": row.completion_tokens,
                                                     "unit": "tokens"}
        assert metrics["spec_decode_steps"]["value"] == row.verify_steps
        assert metrics["spec_decode_acceptance_length"]["value"] == pytest.approx(
            1 + row.correct_drafts / row.verify_steps)
        meta = line["metadata"]
        assert meta["request_end_ns"] - meta["request_start_ns"] == round(figures.e2e * 1e9)
        assert meta["session_num"] == row.question_index
        assert line["harness"]["accept_length"]["per_request"]["value"] == pytest.approx(
            row.spec_accept_length)


def _before_streaming(run: Path) -> None:
    """The run as a harness that did not stream would have stored it."""
    record = json.loads((run / "run.json").read_text())
    del record["measurement"]["latency"]
    (run / "run.json").write_text(json.dumps(record))
    rows = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    for row in rows:
        row.pop("timing")
    (run / "requests.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_run_before_streaming_exports_acceptance_and_no_latency(
        run_copy: Callable[[], Path]) -> None:
    run = run_copy()
    _before_streaming(run)
    summary = summary_of(run)
    record = read_run(run)
    assert record.measurement is not None and record.measurement.latency is None
    for stem in LATENCY_FIELDS:
        for stat in ("mean", "median", "std", "p99"):
            assert f"{stat}_{stem}_ms" in summary and summary[f"{stat}_{stem}_ms"] is None
    assert summary["request_throughput"] is None and summary["output_throughput"] is None
    assert any(note.startswith("latency absent") for note in summary["harness"]["notes"])
    assert summary["harness"]["acceptance"]["server_avg"]["pooled_over_verify_steps"] == \
        record.measurement.accept_length_server_avg
    assert summary["spec_decode_num_drafts"] == record.measurement.verify_steps
    lines = lines_of(run)
    assert len(lines) == 8
    for line in lines:
        assert not {"time_to_first_token", "inter_token_latency",
                    "inter_chunk_latency"} & set(line["metrics"])
        assert line["metrics"]["request_latency"]["value"] > 0
        assert any(note.startswith("latency absent") for note in line["harness"]["notes"])
        assert "spec_decode_acceptance_length" in line["metrics"]


def test_out_path_written_whole_and_secrets_hidden(run_copy: Callable[[], Path],
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    secret = "hf_" + "Q7x" * 12
    monkeypatch.setenv("HF_TOKEN", secret)
    run = run_copy()
    record = json.loads((run / "run.json").read_text())
    record["label"] = f"nightly {secret}"
    (run / "run.json").write_text(json.dumps(record))
    out = tmp_path / "elsewhere" / "summary.json"
    assert export(run, "vllm-bench", "--out", str(out)) == 0
    text = out.read_text()
    assert secret not in text and json.loads(text)["label"].startswith("nightly ")
    assert [p.name for p in out.parent.iterdir()] == ["summary.json"]  # no temp file left
    capsys.readouterr()
    assert export(run, "aiperf", "--out", "-") == 0
    printed = capsys.readouterr().out
    assert secret not in printed and len(printed.splitlines()) == 8
    assert not (run / "profile_export.jsonl").exists()


def test_run_named_by_id_or_record(run_copy: Callable[[], Path], tmp_path: Path) -> None:
    """`harness export 9910f906 --results DIR`, or the record file itself: the same run."""
    run = run_copy()
    results = tmp_path / "results"
    folder = results / "runs" / "fake_gemma" / run.name
    folder.parent.mkdir(parents=True)
    run.rename(folder)
    run_id = read_run(folder).run_id
    assert main(["export", run_id[:6], "--format", "vllm-bench", "--results",
                 str(results)]) == 0
    by_id = json.loads((folder / "vllm_bench_serve.json").read_text())
    assert export(folder / "run.json", "vllm-bench", "--out", str(tmp_path / "b.json")) == 0
    assert json.loads((tmp_path / "b.json").read_text()) == by_id
    assert by_id["harness"]["run_id"] == run_id


def test_partial_run_says_so(run_copy: Callable[[], Path]) -> None:
    """A run that ended before its plan: its completed requests, `failed` unknown (null),
    never a claimed 0."""
    run = run_copy()
    record = json.loads((run / "run.json").read_text())
    record["measurement"].update(partial=True, n_planned=12)
    record["verdict"] = {"status": "error", "reasons": ["ended before its plan"]}
    (run / "run.json").write_text(json.dumps(record))
    summary = summary_of(run)
    assert summary["completed"] == 8 and summary["num_prompts"] == 12
    assert summary["failed"] is None
    assert any("8 of 12 requests" in note for note in summary["harness"]["notes"])
