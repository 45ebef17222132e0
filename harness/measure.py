"""Measure: per-request speculative figures from SGLang's responses, and the run's totals.

Accept length is exact: sum of completion tokens over sum of verify steps
across measured requests, read from each `/generate` response's `meta_info`
(`sglang/srt/managers/tokenizer_manager.py`, `_calculate_spec_decoding_metrics`
in SGLang 0.5.23). The server-wide `avg_spec_accept_length` from `/server_info`
is a cross-check only: it is folded in every `--decode-log-interval` steps and
may lag or be absent. A missing per-request figure is an error, never a pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness import stats
from harness.errors import MissingMetric
from harness.record import Measurement, RequestRow

# Field names across SGLang versions, newest first; parsing takes the first present.
# 0.5.23: spec_verify_ct + spec_correct_drafts_histogram; 0.5.17 also sent the aliases
# spec_accepted_drafts / spec_proposed_drafts / spec_accept_histogram; older releases
# sent only spec_verify_ct, or spec_accept_token_num / spec_draft_token_num.
COMPLETION_TOKEN_KEYS = ("completion_tokens", "output_tokens", "num_output_tokens")
VERIFY_STEP_KEYS = ("spec_verify_ct", "spec_verify_count", "verify_ct", "spec_num_verify")
HISTOGRAM_KEYS = (
    "spec_correct_drafts_histogram",
    "spec_accept_histogram",
    "spec_accept_length_histogram",
)
ACCEPT_LENGTH_KEYS = ("spec_accept_length", "accept_length")
SERVER_ACCEPT_KEYS = ("avg_spec_accept_length", "spec_accept_length", "accept_length")

# Relative disagreement between exact and server figures that is recorded as a warning.
DISAGREEMENT_TOLERANCE = 0.05


@dataclass(frozen=True)
class ParsedResponse:
    text: str
    completion_tokens: int
    verify_steps: int
    histogram: list[int] | None
    prompt_tokens: int | None
    finish_reason: str | None


def _first(meta: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if key in meta and meta[key] is not None:
            return meta[key]
    return None


def _as_count(value: Any, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise MissingMetric(f"{where}: meta_info.{field} is not a count: {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise MissingMetric(f"{where}: meta_info.{field} is not a whole number: {value!r}")
    return int(value)


def _finish_reason(meta: Mapping[str, Any]) -> str | None:
    reason = meta.get("finish_reason")
    if isinstance(reason, Mapping):
        return str(reason.get("type")) if reason.get("type") is not None else None
    return None if reason is None else str(reason)


def parse_generate_response(payload: Any, where: str = "/generate") -> ParsedResponse:
    """Read one native `/generate` response; raise `MissingMetric` if a figure is absent."""
    if isinstance(payload, list) and len(payload) == 1:
        payload = payload[0]  # a batch of one comes back as a one-element list
    if not isinstance(payload, Mapping):
        raise MissingMetric(f"{where}: expected a JSON object, got {type(payload).__name__}")
    meta = payload.get("meta_info")
    if not isinstance(meta, Mapping):
        raise MissingMetric(f"{where}: response has no meta_info (is this the native /generate?)")
    tokens = _first(meta, COMPLETION_TOKEN_KEYS)
    if tokens is None:
        raise MissingMetric(f"{where}: meta_info has no completion token count "
                            f"(looked for {', '.join(COMPLETION_TOKEN_KEYS)})")
    steps = _first(meta, VERIFY_STEP_KEYS)
    if steps is None and isinstance(tokens, int) and tokens <= 1:
        # SGLang omits every spec key when a request ended before any verify step
        # (its one token came from prefill): a valid row with 0 steps.
        steps = 0
    if steps is None:
        accept = _first(meta, ACCEPT_LENGTH_KEYS)
        if accept is None:
            raise MissingMetric(
                f"{where}: meta_info has no verify count (looked for "
                f"{', '.join(VERIFY_STEP_KEYS)}); is speculative decoding enabled?"
            )
        raise MissingMetric(
            f"{where}: meta_info has spec_accept_length but no verify count; "
            "an exact figure needs the count"
        )
    completion = _as_count(tokens, "completion_tokens", where)
    verify = _as_count(steps, "spec_verify_ct", where)
    if completion > 1 and verify == 0:
        raise MissingMetric(f"{where}: {completion} tokens but 0 verify steps: speculative "
                            "decoding did not run for this request")
    histogram = _first(meta, HISTOGRAM_KEYS)
    if histogram is not None and not (
        isinstance(histogram, list) and all(isinstance(v, int) for v in histogram)
    ):
        histogram = None  # malformed histograms are dropped: they only feed a plot
    prompt = meta.get("prompt_tokens")
    return ParsedResponse(
        text=str(payload.get("text", "")),
        completion_tokens=completion,
        verify_steps=verify,
        histogram=histogram,
        prompt_tokens=int(prompt) if isinstance(prompt, int) else None,
        finish_reason=_finish_reason(meta),
    )


def server_accept_length(server_info: Any) -> float | None:
    """`internal_states[*].avg_spec_accept_length`, averaged over data-parallel ranks."""
    if not isinstance(server_info, Mapping):
        return None
    states = server_info.get("internal_states")
    values = []
    if isinstance(states, list):
        for state in states:
            if isinstance(state, Mapping):
                value = _first(state, SERVER_ACCEPT_KEYS)
                if isinstance(value, int | float) and math.isfinite(value):
                    values.append(float(value))
    return sum(values) / len(values) if values else None


def summarise(
    rows: Sequence[RequestRow],
    duration_s: float,
    server_figure: float | None,
    ci: tuple[float, float] | None,
) -> Measurement:
    """The run's figures from its measured requests; raises if no figure can be formed."""
    if not rows:
        raise MissingMetric("no measured request completed: no accept length")
    tokens = sum(r.completion_tokens for r in rows)
    steps = sum(r.verify_steps for r in rows)
    if steps == 0:
        raise MissingMetric("measured requests reported 0 verify steps: no accept length")
    exact = tokens / steps
    disagreement = None
    if server_figure is not None:
        disagreement = (server_figure - exact) / exact
    histogram = stats.sum_histograms([r.accept_histogram for r in rows])
    latencies = sorted(r.latency_s for r in rows)
    graded = [r for r in rows if r.correct is not None]
    n_correct = sum(1 for r in graded if r.correct)
    return Measurement(
        accept_length=exact,
        accept_length_ci=ci,
        n_requests=len(rows),
        completion_tokens=tokens,
        verify_steps=steps,
        per_position_acceptance=stats.per_position_acceptance(histogram) or None,
        accept_histogram=histogram or None,
        server_accept_length=server_figure,
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
