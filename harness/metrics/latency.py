"""Latency and throughput of a measured phase, from each request's streamed arrival times.

The one home of these definitions (`DEFINITIONS`, stored with every summary): what a
request's TTFT, end-to-end latency, TPOT and inter-token gaps are (`request_figures`), and
the run's statistics of them (`summarise_latency`). The figures follow `vllm bench serve`
(vllm/benchmarks/serve.py, `calculate_metrics`; its request functions time each streamed
chunk with `time.perf_counter`), so a user's figures from either tool mean the same thing:
- a chunk "carries output" when it brings generated tokens or text; under speculation one
  chunk usually carries a whole verify step's tokens, so ITL is a gap between chunks, not
  between tokens (`RequestTiming.chunk_tokens` keeps how many each carried);
- TPOT excludes the first token, so it measures the decode steps, which speculation speeds.

Every interval is a bootstrap over prompts (whole questions resampled: their turns, and
for ITL all their gaps, together), as the accept-length CI is (`stats.cluster_statistics`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.metrics import stats
from harness.results.record import (
    LatencySummary,
    RequestRow,
    RequestTiming,
    Spread,
)

TTFT = "ttft"
E2E = "e2e"
TPOT = "tpot"
ITL = "itl"
OUTPUT_THROUGHPUT = "output_throughput"
REQUEST_THROUGHPUT = "request_throughput"

DEFINITIONS: dict[str, str] = {
    TTFT: "time to first token: from sending a request to the arrival of the first streamed "
          "chunk carrying output, on the harness's monotonic clock (time.perf_counter)",
    E2E: "end-to-end latency: from sending a request to the arrival of its last chunk "
         "carrying output (vllm bench serve's latency); a request not streamed: to the end "
         "of its response",
    TPOT: "time per output token of one request: (e2e - TTFT) / (output tokens - 1), for a "
          "streamed request of at least 2 output tokens (vllm bench serve's TPOT); the run's "
          "figures are the mean and percentiles of the per-request values",
    ITL: "inter-token latency: every gap between two successive streamed chunks of a request "
         "that carry output, pooled over the run's requests (vllm bench serve's ITL; under "
         "speculation a chunk carries a verify step's tokens)",
    OUTPUT_THROUGHPUT: "output tokens per second: the measured requests' output tokens / the "
                       "measured phase's wall time",
    REQUEST_THROUGHPUT: "requests per second: measured requests / the measured phase's wall "
                        "time",
    "percentile": "p50, p90, p99: the smallest observed value with at least that share of the "
                  "values at or below it (numpy's inverted_cdf)",
    "ci": "95% percentile bootstrap over prompts (whole questions resampled: their turns, and "
          "for ITL all their gaps, together); a throughput's interval resamples output "
          "tokens (or requests) / e2e summed over questions, times the run's mean requests "
          "in flight (sum of e2e / wall time, Little's law) held fixed",
}


@dataclass(frozen=True)
class RequestFigures:
    """One request's figures (seconds), each as `DEFINITIONS` says; None where undefined."""

    ttft: float | None
    e2e: float
    tpot: float | None
    gaps: list[float]


def request_figures(row: RequestRow) -> RequestFigures:
    """The figures of one request row (the run's, or the target alone's)."""
    timing: RequestTiming | None = getattr(row, "timing", None)
    tokens = int(row.completion_tokens)
    if timing is None or not timing.streamed or not timing.chunk_s:
        return RequestFigures(None, float(row.latency_s), None, [])
    chunks = timing.chunk_s
    ttft, e2e = chunks[0], chunks[-1]
    tpot = (e2e - ttft) / (tokens - 1) if tokens >= 2 else None
    return RequestFigures(ttft, e2e, tpot, [b - a for a, b in itertools.pairwise(chunks)])


def spread(values: Sequence[float], clusters: Sequence[Hashable], seed: int) -> Spread | None:
    """`values`' mean and percentiles with CIs over `clusters` (None: no value)."""
    if not values:
        return None
    found = stats.cluster_statistics(values, clusters, seed=seed)
    mean, p50, p90, p99 = (found[name] for name in ("mean", "p50", "p90", "p99"))
    return Spread(n=len(values), mean=mean.value, p50=p50.value, p90=p90.value, p99=p99.value,
                  mean_ci=mean.ci, p50_ci=p50.ci, p90_ci=p90.ci, p99_ci=p99.ci)


def throughput_ci(counts: Sequence[float], e2e: Sequence[float], in_flight: float,
                  seed: int) -> tuple[float, float] | None:
    """The CI of counts / wall time, as `DEFINITIONS["ci"]` says: per question (count_q,
    e2e_q) resampled, Σ count / Σ e2e times the mean requests in flight."""
    return stats.ratio_bootstrap_ci([counts], [e2e],
                                    lambda sums: sums[0] / sums[1] * in_flight, seed=seed)


def by_question(rows: Sequence[RequestRow],
                value: Callable[[RequestRow], float],
                ) -> tuple[list[Hashable], list[float]]:
    """(questions, Σ value(row) over each question's rows), in first-seen order."""
    sums: dict[Hashable, float] = {}
    for row in rows:
        sums[row.question_index] = sums.get(row.question_index, 0.0) + float(value(row))
    return list(sums), list(sums.values())


def summarise_latency(rows: Sequence[RequestRow], duration_s: float,
                      concurrency: int | None = None, seed: int = 0) -> LatencySummary:
    """The latency and throughput figures of a measured phase (`DEFINITIONS`)."""
    figures = [(row, request_figures(row)) for row in rows]
    timed = [(row, f) for row, f in figures if f.ttft is not None]
    notes = _notes(rows)
    summary = LatencySummary(definitions=dict(DEFINITIONS), n_requests=len(rows),
                             n_timed=len(timed), duration_s=duration_s,
                             concurrency=concurrency, notes=notes)
    if not rows:
        return summary
    summary.e2e_s = spread([f.e2e for _, f in figures],
                           [row.question_index for row, _ in figures], seed)
    summary.ttft_s = spread([f.ttft for _, f in timed if f.ttft is not None],
                            [row.question_index for row, _ in timed], seed)
    with_tpot = [(row, f.tpot) for row, f in timed if f.tpot is not None]
    summary.tpot_s = spread([tpot for _, tpot in with_tpot if tpot is not None],
                            [row.question_index for row, _ in with_tpot], seed)
    gaps = [(row.question_index, gap) for row, f in timed for gap in f.gaps]
    summary.itl_s = spread([gap for _, gap in gaps], [q for q, _ in gaps], seed)
    # a wall time too short to divide by (a broken clock) gives no rate, never an infinite one
    tokens = sum(int(row.completion_tokens) for row in rows)
    if duration_s > 0 and math.isfinite(max(tokens, len(rows)) / duration_s):
        summary.output_tok_s = tokens / duration_s
        summary.requests_s = len(rows) / duration_s
        e2e_total = sum(f.e2e for _, f in figures)
        if e2e_total > 0:
            in_flight = e2e_total / duration_s
            _, e2e = by_question(rows, lambda r: request_figures(r).e2e)
            _, counts = by_question(rows, lambda r: r.completion_tokens)
            _, ones = by_question(rows, lambda r: 1)
            summary.output_tok_s_ci = _holding(summary.output_tok_s,
                                               throughput_ci(counts, e2e, in_flight, seed))
            summary.requests_s_ci = _holding(summary.requests_s,
                                             throughput_ci(ones, e2e, in_flight, seed))
    return summary


def _holding(point: float, ci: tuple[float, float] | None) -> tuple[float, float] | None:
    """An interval widened to hold its own point estimate (see cluster_statistics)."""
    return None if ci is None else (min(ci[0], point), max(ci[1], point))


MAX_NOTES = 5  # notes naming requests one by one; the rest counted


def _notes(rows: Sequence[Any]) -> list[str]:
    """Why requests have no timing, grouped by reason: "<n> request(s): <why> (first: q..)"."""
    by_reason: dict[str, list[str]] = {}
    for row in rows:
        timing = getattr(row, "timing", None)
        if timing is not None and timing.note:
            name = f"q{row.question_index}" + (f" turn {row.turn}" if row.turn else "")
            by_reason.setdefault(timing.note, []).append(name)
    notes = []
    for reason, names in list(by_reason.items())[:MAX_NOTES]:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        notes.append(f"{len(names)} request(s): {reason} ({shown})")
    return notes


def _seconds(value: float) -> str:
    return f"{value * 1000:.3g} ms" if value < 1 else f"{value:.3g} s"


def _interval(ci: tuple[float, float] | None, shown: Any) -> str:
    return "" if ci is None else f" [{shown(ci[0])}, {shown(ci[1])}]"


def speed_lines(summary: LatencySummary) -> list[str]:
    """What `harness run` prints of a summary: each distribution's p50/p90/p99 and the
    rates, each with its 95% CI over prompts; the definitions are the record's."""
    lines = []
    for label, spread in (("TTFT", summary.ttft_s), ("TPOT", summary.tpot_s),
                          ("ITL", summary.itl_s), ("e2e", summary.e2e_s)):
        if spread is None:
            continue
        parts = [f"{name} {_seconds(getattr(spread, name))}"
                 f"{_interval(getattr(spread, f'{name}_ci'), _seconds)}"
                 for name in ("p50", "p90", "p99")]
        lines.append(f"{label:<5} " + ", ".join(parts) + f" (n={spread.n})")
    if summary.output_tok_s is not None:
        lines.append(f"rate  {summary.output_tok_s:.4g} output tokens/s"
                     f"{_interval(summary.output_tok_s_ci, lambda v: f'{v:.4g}')}")
    if summary.requests_s is not None:
        lines.append(f"      {summary.requests_s:.4g} requests/s"
                     f"{_interval(summary.requests_s_ci, lambda v: f'{v:.4g}')}"
                     f" at concurrency {summary.concurrency}")
    lines += [f"note: {note}" for note in summary.notes]
    return lines
