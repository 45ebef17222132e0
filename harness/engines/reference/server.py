"""HTTP server speaking the subset of SGLang 0.5.23's API that the harness uses.

Why a stdlib `ThreadingHTTPServer`: the engine's environment should hold only what
generation needs (torch, transformers, dflash), and a handful of JSON endpoints do not
justify a web framework. Handler threads only parse and wait; one worker thread runs every
generation in arrival order, so the models are never used concurrently and concurrent
requests queue safely, as in SGLang's scheduler.

Response shapes follow SGLang 0.5.23 (`sglang/srt/entrypoints/http_server.py`,
`managers/tokenizer_manager.py`, `managers/schedule_batch.py`, `entrypoints/openai/`).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.engines.reference.decoding import Generation, SpeculativeDecoder

log = logging.getLogger("harness.engines.reference")

FLUSHED = (
    "Cache flushed.\nPlease check backend logs for more details. "
    "(When there are running or waiting requests, the operation will not be performed.)\n"
)


class BadRequest(ValueError):
    """A request body the server rejects with 400."""


# SamplingParams in SGLang 0.5.23 rejects unknown keys with 400; these are the known ones
# (only max_new_tokens, temperature, top_p, top_k, stop and sampling_seed take effect here).
KNOWN_SAMPLING_KEYS = frozenset({
    "max_new_tokens", "temperature", "top_p", "top_k", "min_p", "stop", "stop_token_ids",
    "stop_regex", "ignore_eos", "skip_special_tokens", "no_stop_trim", "n", "sampling_seed",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens",
    "spaces_between_special_tokens", "regex", "json_schema", "ebnf", "structural_tag",
    "custom_params", "stream_interval", "logit_bias",
})


@dataclass
class Counters:
    """Cumulative figures since launch or the last flush (SGLang's internal_states).

    As in SGLang (`spec_total_num_accept_tokens / spec_total_num_forward_ct`), the server
    figure counts, per verify step, the accepted drafts plus the bonus token; the token
    sampled at prefill is not a verify step's. So Σcompletion_tokens / Σspec_verify_ct over
    requests sits slightly *above* avg_spec_accept_length, exactly as with SGLang (by
    requests / verify steps). Unlike SGLang, the figure is folded in at every request, not
    every `decode_log_interval` iterations, so it is never missing after a short run.
    """

    accept_tokens: int = 0
    verify_steps: int = 0

    def add(self, generation: Generation) -> None:
        self.accept_tokens += sum(generation.produced)
        self.verify_steps += generation.verify_steps


@dataclass
class Engine:
    """The decoder, its single worker thread, and the server-wide state."""

    decoder: SpeculativeDecoder
    server_args: dict[str, Any]
    seed: int
    counters: Counters = field(default_factory=Counters)
    lock: threading.Lock = field(default_factory=threading.Lock)
    jobs: queue.Queue = field(default_factory=queue.Queue)
    in_flight: int = 0
    last_throughput: float = 0.0

    def start(self) -> None:
        threading.Thread(target=self._work, name="generation-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            job, future = self.jobs.get()
            try:
                future.set_result(job())
            except Exception as error:  # reported to the waiting handler as a 500
                log.exception("generation failed")
                future.set_exception(error)

    def submit(self, job: Callable[[], Generation]) -> Generation:
        future: Future = Future()
        with self.lock:
            self.in_flight += 1
        try:
            self.jobs.put((job, future))
            return future.result()
        finally:
            with self.lock:
                self.in_flight -= 1

    def generate(self, prompt: str, params: dict[str, Any], *, count: bool = True) -> tuple[
            Generation, float]:
        started = time.perf_counter()
        generation = self.submit(lambda: self.decoder.generate(prompt, **params))
        latency = time.perf_counter() - started
        with self.lock:
            if count:
                self.counters.add(generation)
            if latency > 0:
                self.last_throughput = generation.completion_tokens / latency
        log.info("generated %d tokens in %d verify steps (%.2f s), finish %s",
                 generation.completion_tokens, generation.verify_steps, latency,
                 generation.finish_reason)
        return generation, latency

    def flush(self) -> bool:
        """Reset the cumulative counters; refused (False) while requests run, as in SGLang."""
        with self.lock:
            if self.in_flight:
                return False
            self.counters = Counters()
            return True

    def server_info(self) -> dict[str, Any]:
        with self.lock:
            state: dict[str, Any] = {"last_gen_throughput": self.last_throughput}
            if self.counters.verify_steps:
                state["avg_spec_accept_length"] = (
                    self.counters.accept_tokens / self.counters.verify_steps
                )
        return {**self.server_args, "internal_states": [state]}


def sampling_params(raw: Any, *, max_tokens_key: str = "max_new_tokens",
                    default_max: int = 128) -> dict[str, Any]:
    """SGLang sampling params -> SpeculativeDecoder.generate keyword arguments."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise BadRequest("sampling_params must be an object")
    unknown = sorted(set(raw) - KNOWN_SAMPLING_KEYS) if max_tokens_key == "max_new_tokens" else []
    if unknown:
        raise BadRequest(f"unknown sampling_params: {', '.join(unknown)}")
    stop = raw.get("stop") or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(item, str) for item in stop):
        raise BadRequest("stop must be a string or a list of strings")
    try:
        max_new = int(raw.get(max_tokens_key) if raw.get(max_tokens_key) is not None
                      else default_max)
        temperature = float(raw.get("temperature", 1.0))
        top_p = float(raw.get("top_p", 1.0))
        top_k = int(raw.get("top_k", -1))
        seed = raw.get("sampling_seed", raw.get("seed"))
        seed = None if seed is None else int(seed)
    except (TypeError, ValueError) as error:
        raise BadRequest(f"bad sampling parameter: {error}") from error
    if max_new < 1:
        raise BadRequest(f"{max_tokens_key} must be at least 1")
    if temperature < 0 or not 0 < top_p <= 1:
        raise BadRequest("temperature must be >= 0 and top_p in (0, 1]")
    return {"max_new_tokens": max_new, "temperature": temperature, "top_p": top_p,
            "top_k": max(top_k, 0), "stop": stop, "seed": seed}


def meta_info(generation: Generation, rid: str, latency: float, block_size: int) -> dict:
    """SGLang's meta_info of a finished request (spec fields as in SGLang's tokenizer manager)."""
    info: dict[str, Any] = {
        "id": rid,
        "finish_reason": generation.finish_reason,
        "prompt_tokens": generation.prompt_tokens,
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": generation.completion_tokens,
        "cached_tokens": 0,
        "e2e_latency": latency,
    }
    steps = generation.verify_steps
    proposed = steps * (block_size - 1)
    if steps > 0 and proposed > 0:
        correct = sum(generation.accepted_drafts)
        histogram = [0] * (max(generation.accepted_drafts) + 1)
        for accepted in generation.accepted_drafts:
            histogram[accepted] += 1
        info.update({
            "spec_accept_rate": correct / proposed,
            "spec_accept_length": generation.completion_tokens / steps,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": steps,
            "spec_correct_drafts_histogram": histogram,
        })
    return info


class Handler(BaseHTTPRequestHandler):
    """Routes SGLang's endpoints to the engine; one instance per connection."""

    engine: Engine  # set on the subclass made by `make_server`
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        routes: dict[tuple[str, str], Callable[[], None]] = {
            ("GET", "/health"): lambda: self._send(HTTPStatus.OK, b"", "text/plain"),
            ("GET", "/health_generate"): self._health_generate,
            ("GET", "/server_info"): lambda: self._json(HTTPStatus.OK,
                                                        self.engine.server_info()),
            ("GET", "/get_server_info"): lambda: self._json(HTTPStatus.OK,
                                                            self.engine.server_info()),
            ("GET", "/flush_cache"): self._flush,
            ("POST", "/flush_cache"): self._flush,
            ("POST", "/generate"): self._generate,
            ("POST", "/v1/completions"): self._completions,
            ("GET", "/v1/models"): self._models,
        }
        handler = routes.get((method, path))
        if handler is None:
            self._error(HTTPStatus.NOT_FOUND, f"no route {method} {path}")
            return
        try:
            handler()
        except BadRequest as error:
            self._error(HTTPStatus.BAD_REQUEST, str(error))
        except Exception as error:
            log.exception("request %s %s failed", method, path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}")

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError as error:
            raise BadRequest(f"body is not JSON: {error}") from error
        if not isinstance(body, dict):
            raise BadRequest("body must be a JSON object")
        return body

    def _health_generate(self) -> None:
        params = sampling_params({"max_new_tokens": 1, "temperature": 0})
        self.engine.generate("Question:", params, count=False)
        self._send(HTTPStatus.OK, b"", "text/plain")

    def _flush(self) -> None:
        # SGLang ignores a flush's body; read it only so the connection stays usable.
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.engine.flush():
            self._send(HTTPStatus.OK, FLUSHED.encode(), "text/plain")
        else:
            self._send(HTTPStatus.BAD_REQUEST, b"Flush cache failed.\n", "text/plain")

    def _generate(self) -> None:
        body = self._body()
        prompt = body.get("text")
        if not isinstance(prompt, str):
            raise BadRequest("text must be a string (batched requests are not supported)")
        params = sampling_params(body.get("sampling_params"))
        rid = str(body.get("rid") or uuid.uuid4().hex)
        generation, latency = self.engine.generate(prompt, params)
        block_size = int(self.engine.server_args["speculative_num_draft_tokens"])
        self._json(HTTPStatus.OK, {
            "text": generation.text,
            "output_ids": generation.output_ids,
            "meta_info": meta_info(generation, rid, latency, block_size),
        })

    def _completions(self) -> None:
        body = self._body()
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise BadRequest("prompt must be a string")
        if int(body.get("n", 1)) != 1:
            raise BadRequest("only n=1 is supported")
        params = sampling_params(body, max_tokens_key="max_tokens", default_max=16)
        generation, _ = self.engine.generate(prompt, params)
        reason = generation.finish_reason["type"]
        self._json(HTTPStatus.OK, {
            "id": uuid.uuid4().hex,
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or self.engine.server_args["served_model_name"],
            "choices": [{"index": 0, "text": generation.text, "logprobs": None,
                         "finish_reason": reason, "matched_stop": generation.matched_stop}],
            "usage": {"prompt_tokens": generation.prompt_tokens,
                      "completion_tokens": generation.completion_tokens,
                      "total_tokens": generation.prompt_tokens + generation.completion_tokens,
                      "prompt_tokens_details": None},
        })

    def _models(self) -> None:
        name = self.engine.server_args["served_model_name"]
        self._json(HTTPStatus.OK, {"object": "list", "data": [
            {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang",
             "root": name}]})

    def _error(self, status: HTTPStatus, message: str) -> None:
        # The request body may be unread (unknown route, early failure): close rather than
        # let its bytes be parsed as the next request on this keep-alive connection.
        self.close_connection = True
        self._json(status, {"object": "error", "message": message, "type": status.phrase,
                            "param": None, "code": int(status)})

    def _json(self, status: HTTPStatus, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def make_server(engine: Engine, host: str, port: int) -> ThreadingHTTPServer:
    """Bind exactly `host:port` (never all interfaces)."""
    handler = type("BoundHandler", (Handler,), {"engine": engine})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
