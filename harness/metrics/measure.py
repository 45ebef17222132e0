"""Measure: a run's figures from its per-request counts, in both accept-length definitions.

The two definitions (suite `floors.metric`; `harness.suite.model.METRIC_DEFINITIONS`):
- `server_avg`: (Σ correct drafts + Σ verify steps) / Σ verify steps. SGLang's
  `/server_info` `avg_spec_accept_length` adds, per decode batch, the correct drafts plus
  one bonus token per request (`batch_result_processor.py` -> `update_spec_metrics(...,
  num_accept_tokens=num_correct_drafts + bs)`); per request that is its correct drafts plus
  its verify steps. The token sampled at prefill is in no verify step. An algorithm whose
  step makes k tokens besides its correct drafts (SGLang's `num_non_draft_tokens_per_req`:
  UNO from 0.5.20 has k = 2) counts k per step: each row carries the server's k
  (`non_draft_tokens_per_step`, `harness.engines.sglang.api.NON_DRAFT_TOKENS_PER_STEP`).
  SGLang's gates (gemma-4 >= 5.4, Qwen3-8B > 2.8, Muse > 2.5) assert this figure.
  Computed here exactly from per-request meta_info over the flushed measured window, so
  it does not depend on SGLang folding its figure in every `--decode-log-interval`
  iterations.
- `per_request`: Σ completion_tokens / Σ spec_verify_ct: SGLang's per-request
  `meta_info.spec_accept_length`, pooled over the requests that have it (a request with
  0 verify steps gets no spec fields from SGLang and counts in neither sum). Per request,
  completion_tokens - 1 = correct drafts + verify steps - cut, where `cut` counts the
  tokens a verify step accepted after the stop string, EOS or max_new_tokens that ended
  the request (SGLang counts the whole last step, but the output stops at the stop): so
  `per_request` may sit above or below `server_avg` (tests/sglang_oracle pins both
  against SGLang's own code).
- `per_request_mean`: the unweighted mean over requests of each request's own
  1 + accepted / drafts (1 for a request that made no draft): vLLM's reference-acceptance
  test (`run_acceptance_length_eval`, tests/v1/e2e/spec_decode/acceptance_rates/utils.py),
  which takes each prompt's figure from the metrics delta and averages over prompts. It
  needs each row's correct drafts.
- `spec_accept_length_mean`: the unweighted mean over requests with a verify step of
  completion tokens / verify steps, SGLang's per-request meta_info.spec_accept_length
  averaged as the DFlash authors' benchmark prints it against SGLang (PyPI `dflash`
  0.1.0, `dflash/benchmark.py`).
Every statistic takes (numerator_i, weight_i) per request (`definitions`): verify steps
for the pooled definitions, 1 for the mean. The server's own figure is recorded as a cross-check
only. A missing figure is an error, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.errors import MissingMetric
from harness.metrics import breakdown, stats
from harness.metrics.definitions import RequestLike, accept_lengths
from harness.results.record import CategoryResult, Measurement, RequestRow
from harness.suite.entries import Metric

# Relative disagreement between the exact server_avg and the server's own figure that is
# recorded as a note.
DISAGREEMENT_TOLERANCE = 0.05


def confidence_interval(rows: Sequence[RequestLike], metric: str, seed: int
                        ) -> tuple[float, float] | None:
    """Bootstrap CI over prompts of the accept length under `metric`: whole questions
    are resampled (the turns of a multi-turn question stay together)."""
    _, tokens, steps = breakdown.question_pairs(rows, metric)
    if len(tokens) < 2:
        return None
    return stats.bootstrap_ci(tokens, steps, seed=seed)


def summarise(
    rows: Sequence[RequestRow],
    metric: Metric,
    duration_s: float,
    server_figure: float | None,
    seed: int = 0,
    planned: int | None = None,
    partial: bool = False,
) -> Measurement:
    """The run's figures from its measured requests; raises if no figure can be formed."""
    figures = accept_lengths(rows)
    judged = figures[metric]
    if judged is None:
        raise MissingMetric(f"the suite judges {metric}, and the measured rows lack the counts "
                            "it needs (per_request_mean needs each request's correct drafts)")
    mean_cis = {name: confidence_interval(rows, name, seed) if figures[name] is not None
                else None for name in stats.MEAN_METRICS}
    steps = sum(r.verify_steps for r in rows)
    tokens = sum(r.completion_tokens for r in rows)
    correct = [r.correct_drafts for r in rows if r.verify_steps]
    counted = [n for n in correct if n is not None]
    disagreement = None
    server_avg = figures["server_avg"]
    if server_figure is not None and server_avg is not None:
        disagreement = (server_figure - server_avg) / server_avg
    histogram = stats.sum_histograms([r.accept_histogram for r in rows])
    _, rate_cis = breakdown.per_position(rows, seed=seed)
    groups = breakdown.categories(rows, metric, seed)
    latencies = sorted(r.latency_s for r in rows)
    graded = [r for r in rows if r.correct is not None]
    n_correct = sum(1 for r in graded if r.correct)
    planned = planned if planned is not None else len(rows)
    return Measurement(
        metric=metric,
        accept_length=judged,
        accept_length_ci=confidence_interval(rows, metric, seed),
        accept_length_server_avg=figures["server_avg"],
        accept_length_per_request=figures["per_request"],
        accept_length_per_request_mean=figures["per_request_mean"],
        accept_length_per_request_mean_ci=mean_cis["per_request_mean"],
        accept_length_spec_accept_length_mean=figures["spec_accept_length_mean"],
        accept_length_spec_accept_length_mean_ci=mean_cis["spec_accept_length_mean"],
        n_requests=len(rows),
        n_planned=planned,
        partial=partial,
        completion_tokens=tokens,
        verify_steps=steps,
        correct_drafts=sum(counted) if len(counted) == len(correct) else None,
        per_position_acceptance=stats.per_position_acceptance(histogram) or None,
        per_position_ci=rate_cis,
        accept_histogram=histogram or None,
        n_prompts=len({r.question_index for r in rows}),
        categories={name: CategoryResult.model_validate(figures)
                    for name, figures in groups.items()}
        if any(r.category is not None for r in rows) else None,
        server_reported_accept_length=server_figure,
        server_disagreement=disagreement,
        accuracy=n_correct / len(graded) if graded else None,
        n_correct=n_correct if graded else None,
        output_throughput_tok_s=tokens / duration_s if duration_s > 0 else None,
        latency_p50_s=_quantile(latencies, 0.5),
        latency_p90_s=_quantile(latencies, 0.9),
        duration_s=duration_s,
    )


def _quantile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)
