"""SGLang 0.5.23's native routes: /generate, health, readiness, info, flush.

Shapes and rules from `sglang/srt/entrypoints/http_server.py` (routes),
`managers/tokenizer_manager.py` (request checks, meta_info, streaming) and
`managers/io_struct.py` (`GenerateReqInput`). `routes.routes` joins these with the OpenAI
routes.
"""

from __future__ import annotations

import queue
import threading
import uuid
from typing import Any

from reference_engine.params import BadRequest, check_context, meta_info, parse_sampling
from reference_engine.web import Handler

FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)
_END = object()


def prompt_ids_of(h: Handler, body: dict[str, Any]) -> list[int]:
    """`input_ids` (wins, as in SGLang) or the tokenized `text`; one prompt per request."""
    text, ids = body.get("text"), body.get("input_ids")
    if text is None and ids is None:
        raise BadRequest("Either text, input_ids or input_embeds should be provided.")
    if ids is not None:
        if ids and all(isinstance(item, list) for item in ids):
            raise BadRequest("batched input_ids (a list of lists) are not supported by the "
                             "reference engine; send one request per prompt")
        vocab = h.engine.server_args["vocab_size"]
        if (not isinstance(ids, list) or not ids
                or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
            raise BadRequest("input_ids must be a non-empty list of token ids (integers)")
        if any(not 0 <= i < vocab for i in ids):
            raise BadRequest(f"input_ids must be token ids in [0, {vocab})")
        return list(ids)
    if isinstance(text, list):
        raise BadRequest("batched text (a list of prompts) is not supported by the reference "
                         "engine; send one request per prompt")
    if not isinstance(text, str):
        raise BadRequest("text must be a string")
    ids = h.engine.encode(text)
    if not ids:
        raise BadRequest("text is empty: nothing to generate from")
    return ids


def run_request(h: Handler, prompt_ids: list[int], sampling, *, stream: bool, rid: str,
                on_chunk=None) -> tuple[dict[str, Any], float]:
    """Check the context, decode; with `on_chunk`, call it with each step's output ids."""
    budget = check_context(len(prompt_ids), sampling.max_new_tokens,
                           h.engine.server_args["context_length"])
    if not stream:
        return h.engine.generate(prompt_ids, sampling, budget)
    steps: queue.Queue = queue.Queue()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = h.engine.generate(prompt_ids, sampling, budget, on_step=steps.put)
        except BaseException as error:
            outcome["error"] = error
        finally:
            steps.put(_END)

    threading.Thread(target=work, daemon=True, name=f"stream-{rid}").start()
    while (ids := steps.get()) is not _END:
        on_chunk(ids)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def generate(h: Handler) -> None:
    body = h.body()
    prompt_ids = prompt_ids_of(h, body)
    sampling = parse_sampling(body.get("sampling_params"))
    rid = str(body.get("rid") or uuid.uuid4().hex)
    block = int(h.engine.server_args["speculative_num_draft_tokens"] or 1)
    if not body.get("stream"):
        result, latency = run_request(h, prompt_ids, sampling, stream=False, rid=rid)
        h.reply_json({"text": result["text"], "output_ids": result["output_ids"],
                      "meta_info": meta_info(result, rid, latency, block)})
        return
    started = False  # the context check raises before any chunk: a too-long request gets a 400

    def chunk(ids: list[int]) -> None:
        nonlocal started
        if not started:
            h.sse_start()
            started = True
        partial = {"output_ids": ids, "prompt_tokens": len(prompt_ids)}
        h.sse_data({"text": h.engine.decode(ids), "output_ids": ids,
                    "meta_info": meta_info(partial, rid, 0.0, block, finished=False)})

    try:
        result, latency = run_request(h, prompt_ids, sampling, stream=True, rid=rid,
                                      on_chunk=chunk)
    except Exception as error:
        if not started:
            raise
        h.sse_data({"error": {"message": str(error) or type(error).__name__,
                              "type": "invalid_request_error", "code": 400,
                              "retryable": False}})
        h.sse_end()
        return
    if not started:
        h.sse_start()
    h.sse_data({"text": result["text"], "output_ids": result["output_ids"],
                "meta_info": meta_info(result, rid, latency, block)})
    h.sse_end()


def health(h: Handler) -> None:
    # SGLang 0.5.23 generates one token on /health too (SGLANG_ENABLE_HEALTH_ENDPOINT_
    # GENERATION defaults to true); any progress of other requests also proves health.
    h.reply_text("", 200 if h.engine.healthy() else 503)


def ready(h: Handler) -> None:
    h.reply_text("", 200)  # the server listens only once every worker has loaded


def model_info(h: Handler) -> None:
    args = h.engine.server_args
    h.reply_json({
        "model_path": args["model_path"], "served_model_name": args["served_model_name"],
        "tokenizer_path": args["tokenizer_path"], "is_generation": True,
        "preferred_sampling_params": None, "weight_version": "default",
        "load_format": "auto", "reasoning_parser": None, "tool_call_parser": None,
        "disaggregation_mode": "null", "has_image_understanding": False,
        "has_audio_understanding": False, "model_type": args["model_type"],
        "architectures": args["architectures"],
    })


def server_info(h: Handler) -> None:
    h.reply_json(h.engine.server_info())


def flush_cache(h: Handler) -> None:
    # SGLang ignores a flush's body; read it only so the connection stays usable.
    h.drain()
    if h.engine.flush():
        h.reply_text(FLUSHED)
    else:
        h.reply_text("Flush cache failed.\n", 400)
