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
from dataclasses import asdict, dataclass
from typing import Any, Literal

from harness.metrics import stats
from harness.metrics.latency import request_figures
from harness.results.possible import SPEEDUP_TOP
from harness.results.record import LatencySummary, QuestionSpeed, RequestRow, Speedup

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


def reused_pairing(run_id: str) -> str:
    """`definitions.pairing` of a speedup over another run's target alone (a forced
    ladder's points share their real run's, harness.protocols.forced)."""
    return (f"by question (question_index): the same prompts and sampling on both runs; the "
            f"target alone is run {run_id}'s, measured right after that run on the same host "
            "and build, on exactly the questions this run answered")


def _per_question(rows: Sequence[RequestRow]) -> dict[int, list[float]]:
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


def _in_flight(latency: LatencySummary | None, rows: Sequence[RequestRow]) -> float | None:
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


def speedup(speculative: Sequence[RequestRow], target_alone: Sequence[RequestRow],
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
    found.per_question = [
        QuestionSpeed(question_index=q, speculative_tpot_sum_s=spec[q][0],
                      speculative_tpot_n=int(spec[q][1]), speculative_tokens=int(spec[q][2]),
                      speculative_e2e_s=spec[q][3], target_alone_tpot_sum_s=alone[q][0],
                      target_alone_tpot_n=int(alone[q][1]),
                      target_alone_tokens=int(alone[q][2]), target_alone_e2e_s=alone[q][3])
        for q in paired]
    found.speculative_tpot_s = sum(s[0]) / sum(s[1])
    found.target_alone_tpot_s = sum(t[0]) / sum(t[1])
    if found.speculative_tpot_s > 0:
        found.tpot = _finite(found.target_alone_tpot_s / found.speculative_tpot_s)
        found.tpot_ci = _holding(found.tpot, stats.ratio_bootstrap_ci(
            [t[0], s[1]], [t[1], s[0]],
            lambda sums: (sums[0] / sums[2]) / (sums[3] / sums[1]), seed=seed))
    if found.tpot is None:
        why = "the ratio is beyond any two servers'"
        if found.target_alone_tpot_s <= 0:
            why = ("the target alone's TPOT is 0 (every answer's tokens after the first "
                   "arrived in one chunk)")
        if found.speculative_tpot_s <= 0:
            why = "speculation's TPOT is 0"
        found.note = f"no TPOT ratio: {why}"
    flight_s = _in_flight(speculative_latency, speculative)
    flight_t = _in_flight(target_alone_latency, target_alone)
    found.speculative_in_flight, found.target_alone_in_flight = flight_s, flight_t
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
    """An interval widened to hold its own point estimate (as `latency` does). Its low end
    may be 0: a resample whose every answer streamed faster than the clock resolves (all
    tokens after the first in one chunk, a TPOT of 0) has a ratio of 0, and every reader
    takes 0.0 as a bound (harness.results.possible.interval)."""
    if point is None or ci is None:
        return None
    low, high = min(ci[0], point), max(ci[1], point)
    return (low, high) if low >= 0 and high <= SPEEDUP_TOP else None


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


# ------------------------------------------------------------ the paired speedup gate

Decision = Literal["not_worse", "worse", "inconclusive"]
GATED = (SPEEDUP_TPOT, SPEEDUP_THROUGHPUT)
MIN_QUESTIONS = 2
GATE_DEFINITION = (
    "B's speedup over A's (B / A), each build's speedup in its own definition "
    "(measurement.speedup.definitions) on the questions both builds paired; one-sided "
    "non-inferiority at alpha: not worse when the lower bound of B / A's two-sided "
    "1 - 2 alpha percentile-bootstrap interval (questions resampled, the same for both "
    "builds and both sides of each) is above 1 - max_drop, worse when its upper bound is "
    "below it, else inconclusive")


@dataclass(frozen=True)
class PairedSpeedupResult:
    """The paired speedup gate's finding for one figure: is build B's speedup over its
    target alone not below build A's by more than `max_drop` of A's? (`GATE_DEFINITION`)"""

    figure: str  # speedup_tpot or speedup_throughput
    decision: Decision
    n: int  # questions both builds paired
    a: float  # A's speedup on them
    b: float  # B's
    ratio: float  # b / a
    ratio_ci: tuple[float, float] | None  # two-sided, at `level`; None: no spread to draw
    max_drop: float  # the tolerated drop, a share of A's speedup
    alpha: float
    level: float  # of ratio_ci: 1 - 2 alpha

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _columns(found: Speedup, keys: Sequence[int], figure: str) -> tuple[list[list[float]],
                                                                       float]:
    """(the four per-question series `figure` is a ratio of, the fixed scale): TPOT: the
    target alone's Σ TPOT and count, speculation's Σ TPOT and count; throughput:
    speculation's tokens and Σ e2e, the target alone's tokens and Σ e2e, scaled by the
    sides' requests in flight."""
    rows = {row.question_index: row for row in found.per_question or []}
    chosen = [rows[k] for k in keys]
    if figure == SPEEDUP_TPOT:
        return ([[r.target_alone_tpot_sum_s for r in chosen],
                 [float(r.target_alone_tpot_n) for r in chosen],
                 [r.speculative_tpot_sum_s for r in chosen],
                 [float(r.speculative_tpot_n) for r in chosen]], 1.0)
    flight_s, flight_t = found.speculative_in_flight, found.target_alone_in_flight
    if not flight_s or not flight_t:
        raise ValueError("no requests-in-flight figure on a side: no throughput to pair")
    return ([[float(r.speculative_tokens) for r in chosen],
             [r.speculative_e2e_s for r in chosen],
             [float(r.target_alone_tokens) for r in chosen],
             [r.target_alone_e2e_s for r in chosen]], flight_s / flight_t)


def _ratio(sums: Sequence[Any]) -> Any:
    """A speedup from its four sums (`_columns`): (s0 / s1) / (s2 / s3)."""
    return (sums[0] / sums[1]) / (sums[2] / sums[3])


def paired_speedup(a: Speedup, b: Speedup, figure: str, max_drop: float,
                   alpha: float = 0.05, seed: int = 0) -> PairedSpeedupResult:
    """The paired speedup gate of build B against reference build A for `figure`, on
    the questions both paired (`GATE_DEFINITION`). ValueError naming why no test can be
    made: a side without per-question sums, fewer than 2 common questions, a figure that
    cannot be formed."""
    if figure not in GATED:
        raise ValueError(f"no paired speedup gate for {figure!r} (one of {', '.join(GATED)})")
    if not (math.isfinite(max_drop) and 0.0 < max_drop < 1.0):
        raise ValueError(f"max_drop {max_drop!r}: a share of A's speedup in (0, 1)")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha {alpha!r}: in (0, 0.5)")
    for side, found in (("A", a), ("B", b)):
        if not found.per_question:
            raise ValueError(f"{side} has no per-question speedup sums "
                             f"({found.note or 'recorded before the paired speedup gate'})")
    theirs = {row.question_index for row in b.per_question or []}
    keys = sorted(row.question_index for row in a.per_question or []
                  if row.question_index in theirs)
    if len(keys) < MIN_QUESTIONS:
        raise ValueError(f"{len(keys)} question(s) paired by both builds' speedups; the "
                         f"gate needs at least {MIN_QUESTIONS}")
    columns_a, scale_a = _columns(a, keys, figure)
    columns_b, scale_b = _columns(b, keys, figure)
    with_sums = [[sum(column) for column in columns] for columns in (columns_a, columns_b)]
    if any(value <= 0 or not math.isfinite(value) for sums in with_sums for value in sums):
        raise ValueError(f"{figure}: a side's sums are 0 on the paired questions: no ratio")
    value_a = _ratio(with_sums[0]) * scale_a
    value_b = _ratio(with_sums[1]) * scale_b
    ratio = value_b / value_a
    if not all(_finite(v) for v in (value_a, value_b)) or not math.isfinite(ratio):
        raise ValueError(f"{figure}: a speedup beyond any two servers': no ratio")
    level = 1.0 - 2.0 * alpha
    ci = _holding(ratio, stats.ratio_bootstrap_ci(
        [*columns_a, *columns_b], [],
        lambda sums: (_ratio(sums[4:]) * scale_b) / (_ratio(sums[:4]) * scale_a),
        level=level, seed=seed))
    floor = 1.0 - max_drop
    decision: Decision = "inconclusive"  # no interval drawn: nothing shown either way
    if ci is not None:
        decision = "not_worse" if ci[0] > floor else "worse" if ci[1] < floor else decision
    return PairedSpeedupResult(figure=figure, decision=decision, n=len(keys), a=value_a,
                               b=value_b, ratio=ratio, ratio_ci=ci, max_drop=max_drop,
                               alpha=alpha, level=level)


def describe_paired_speedup(result: PairedSpeedupResult, status: str) -> str:
    """One line for the verdict's reasons."""
    ci = result.ratio_ci
    shown = f"; {result.level:.0%} CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else ""
    words = {"not_worse": "B's speedup is shown not below A's beyond the tolerance",
             "worse": "B's speedup is below A's by more than the tolerance",
             "inconclusive": f"inconclusive (judged {status.upper()} by the gate's "
                             "`inconclusive` setting)"}
    return (f"speedup gate ({result.figure}) {status.upper()}: paired vs A on {result.n} "
            f"questions: A {result.a:.3f}x, B {result.b:.3f}x, B / A {result.ratio:.3f}"
            f"{shown}, tolerated drop {result.max_drop:.1%} of A: "
            f"{words[result.decision]} (one-sided alpha {result.alpha:g})")
