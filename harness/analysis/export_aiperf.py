"""A run's requests as the lines of NVIDIA AIPerf's `profile_export.jsonl`: one JSON
object per request, shaped as AIPerf's `MetricRecordInfo` (aiperf/common/models/
record_models.py), which AIPerf's own loader parses each line with (aiperf/plot/core/
data_loader.py, `_load_jsonl`), so `aiperf plot` and a user's scripts read a harness run.

Each line holds `metadata` (AIPerf's `MetricRecordMetadata`) and `metrics`, a map of
AIPerf's metric tags to `{"value", "unit"}` in AIPerf's display units: latencies in
milliseconds ("ms", AIPerf measures in ns and exports in ms), counts in "tokens" or
"count", acceptance lengths as a "ratio". The tags mean what AIPerf's metrics mean:
- `time_to_first_token`, `request_latency`: the harness's TTFT and end-to-end latency;
- `inter_token_latency`: AIPerf's per-request (latency - TTFT) / (output tokens - 1),
  which is the harness's (and vLLM's) TPOT; `inter_chunk_latency`: the gaps between
  streamed chunks, the harness's (and vLLM's) ITL;
- `spec_decode_acceptance_length`: 1 + accepted drafts / verify steps of the request, and
  `spec_decode_steps`, `spec_decode_accepted_draft_tokens`.
A figure the request does not have is left out of `metrics` (AIPerf leaves it out too),
never written as zero; `harness` on each line says why, and names the harness's own
per-request accept lengths by definition. AIPerf's `spec_decode_acceptance` record is not
written: it needs the draft tokens proposed per step, which the harness does not record.
The harness keeps no wall-clock send time per request: every request's `request_start_ns`
is the run's start, and `request_end_ns` that plus its end-to-end latency.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from harness.metrics.definitions import METRICS, request_value
from harness.metrics.latency import request_figures
from harness.results.record import RequestRow, RunRecord
from harness.suite.entries import METRIC_DEFINITIONS

MS, TOKENS, COUNT, RATIO = "ms", "tokens", "count", "ratio"  # AIPerf's unit names
PHASE = "profiling"  # AIPerf's CreditPhase of measured requests
WORKER = "harness"
START_NOTE = ("request_start_ns is the run's start (the harness keeps no wall-clock send "
              "time per request); request_end_ns - request_start_ns is the request's "
              "end-to-end latency")
NO_TIMING = ("latency absent: the request was not streamed (recorded before the harness "
             "streamed requests, or the server did not stream); time_to_first_token, "
             "inter_token_latency and inter_chunk_latency are left out, not zero")


def _ns(moment: datetime | None) -> int:
    return 0 if moment is None else int(moment.timestamp() * 1_000_000_000)


def _value(value: float | int | list[float], unit: str) -> dict[str, object]:
    return {"value": value, "unit": unit}


def request_line(record: RunRecord, row: RequestRow) -> dict[str, object]:
    """One request as an AIPerf `MetricRecordInfo` (plus the harness's own `harness`)."""
    figures = request_figures(row)
    start = _ns(record.started_at)
    metrics: dict[str, object] = {
        "request_latency": _value(figures.e2e * 1000.0, MS),
        "output_sequence_length": _value(row.completion_tokens, TOKENS),
    }
    if row.prompt_tokens is not None:
        metrics["input_sequence_length"] = _value(row.prompt_tokens, TOKENS)
    notes = [START_NOTE]
    if figures.ttft is None:
        notes.append(row.timing.note if row.timing is not None and row.timing.note
                     else NO_TIMING)
    else:
        metrics["time_to_first_token"] = _value(figures.ttft * 1000.0, MS)
        if figures.tpot is not None:
            metrics["inter_token_latency"] = _value(figures.tpot * 1000.0, MS)
        if figures.gaps:
            metrics["inter_chunk_latency"] = _value([gap * 1000.0 for gap in figures.gaps], MS)
    if row.verify_steps > 0:
        metrics["spec_decode_steps"] = _value(row.verify_steps, COUNT)
        if row.correct_drafts is not None:
            metrics["spec_decode_accepted_draft_tokens"] = _value(row.correct_drafts, TOKENS)
            metrics["spec_decode_acceptance_length"] = _value(
                1.0 + row.correct_drafts / row.verify_steps, RATIO)
    return {
        "metadata": {
            "session_num": row.question_index,
            "x_request_id": f"{record.run_id}-{row.index}",
            "conversation_id": row.question_id or str(row.question_index),
            "turn_index": row.turn,
            "request_start_ns": start,
            "request_end_ns": start + round(figures.e2e * 1_000_000_000),
            "worker_id": WORKER,
            "record_processor_id": WORKER,
            "benchmark_phase": PHASE,
        },
        "metrics": metrics,
        "error": None,
        "harness": {
            "run_id": record.run_id,
            "index": row.index,
            "category": row.category,
            "accept_length": {metric: {"definition": METRIC_DEFINITIONS[metric],
                                       "value": request_value(row, metric)}
                              for metric in METRICS},
            "spec_decode_acceptance_length": "1 + accepted drafts / verify steps (AIPerf's "
                                             "per-request definition)",
            "notes": notes,
        },
    }


def profile_export_lines(record: RunRecord, rows: list[RequestRow]) -> Iterator[dict[str, object]]:
    """One line per request row, in the order the requests were sent."""
    for row in sorted(rows, key=lambda r: r.index):
        yield request_line(record, row)
