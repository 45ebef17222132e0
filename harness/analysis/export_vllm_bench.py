"""A run as the summary `vllm bench serve --save-result` writes (vllm/benchmarks/serve.py,
`benchmark` and `main`'s `result_json`), so a user's notebooks and dashboards that read
that file read a harness run too.

Figures are the record's own (`Measurement.latency`, `harness.metrics.latency`), under
vLLM's key names and units: latencies in milliseconds (`*_ms`), throughputs per second,
`duration` in seconds. `median_*` is the record's p50; the percentiles are the record's
(numpy's inverted_cdf, not vLLM's linear interpolation: they differ at small n), stated in
`harness.definitions`. `std_*` is the population standard deviation of the same per-request
values (`harness.metrics.latency.request_figures`), as vLLM's `np.std`. vLLM's speculative
keys hold its own definitions, computed exactly from the request rows: an acceptance length
of 1 + accepted drafts / verify steps pooled over verify steps, per-position rates over
verify steps. What the harness does not measure is left out (named in `harness.notes`),
never written as zero; a run recorded before requests were streamed has every latency key
null and says why. Everything that is the harness's own is under one key, `harness`, as
vLLM's own `--metadata KEY=VALUE` adds keys.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from harness.analysis.export_acceptance import acceptance_block
from harness.metrics.latency import request_figures
from harness.results.record import LatencySummary, RequestRow, RunRecord, Spread

HARNESS_KEY = "harness"
# vLLM's stem of each latency figure -> the record's distribution (seconds)
LATENCIES = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}
PERCENTILES = ("p50", "p90", "p99")
UNITS = {
    "*_ms": "milliseconds",
    "duration": "seconds (the measured phase's wall time)",
    "request_throughput": "requests per second",
    "output_throughput": "output tokens per second",
    "total_token_throughput": "input and output tokens per second",
    "total_input_tokens, total_output_tokens": "tokens",
    "spec_decode_acceptance_length": "tokens per verify step",
    "spec_decode_per_position_acceptance_rates": "fraction of verify steps (0..1)",
}
NOT_MEASURED = ("max_output_tokens_per_s, max_concurrent_requests and rtfx are left out: the "
                "harness keeps no wall-clock send time per request to bucket them by second; "
                "spec_decode_draft_tokens and spec_decode_acceptance_rate are left out: the "
                "draft tokens proposed per step are not recorded")
NO_TIMING = ("latency absent: this run was recorded before the harness streamed its requests "
             "(no time to first token, no inter-token gaps); every latency and throughput key "
             "is null, not zero")


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def latency_keys(summary: LatencySummary | None, rows: Sequence[RequestRow]) -> dict[str, object]:
    """mean/median/std/p50/p90/p99 of each distribution, in ms; null when not measured."""
    keys: dict[str, object] = {}
    values = _per_request_values(rows)
    for stem, field in LATENCIES.items():
        spread: Spread | None = getattr(summary, field) if summary is not None else None
        keys[f"mean_{stem}_ms"] = _ms(spread.mean) if spread else None
        keys[f"median_{stem}_ms"] = _ms(spread.p50) if spread else None
        found = values[stem]
        keys[f"std_{stem}_ms"] = (_ms(statistics.pstdev(found)) if spread and found
                                  else None)
        for name in PERCENTILES:
            keys[f"{name}_{stem}_ms"] = _ms(getattr(spread, name)) if spread else None
    return keys


def _per_request_values(rows: Sequence[RequestRow]) -> dict[str, list[float]]:
    """The values each distribution is over (`harness.metrics.latency`'s definitions)."""
    values: dict[str, list[float]] = {stem: [] for stem in LATENCIES}
    for row in rows:
        figures = request_figures(row)
        values["e2el"].append(figures.e2e)  # every request has one (summarise_latency's)
        if figures.ttft is None:
            continue  # not streamed: in none of the streamed distributions
        values["ttft"].append(figures.ttft)
        if figures.tpot is not None:
            values["tpot"].append(figures.tpot)
        values["itl"] += figures.gaps
    return values


def speculative_keys(record: RunRecord, rows: Sequence[RequestRow]) -> dict[str, object]:
    """vLLM's spec_decode_* keys the harness measures, in vLLM's definitions."""
    steps = sum(row.verify_steps for row in rows)
    keys: dict[str, object] = {"spec_decode_num_drafts": steps}
    drafts = [row.correct_drafts for row in rows if row.verify_steps > 0]
    if steps and all(count is not None for count in drafts):
        accepted = sum(count for count in drafts if count is not None)
        keys["spec_decode_accepted_tokens"] = accepted
        keys["spec_decode_acceptance_length"] = 1.0 + accepted / steps
    positions = record.measurement.per_position_acceptance if record.measurement else None
    if positions is not None:
        keys["spec_decode_per_position_acceptance_rates"] = list(positions)
    return keys


def model_id(record: RunRecord) -> str | None:
    target = record.suite.document.get("target")
    model = target.get("model") if isinstance(target, dict) else None
    if isinstance(model, str):
        return model
    return "reference engine's tiny target" if record.build.engine == "reference" else None


def vllm_bench_summary(record: RunRecord, rows: Sequence[RequestRow]) -> dict[str, object]:
    """The summary document of a stored run (its record and its request rows)."""
    measurement = record.measurement
    summary = measurement.latency if measurement is not None else None
    notes = [NOT_MEASURED]
    if summary is None:
        notes.append(NO_TIMING)
    inputs = [row.prompt_tokens for row in rows]
    total_input = (sum(n for n in inputs if n is not None)
                   if rows and all(n is not None for n in inputs) else None)
    total_output = sum(row.completion_tokens for row in rows)
    duration = summary.duration_s if summary is not None else None
    total_rate = ((total_input + total_output) / duration
                  if summary is not None and summary.output_tok_s is not None
                  and total_input is not None and duration else None)
    started = record.started_at
    n_planned = measurement.n_planned if measurement is not None else None
    document: dict[str, object] = {
        "date": started.strftime("%Y%m%d-%H%M%S") if started is not None else None,
        "endpoint_type": record.build.engine,
        "backend": record.build.engine,
        "label": record.label,
        "model_id": model_id(record),
        "tokenizer_id": model_id(record),
        "num_prompts": n_planned if n_planned is not None else len(rows),
        "request_rate": "inf",  # the harness keeps `max_concurrency` requests in flight
        "burstiness": None,
        "max_concurrency": summary.concurrency if summary is not None else None,
        "duration": duration,
        "completed": len(rows),
        # the harness records completed requests; a run that ended early does not say how
        # many of the rest failed and how many were never sent
        "failed": None if measurement is not None and measurement.partial else 0,
        "total_input_tokens": total_input,
        "total_output_tokens": total_output,
        "request_throughput": summary.requests_s if summary is not None else None,
        "request_goodput": None,  # vLLM's value without --goodput
        "output_throughput": summary.output_tok_s if summary is not None else None,
        "total_token_throughput": total_rate,
        **latency_keys(summary, rows),
        **speculative_keys(record, rows),
    }
    if total_input is None:
        notes.append("total_input_tokens and total_token_throughput are null: the server "
                     "did not report every request's prompt tokens")
    if measurement is not None and measurement.partial:
        notes.append(f"the run ended before its plan: {len(rows)} of {n_planned} requests "
                     "completed; `failed` is null (the rest may have failed or not been sent)")
    document[HARNESS_KEY] = {
        "run_id": record.run_id,
        "suite": record.suite.name,
        "engine": {"kind": record.build.engine, "version": record.build.version,
                   "spec": record.build.spec},
        "verdict": record.verdict.status if record.verdict is not None else None,
        "units": dict(UNITS),
        "definitions": dict(summary.definitions) if summary is not None else {},
        "percentile_note": "median_* is p50; p50/p90/p99 as the definitions' `percentile` "
                           "says (numpy inverted_cdf), not vLLM's linear interpolation",
        "speculative_definitions": {
            "spec_decode_acceptance_length": "1 + accepted drafts / verify steps, pooled "
                                             "over verify steps (vLLM's /metrics figure)",
            "spec_decode_num_drafts": "verify steps",
            "spec_decode_accepted_tokens": "accepted draft tokens (bonus tokens excluded)",
            "spec_decode_per_position_acceptance_rates": "verify steps accepting at least k "
                                                         "drafts / all verify steps",
        },
        "ci_95": _intervals(summary),
        "acceptance": acceptance_block(record, rows),
        "notes": notes + (list(summary.notes) if summary is not None else []),
    }
    return document


def _intervals(summary: LatencySummary | None) -> dict[str, list[float] | None]:
    """Each figure's 95% CI over prompts, in the figure's own unit."""
    if summary is None:
        return {}
    found: dict[str, list[float] | None] = {}
    for stem, field in LATENCIES.items():
        spread = getattr(summary, field)
        for name in ("mean", *PERCENTILES):
            ci = getattr(spread, f"{name}_ci") if spread is not None else None
            key = f"{'median' if name == 'p50' else name}_{stem}_ms"
            found[key] = None if ci is None else [ci[0] * 1000.0, ci[1] * 1000.0]
    for key, ci in (("request_throughput", summary.requests_s_ci),
                    ("output_throughput", summary.output_tok_s_ci)):
        found[key] = None if ci is None else list(ci)
    return found
