"""SGLang 0.5.23's OpenAI-compatible routes: models, completions, chat completions.

Shapes from `sglang/srt/entrypoints/openai/` (`protocol.py`, `serving_completions.py`,
`serving_chat.py`, `sse_utils.py`, `usage_processor.py`) and `http_server.py`:
- `/v1/chat/completions` renders the tokenizer's Jinja chat template with
  `add_generation_prompt=True` and the request's `chat_template_kwargs`; with
  `"return_meta_info": true` (non-streaming only) each choice carries the request's
  `meta_info`, exactly as `/generate` returns it;
- unset fields take OpenAI's defaults (temperature 1, top_p 1; completions max_tokens 16;
  chat max_tokens unset = what the context leaves);
- streams are server-sent events ending `data: [DONE]`, a usage chunk only when
  `stream_options.include_usage` is set; a chat stream sends, before it, a chunk with
  `choices: []` and `sglext` holding the spec counts (`return_spec_tokens_details`) and the
  prompt's ids (`return_input_ids_in_sglext`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from reference_engine.params import BadRequest, meta_info, parse_sampling
from reference_engine.server import run_request
from reference_engine.web import Handler

DEFAULT_MODEL_NAME = "default"  # protocol.DEFAULT_MODEL_NAME


def _model_card(h: Handler, name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
            "root": name, "parent": None,
            "max_model_len": h.engine.server_args["context_length"]}


def models(h: Handler) -> None:
    name = h.engine.server_args["served_model_name"]
    h.reply_json({"object": "list", "data": [_model_card(h, name)]})


def model(h: Handler) -> None:
    wanted = h.path_only[len("/v1/models/"):]
    if wanted != h.engine.server_args["served_model_name"]:
        h.reply_json({"error": {"message": f"The model '{wanted}' does not exist",
                                "type": "invalid_request_error", "param": "model",
                                "code": "model_not_found"}}, status=404)
        return
    h.reply_json(_model_card(h, wanted))


def _sampling(body: dict[str, Any], max_new: int | None) -> Any:
    raw = {"max_new_tokens": max_new, "temperature": body.get("temperature"),
           "top_p": body.get("top_p"), "top_k": body.get("top_k"), "stop": body.get("stop"),
           "sampling_seed": body.get("seed"), "n": body.get("n", 1)}
    return parse_sampling(raw)


def _usage(prompt: int, completion: int, *, exclude_none: bool = False) -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion,
             "completion_tokens": completion, "prompt_tokens_details": None,
             "reasoning_tokens": 0, "completion_tokens_details": None}
    return {k: v for k, v in usage.items() if v is not None} if exclude_none else usage


def _include_usage(body: dict[str, Any]) -> bool:
    options = body.get("stream_options")
    return bool(isinstance(options, dict) and options.get("include_usage"))


def held_back(text: str, stops: list[str]) -> str:
    """The text safe to stream: without a tail that may still grow into a stop string, nor
    a partial UTF-8 character (decoded as U+FFFD until its last byte arrives)."""
    text = text.rstrip("\ufffd")
    cut = len(text)
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:size]):
                cut = min(cut, len(text) - size)
                break
    return text[:cut]


class _Stream:
    """Text deltas of one streamed request, as SGLang's serving classes send them."""

    def __init__(self, h: Handler, stops: list[str], make_chunk) -> None:
        self.h, self.stops, self.make_chunk = h, stops, make_chunk
        self.sent = ""
        self.started = False

    def start(self, first: dict[str, Any] | None = None) -> None:
        if not self.started:
            self.h.sse_start()
            self.started = True
            if first is not None:
                self.h.sse_data(first)

    def step(self, ids: list[int]) -> None:
        self.start_hook()
        text = held_back(self.h.engine.decode(ids), self.stops)
        if text.startswith(self.sent) and len(text) > len(self.sent):
            delta, self.sent = text[len(self.sent):], text
            self.h.sse_data(self.make_chunk(delta, None, None))

    def start_hook(self) -> None:  # replaced per route
        self.start()

    def finish(self, result: dict[str, Any]) -> None:
        self.start_hook()
        text = result["text"]
        delta = text[len(self.sent):] if text.startswith(self.sent) else ""
        self.sent = text
        reason = result["finish_reason"]
        self.h.sse_data(self.make_chunk(delta, reason["type"], reason.get("matched")))


def completions(h: Handler) -> None:
    body = h.body()
    prompt = body.get("prompt")
    if not prompt or (isinstance(prompt, list) and all(not p for p in prompt)):
        raise BadRequest("Prompt cannot be empty")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        prompt_ids = h.engine.encode(prompt)
    elif isinstance(prompt, list) and all(isinstance(i, int) for i in prompt):
        prompt_ids = list(prompt)
    else:
        raise BadRequest("only one prompt per request is supported by the reference engine")
    max_tokens = body.get("max_tokens", 16)
    sampling = _sampling(body, 16 if max_tokens is None else max_tokens)
    rid, created = uuid.uuid4().hex, int(time.time())
    name = body.get("model") or DEFAULT_MODEL_NAME
    echo = h.engine.decode(prompt_ids) if isinstance(prompt, list) else prompt
    echo = echo if body.get("echo") else ""

    def chunk(text: str, reason: str | None, matched: Any) -> dict[str, Any]:
        return {"id": rid, "object": "text_completion", "created": created, "model": name,
                "choices": [{"index": 0, "text": text, "logprobs": None,
                             "finish_reason": reason, "matched_stop": matched}],
                "usage": None}

    if not body.get("stream"):
        result, _ = run_request(h, prompt_ids, sampling, stream=False, rid=rid)
        reason = result["finish_reason"]
        h.reply_json({
            "id": rid, "object": "text_completion", "created": created, "model": name,
            "choices": [{"index": 0, "text": echo + result["text"], "logprobs": None,
                         "finish_reason": reason["type"], "matched_stop": reason.get("matched")}],
            "usage": _usage(result["prompt_tokens"], len(result["output_ids"])),
            "metadata": {"weight_version": "default"}})
        return
    stream = _Stream(h, sampling.stop, chunk)
    stream.sent = ""
    if echo:
        stream.start_hook = lambda: stream.start(chunk(echo, None, None))  # type: ignore
    result, _ = run_request(h, prompt_ids, sampling, stream=True, rid=rid, on_chunk=stream.step)
    stream.finish(result)
    if _include_usage(body):
        h.sse_data({"id": rid, "object": "text_completion", "created": created, "model": name,
                    "choices": [], "usage": _usage(result["prompt_tokens"],
                                                   len(result["output_ids"]), exclude_none=True)})
    h.sse_end()


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: only text parts here
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise BadRequest("only text content parts are supported by the reference "
                                 "engine")
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    if content is None:
        return ""
    raise BadRequest("message content must be a string or a list of text parts")


def render_chat(h: Handler, body: dict[str, Any]) -> list[int]:
    """The prompt ids: `input_ids` if given, else the chat template's rendering."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("messages must be a non-empty list of {role, content} objects")
    if isinstance(body.get("input_ids"), list) and body["input_ids"]:
        return list(body["input_ids"])
    tokenizer = h.engine.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        raise BadRequest("the model's tokenizer has no chat template")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise BadRequest("chat_template_kwargs must be an object")
    if body.get("reasoning_effort") is not None:
        kwargs = {"reasoning_effort": body["reasoning_effort"], **kwargs}
    plain = [{"role": m["role"], "content": _message_text(m.get("content"))} for m in messages]
    try:
        text = tokenizer.apply_chat_template(plain, tokenize=False, add_generation_prompt=True,
                                             **kwargs)
    except Exception as error:  # template errors are the client's (SGLang: 400)
        raise BadRequest(f"{type(error).__name__}: {error}") from error
    return h.engine.encode(text)


def chat_completions(h: Handler) -> None:
    body = h.body()
    stream = bool(body.get("stream"))
    if stream and body.get("return_meta_info"):
        raise BadRequest("return_meta_info is not supported with streaming. "
                         "Please set stream=false when using return_meta_info=true.")
    if stream and body.get("return_prompt_token_ids"):
        raise BadRequest("return_prompt_token_ids is not supported with streaming. "
                         "Please set stream=false when using return_prompt_token_ids=true.")
    prompt_ids = render_chat(h, body)
    sampling = _sampling(body, body.get("max_completion_tokens") or body.get("max_tokens"))
    rid, created = uuid.uuid4().hex, int(time.time())
    name = body.get("model") or DEFAULT_MODEL_NAME
    block = int(h.engine.server_args["speculative_num_draft_tokens"] or 1)
    if not stream:
        result, latency = run_request(h, prompt_ids, sampling, stream=False, rid=rid)
        reason = result["finish_reason"]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": result["text"],
                        "reasoning_content": None},
            "logprobs": None, "finish_reason": reason["type"],
            "matched_stop": reason.get("matched")}
        if body.get("return_prompt_token_ids") or body.get("return_token_ids"):
            choice["prompt_token_ids"] = list(prompt_ids)  # as SGLang 0.5.23's serving_chat
        if body.get("return_meta_info"):
            choice["meta_info"] = meta_info(result, rid, latency, block)
        h.reply_json({"id": rid, "object": "chat.completion", "created": created,
                      "model": name, "choices": [choice],
                      "usage": _usage(result["prompt_tokens"], len(result["output_ids"])),
                      "metadata": {"weight_version": "default"}})
        return

    def chunk(text: str | None, reason: str | None, matched: Any,
              role: str | None = None) -> dict[str, Any]:
        delta: dict[str, Any] = {"reasoning_content": None}
        if role is not None:
            delta["role"] = role
        if text or role is not None:
            delta["content"] = text
        return {"id": rid, "object": "chat.completion.chunk", "created": created,
                "model": name, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                            "finish_reason": reason,
                                            "matched_stop": matched}]}

    sse = _Stream(h, sampling.stop, lambda text, reason, matched: chunk(text, None, None))
    sse.start_hook = lambda: sse.start(chunk("", None, None, role="assistant"))  # type: ignore
    result, _ = run_request(h, prompt_ids, sampling, stream=True, rid=rid, on_chunk=sse.step)
    reason = result["finish_reason"]
    text = result["text"]
    sse.start_hook()
    if text.startswith(sse.sent) and len(text) > len(sse.sent):
        h.sse_data(chunk(text[len(sse.sent):], None, None))
    h.sse_data(chunk(None, reason["type"], reason.get("matched")))
    sglext = _sglext(body, result, prompt_ids, rid, block)
    if sglext:
        h.sse_data({"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": name, "choices": [], "sglext": sglext})
    if _include_usage(body):
        h.sse_data({"id": rid, "object": "chat.completion.chunk", "created": created,
                    "model": name, "choices": [],
                    "usage": _usage(result["prompt_tokens"], len(result["output_ids"]))})
    h.sse_end()


SPEC_DETAILS = ("spec_accept_rate", "spec_accept_length", "spec_num_correct_drafts",
                "spec_num_proposed_drafts", "spec_verify_ct", "spec_correct_drafts_histogram")


def _sglext(body: dict[str, Any], result: dict[str, Any], prompt_ids: list[int], rid: str,
            block: int) -> dict[str, Any]:
    """SGLang 0.5.23's `sglext` chunk of a chat stream (`serving_chat.py`): the request's
    spec counts with `return_spec_tokens_details` (`SpecTokensDetails`, absent without a
    verify step), the prompt's ids with `return_input_ids_in_sglext`."""
    out: dict[str, Any] = {}
    if body.get("return_spec_tokens_details"):
        meta = meta_info(result, rid, 0.0, block)
        if "spec_verify_ct" in meta:
            out["spec_tokens_details"] = {
                **{key: meta[key] for key in SPEC_DETAILS}, "spec_cap_length": 0.0,
                "spec_block_accept_length": 0.0, "spec_cap_lens_histogram": []}
    if body.get("return_input_ids_in_sglext"):
        out["input_ids"] = list(prompt_ids)
    return out


ROUTES = {
    ("GET", "/v1/models"): models,
    ("GET", "/v1/models/*"): model,
    ("POST", "/v1/completions"): completions,
    ("POST", "/v1/chat/completions"): chat_completions,
}
