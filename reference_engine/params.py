"""Requests and responses as SGLang 0.5.23 shapes them: sampling params, limits, meta_info.

Pure Python (no torch), so the HTTP side and its tests stay light. Each rule names where
SGLang states it:
- sampling params and their checks: `sglang/srt/sampling/sampling_params.py`;
- the context-length 400: `TokenizerManager._validate_one_request`;
- an unset `max_new_tokens` takes what the context leaves: `Scheduler.init_req_max_new_tokens`;
- meta_info: `TokenizerManager._handle_batch_output`, `_wait_one_response` and
  `_calculate_spec_decoding_metrics`; the histogram as `Req.update_spec_correct_drafts_histogram`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


class BadRequest(ValueError):
    """A request the server refuses; `status` is the HTTP status (400 unless said)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message or "bad request")
        self.status = status


# SamplingParams in SGLang 0.5.23 rejects unknown keys with 400; these are the known ones
# (only max_new_tokens, temperature, top_p, top_k, stop and sampling_seed take effect here).
KNOWN_SAMPLING_KEYS = frozenset({
    "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
    "stop_regex", "ignore_eos", "skip_special_tokens", "no_stop_trim", "n", "sampling_seed",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
    "spaces_between_special_tokens", "regex", "json_schema", "ebnf", "structural_tag",
    "custom_params", "stream_interval", "logit_bias", "watermark",
})
DEFAULT_MAX_NEW_TOKENS = 128  # SamplingParams.max_new_tokens


@dataclass(frozen=True)
class Sampling:
    """What the decoder needs; `max_new_tokens` None = what the context leaves."""

    max_new_tokens: int | None
    temperature: float
    top_p: float
    top_k: int
    stop: list[str]
    seed: int | None

    def decoder_kwargs(self, max_new_tokens: int) -> dict[str, Any]:
        return {"max_new_tokens": max_new_tokens, "temperature": self.temperature,
                "top_p": self.top_p, "top_k": self.top_k, "stop": self.stop, "seed": self.seed}


def parse_sampling(raw: Any, *, check_keys: bool = True) -> Sampling:
    """SGLang `sampling_params` (a dict) -> Sampling, with SamplingParams' checks."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadRequest("sampling_params must be an object")
    unknown = sorted(set(raw) - KNOWN_SAMPLING_KEYS) if check_keys else []
    if unknown:
        raise BadRequest(f"unknown sampling_params: {', '.join(unknown)}")
    if raw.get("n") not in (None, 1):
        raise BadRequest("n > 1 is not supported by the reference engine")
    stop = raw.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(item, str) for item in stop):
        raise BadRequest("stop must be a string or a list of strings")
    try:
        max_new = raw.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)
        max_new = None if max_new is None else int(max_new)
        temperature = float(_or(raw.get("temperature"), 1.0))
        top_p = float(_or(raw.get("top_p"), 1.0))
        top_k = int(_or(raw.get("top_k"), -1))
        seed = raw.get("sampling_seed")
        seed = None if seed is None else int(seed)
    except (TypeError, ValueError) as error:
        raise BadRequest(f"bad sampling parameter: {error}") from error
    if max_new is not None and max_new < 1:
        raise BadRequest(f"max_new_tokens must be at least 1, got {max_new}.")
    if temperature < 0:
        raise BadRequest(f"temperature must be non-negative, got {temperature}.")
    if not 0 < top_p <= 1:
        raise BadRequest(f"top_p must be in (0, 1], got {top_p}.")
    if top_k < -1 or top_k == 0:
        raise BadRequest(f"top_k must be -1 (disable), or at least 1, got {top_k}.")
    return Sampling(max_new, temperature, top_p, max(top_k, 0), stop, seed)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def check_context(prompt_tokens: int, max_new_tokens: int | None, context_len: int) -> int:
    """The generation budget, or the 400 SGLang gives when the request cannot fit."""
    if prompt_tokens >= context_len:
        raise BadRequest(f"The input ({prompt_tokens} tokens) is longer than the model's "
                         f"context length ({context_len} tokens).")
    if max_new_tokens is None:
        # Scheduler: min(max_new, max_req_len - input - 1), max_req_len = context - 1.
        budget = context_len - 1 - prompt_tokens - 1
        if budget < 1:
            raise BadRequest(f"The input ({prompt_tokens} tokens) leaves no room to generate "
                             f"within the model's context length ({context_len} tokens).")
        return budget
    total = prompt_tokens + max_new_tokens
    if total > context_len:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of "
            f"{context_len} tokens. You requested a total of {total} tokens: {prompt_tokens} "
            f"tokens from the input messages and {max_new_tokens} tokens for the completion. "
            "Please reduce the number of tokens in the input messages or the completion to "
            "fit within the limit.")
    return max_new_tokens


def histogram(accepted_drafts: list[int]) -> list[int]:
    """Steps per correct-draft count, as long as the largest count + 1 (SGLang's Req)."""
    counts: list[int] = []
    for accepted in accepted_drafts:
        if len(counts) <= accepted:
            counts.extend([0] * (accepted - len(counts) + 1))
        counts[accepted] += 1
    return counts


def meta_info(result: dict[str, Any], rid: str, latency: float, block_size: int,
              *, finished: bool = True) -> dict[str, Any]:
    """SGLang's meta_info for a request (result: `Generation.to_dict()` or a partial one)."""
    completion = len(result["output_ids"])
    info: dict[str, Any] = {
        "id": rid,
        "finish_reason": result["finish_reason"] if finished else None,
        "prompt_tokens": result["prompt_tokens"],
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": completion,
        "cached_tokens": 0,
    }
    if result.get("dp_rank") is not None:  # SGLang names the rank that served it
        info["dp_rank"] = result["dp_rank"]
    if not finished:
        return info
    info["e2e_latency"] = latency
    accepted = result["accepted_drafts"]
    steps = len(accepted)
    proposed = steps * (block_size - 1)
    if steps > 0 and proposed > 0:
        correct = sum(accepted)
        info.update({
            "spec_accept_rate": correct / proposed,
            "spec_accept_length": completion / steps,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": steps,
            "spec_correct_drafts_histogram": histogram(accepted),
        })
    info["response_sent_to_client_ts"] = time.time()
    return info
