"""Speedup of speculation over the target alone, paired by prompt.

The one home of these definitions (`DEFINITIONS`, stored with every figure). The two
runs ([speedup]: the same build, host, prompts and sampling, measured back to back) are
paired by question: only questions both runs answered with a TPOT enter a figure, so a
question one side lost moves neither. Per question q and side s (S speculative, T the
target alone):
- TPOT: the sum over q's requests of their TPOT (harness.metrics.latency) and their count;
- throughput: q's output tokens and the sum of its requests' end-to-end latencies.

`speedup_tpot` = (Σ_q tpot_T / Σ_q n_T) / (Σ_q tpot_S / Σ_q n_S): the target alone's mean
TPOT over speculation's (a ratio of means, not a mean of ratios: a question of long
answers counts by its requests, as in each run's own mean).
`speedup_throughput` = (Σ_q tokens_S / Σ_q e2e_S x in-flight_S) / (the same of T): each
side's output tokens per second of the measured phase as `latency` defines its CI (Little's
law: the mean requests in flight, Σ e2e / wall time, held fixed); with every question
paired it is exactly output tokens/s of S over that of T.
Each CI is a 95% percentile bootstrap over the paired questions (the same questions drawn
for both sides: `stats.ratio_bootstrap_ci`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from harness.metrics import stats
from harness.metrics.latency import request_figures
from harness.results.possible import SPEEDUP_TOP
from harness.results.record import LatencySummary, Speedup

SPEEDUP_TPOT = "speedup_tpot"
SPEEDUP_THROUGHPUT = "speedup_throughput"

DEFINITIONS: dict[str, str] = {
    SPEEDUP_TPOT: "target alone's mean TPOT / speculation's mean TPOT over the questions "
                  "both runs answered with a TPOT (ratio of means over their requests; "
                  "TPOT as measurement.latency.definitions.tpot); above 1: speculation "
                  "decodes faster",
    SPEEDUP_THROUGHPUT: "speculation's output tokens/s / the target alone's, over the same "
                        "paired questions: each side's Σ output tokens / Σ e2e times its "
                        "mean requests in flight (Σ e2e / wall time), i.e. each run's output "
                        "tokens/s when every question is paired; above 1: speculation serves "
                        "more tokens a second",
    "pairing": "by question (question_index): the same prompts and sampling on both runs, "
               "the target alone measured right after the speculative run on the same host "
               "and build",
    "ci": "95% percentile bootstrap over the paired questions (the same questions drawn "
          "for both sides), 2000 replicates",
}


def _per_question(rows: Sequence[Any]) -> dict[int, list[float]]:
    """question -> [Σ TPOT, requests with a TPOT, output tokens, Σ e2e] over its rows."""
    out: dict[int, list[float]] = {}
    for row in rows:
        figures = request_figures(row)
        sums = out.setdefault(int(row.question_index), [0.0, 0.0, 0.0, 0.0])
        if figures.tpot is not None:
            sums[0] += figures.tpot
            sums[1] += 1
        sums[2] += int(row.completion_tokens)
        sums[3] += figures.e2e
    return out


def _in_flight(latency: LatencySummary | None, rows: Sequence[Any]) -> float | None:
    """The run's mean requests in flight: Σ e2e / the measured phase's wall time."""
    duration = latency.duration_s if latency is not None else None
    if not duration or duration <= 0:
        return None
    total = sum(request_figures(row).e2e for row in rows)
    value = total / duration
    return value if math.isfinite(value) and value > 0 else None


def _finite(value: float) -> float | None:
    """A ratio every reader keeps (harness.results.possible): finite, above 0, at most
    `SPEEDUP_TOP` (past it two clocks' rounding, not two servers, made it); else None."""
    return value if math.isfinite(value) and 0 < value <= SPEEDUP_TOP else None


def speedup(speculative: Sequence[Any], target_alone: Sequence[Any],
            speculative_latency: LatencySummary | None,
            target_alone_latency: LatencySummary | None, seed: int = 0) -> Speedup:
    """The speedup figures of two runs' rows, paired by question (`DEFINITIONS`)."""
    spec, alone = _per_question(speculative), _per_question(target_alone)
    paired = [q for q in spec if q in alone and spec[q][1] > 0 and alone[q][1] > 0]
    found = Speedup(definitions=dict(DEFINITIONS), n_prompts=len(paired))
    if not paired:
        found.note = ("no question has a TPOT on both runs (a TPOT needs a streamed answer "
                      "of at least 2 tokens)")
        return found
    s = [[spec[q][i] for q in paired] for i in range(4)]
    t = [[alone[q][i] for q in paired] for i in range(4)]
    found.speculative_tpot_s = sum(s[0]) / sum(s[1])
    found.target_alone_tpot_s = sum(t[0]) / sum(t[1])
    if found.speculative_tpot_s > 0:
        found.tpot = _finite(found.target_alone_tpot_s / found.speculative_tpot_s)
        found.tpot_ci = _holding(found.tpot, stats.ratio_bootstrap_ci(
            [t[0], s[1]], [t[1], s[0]],
            lambda sums: (sums[0] / sums[2]) / (sums[3] / sums[1]), seed=seed))
    if found.tpot is None:
        found.note = "speculation's TPOT is 0, or the ratio is beyond any two servers': no ratio"
    flight_s = _in_flight(speculative_latency, speculative)
    flight_t = _in_flight(target_alone_latency, target_alone)
    if flight_s is None or flight_t is None or sum(s[3]) <= 0 or sum(t[3]) <= 0:
        found.note = "; ".join(filter(None, [found.note, "a run's wall time or latencies are "
                                             "0: no throughput ratio"]))
        return found
    found.speculative_output_tok_s = sum(s[2]) / sum(s[3]) * flight_s
    found.target_alone_output_tok_s = sum(t[2]) / sum(t[3]) * flight_t
    if found.target_alone_output_tok_s > 0:
        found.throughput = _finite(found.speculative_output_tok_s
                                   / found.target_alone_output_tok_s)
        scale = flight_s / flight_t
        found.throughput_ci = _holding(found.throughput, stats.ratio_bootstrap_ci(
            [s[2], t[3]], [s[3], t[2]],
            lambda sums: (sums[0] / sums[2]) / (sums[3] / sums[1]) * scale, seed=seed))
    if found.throughput is None:
        found.note = "; ".join(filter(None, [found.note, "a side produced no output token, or "
                                             "the ratio is beyond any two servers': no "
                                             "throughput ratio"]))
    return found


def _holding(point: float | None, ci: tuple[float, float] | None
             ) -> tuple[float, float] | None:
    """An interval widened to hold its own point estimate (as `latency` does)."""
    if point is None or ci is None:
        return None
    low, high = min(ci[0], point), max(ci[1], point)
    return (low, high) if low > 0 and high <= SPEEDUP_TOP else None


def speedup_lines(found: Speedup) -> list[str]:
    """What `harness run` prints of the speedup, each figure with its 95% CI."""
    def shown(value: float | None, ci: tuple[float, float] | None) -> str:
        if value is None:
            return "not measured"
        return f"{value:.3f}x" + ("" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]")

    lines = [f"speedup over the target alone ({found.n_prompts} prompts paired; "
             "definitions: run.json measurement.speedup)",
             f"  TPOT        {shown(found.tpot, found.tpot_ci)}",
             f"  throughput  {shown(found.throughput, found.throughput_ci)}"]
    if found.note:
        lines.append(f"  note: {found.note}")
    return lines
