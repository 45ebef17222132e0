"""SGLang's streamed answers, assembled into the answers its routes give unstreamed.

Facts read in SGLang 0.5.23's source (0.5.17-0.5.22 where they differ):
- `POST /generate` with `"stream": true` sends `data: {json}` events, then `data: [DONE]`
  (`entrypoints/http_server.py`, `serve_generate_request`); each event is the request's
  state after a scheduler step: `meta_info` with the cumulative `completion_tokens`, and
  in the last one (its `finish_reason` set) the full `meta_info` the unstreamed answer
  carries, spec counts included (`managers/tokenizer_manager.py`, `_handle_batch_output`).
  By default text and `output_ids` are cumulative (an intermediate event's `text` may be
  null); with the server's `--incremental-streaming-output` each event carries only its
  delta. Either way `completion_tokens` is cumulative, so a step's tokens are the rise;
- `POST /v1/chat/completions` with `"stream": true` sends `chat.completion.chunk`s whose
  `choices[0].delta.content` is the new text (`serving_chat.py`, `_generate_chat_stream`);
  `"return_meta_info"` is refused with streaming, but from 0.5.19
  `"return_spec_tokens_details": true` adds, after the last content chunk, a chunk with
  `choices: []` and `sglext.spec_tokens_details` (`SpecTokensDetails`: `spec_verify_ct`,
  `spec_num_correct_drafts`, `spec_correct_drafts_histogram`, ..., built by
  `openai/utils.py` `spec_tokens_details_from_meta_info` from the final `meta_info`; absent
  when the request had no verify step), from 0.5.20 `"return_input_ids_in_sglext": true`
  the prompt's token ids as `sglext.input_ids`, and `stream_options.include_usage` a last
  chunk with `usage.completion_tokens`. SGLang's chat request model ignores fields it
  does not define, so an older release ignores these asks.
- a stop string is trimmed from the answer when the request finishes
  (`detokenizer_manager.trim_matched_stop`: the text before the matched string's first
  occurrence), but content already streamed is not taken back: a stop string that spans
  steps leaves its start in the streamed text, and the finish chunk names it
  (`matched_stop`). The assembled text is trimmed by the same rule (`trim_stop`);
- an error after the stream started is an event `{"error": {"message": ...}}`
  (`http_server.py`; `serving_base.create_streaming_error_response`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.engines.interface import NOTHING, StreamPiece, checked_event, first_choice
from harness.engines.sglang.api import rank_states

# The release whose chat stream carries the per-request counts (return_spec_tokens_details)
CHAT_COUNTS_SINCE = (0, 5, 19)
SPEC_DETAIL_KEYS = ("spec_verify_ct", "spec_num_correct_drafts", "spec_num_proposed_drafts",
                    "spec_accept_length", "spec_accept_rate", "spec_correct_drafts_histogram")


class GenerateStream:
    """Events of a streamed native `/generate` -> its unstreamed answer."""

    def __init__(self) -> None:
        self.tokens = 0  # completion_tokens so far
        self.last: Mapping[str, Any] | None = None
        self.texts: list[str] = []
        self.ids_lengths: list[int] = []

    def feed(self, event: object) -> StreamPiece:
        event = checked_event(event)
        meta = event.get("meta_info")
        if not isinstance(meta, Mapping):
            return NOTHING
        self.last = event
        if isinstance(text := event.get("text"), str):
            self.texts.append(text)
        ids = event.get("output_ids")
        if isinstance(ids, list):
            self.ids_lengths.append(len(ids))
        count = meta.get("completion_tokens")
        if not isinstance(count, int) or isinstance(count, bool) or count <= self.tokens:
            return NOTHING
        new, self.tokens = count - self.tokens, count
        return StreamPiece(True, new)

    def payload(self) -> object:
        if self.last is None:
            return {}
        out = dict(self.last)
        if not self._cumulative():
            out["text"] = "".join(self.texts)
        return out

    def _cumulative(self) -> bool:
        """Whether events carried the whole output so far (SGLang's default), not deltas
        (`--incremental-streaming-output`): the last event's `output_ids` is then as long
        as every token made; without ids, every earlier text is a prefix of the last."""
        if self.ids_lengths:
            return self.ids_lengths[-1] == self.tokens
        return not self.texts or all(self.texts[-1].startswith(text) for text in self.texts)


class ChatStream:
    """Chunks of a streamed `/v1/chat/completions` -> its unstreamed answer with
    `meta_info` (what `return_meta_info` gives), for `api.parse_chat`."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.finish_reason: Any = None
        self.details: Mapping[str, Any] | None = None
        self.input_ids: list[int] | None = None
        self.usage: Mapping[str, Any] | None = None
        self.matched_stop: Any = None

    def feed(self, event: object) -> StreamPiece:
        event = checked_event(event)
        sglext = event.get("sglext")
        if isinstance(sglext, Mapping):
            details = sglext.get("spec_tokens_details")
            if isinstance(details, list) and len(details) == 1:
                details = details[0]
            if isinstance(details, Mapping):
                self.details = details
            if isinstance(sglext.get("input_ids"), list):
                self.input_ids = sglext["input_ids"]
        if isinstance(usage := event.get("usage"), Mapping):
            self.usage = usage
        choice = first_choice(event)
        if choice is None:
            return NOTHING
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
            self.matched_stop = choice.get("matched_stop")
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, Mapping) else None
        if isinstance(content, str) and content:
            self.text.append(content)
            return StreamPiece(True, None)
        return NOTHING

    def payload(self) -> object:
        meta: dict[str, Any] = {}
        if self.usage is not None:
            for key in ("completion_tokens", "prompt_tokens"):
                if key in self.usage:
                    meta[key] = self.usage[key]
        if self.details is not None:
            meta.update({k: self.details[k] for k in SPEC_DETAIL_KEYS if k in self.details})
        meta["finish_reason"] = self.finish_reason
        content = trim_stop("".join(self.text), self.matched_stop)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant",
                                                          "content": content},
                                  "finish_reason": self.finish_reason, "meta_info": meta}
        if self.input_ids is not None:
            choice["prompt_token_ids"] = self.input_ids
        return {"choices": [choice]}


def trim_stop(text: str, matched: Any) -> str:
    """The streamed `text` as the unstreamed answer has it: cut before the stop string
    `matched`, at its first occurrence, or, where the stream stopped inside it, at the
    first point from which the rest of the text starts the stop string."""
    if not isinstance(matched, str) or not matched:
        return text
    at = text.find(matched)
    if at != -1:
        return text[:at]
    for start in range(max(0, len(text) - len(matched) + 1), len(text)):
        if matched.startswith(text[start:]):
            return text[:start]
    return text


def stream_body(body: Mapping[str, Any], chat: bool) -> dict[str, Any]:
    """The streamed form of a request `api.generate_body` or `api.chat_body` built."""
    out = {**body, "stream": True}
    if chat:
        out.pop("return_meta_info", None)  # refused with streaming: the counts come in sglext
        out.pop("return_prompt_token_ids", None)
        out |= {"stream_options": {"include_usage": True}, "return_spec_tokens_details": True,
                "return_input_ids_in_sglext": True}
    return out


def _version(text: Any) -> tuple[int, ...] | None:
    if not isinstance(text, str):
        return None
    parts = re.findall(r"\d+", text)[:3]
    return tuple(int(p) for p in parts) if len(parts) == 3 else None


def stream_refusal(info: Any, chat: bool) -> str | None:
    """Why requests to this server go unstreamed: an SGLang before 0.5.19 streams no
    per-request counts on the chat route (they come only with return_meta_info, which it
    refuses with streaming); and with several DP ranks the chat stream names no rank
    (`meta_info.dp_rank` is only in the unstreamed answer's meta_info; `sglext` has no
    such field), which the per-rank figures need (harness.metrics.ranks)."""
    if not chat:
        return None
    version = _version(info.get("version") if isinstance(info, Mapping) else None)
    if version is not None and version < CHAT_COUNTS_SINCE:
        since = ".".join(map(str, CHAT_COUNTS_SINCE))
        return (f"SGLang {'.'.join(map(str, version))} streams no per-request counts on "
                f"/v1/chat/completions (return_spec_tokens_details came in {since}; "
                "return_meta_info is refused with streaming): requests are sent unstreamed, "
                "so the counts stay exact and TTFT, TPOT and inter-token gaps are not "
                "measured (end-to-end latency is)")
    states = rank_states(info)
    if states is not None and len(states) > 1:
        return (f"the server runs {len(states)} DP ranks and SGLang's chat stream does not "
                "say which rank served a request (meta_info.dp_rank comes only with "
                "return_meta_info, refused with streaming): requests are sent unstreamed, "
                "so the per-rank figures stay exact and TTFT, TPOT and inter-token gaps are "
                "not measured (end-to-end latency is)")
    return None
