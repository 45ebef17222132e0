"""A stand-in for `python -m sglang.launch_server` where no GPU or 31B checkpoint exists.

Process and HTTP boundary as SGLang 0.5.23 has them: a parent that starts one scheduler
process per TP rank plus a detokenizer (so teardown must kill a tree), `/health_generate`
answering 503 while starting and 200 once ready, native `/generate`, `/server_info` (server
args, `version`, `internal_states`), `/flush_cache` refused (400) while requests run.

The figures are SGLang's own. `tests/sglang_oracle` runs, from the cached wheel of
`FAKE_SGLANG_VERSION` (default 0.5.23; wheels in $HARNESS_SGLANG_WHEELS), the release's
finish check, per-request counting, `update_spec_metrics`, the folding of the server
average every `--decode-log-interval` decode iterations (default 40, so the figure lags and
is absent after a short run), `/server_info`'s `avg_spec_accept_length` and
`_calculate_spec_decoding_metrics` for `meta_info`. Only the GPU's part is simulated: each
prompt gets a seeded continuation (a GSM8K-like answer, then "Question:", then EOS) and a
seeded number of correct drafts per verify step around `FAKE_SGLANG_ACCEPT` (less
`FAKE_SGLANG_ACCEPT_DROP` per other request in the server as it arrives); up to
`--max-running-requests` (DFLASH default 48) decode together, and with the overlap
scheduler (off with `--disable-overlap-schedule`) a request finished by a stop string is
verified once more, as SGLang does. Without the wheel the server refuses to start, saying so.

Every field the harness sends is honoured as SGLang reads it: `/generate`'s
`sampling_params`; a chat request's fields through SGLang's own
`ChatCompletionRequest.to_sampling_params` from the wheel (`max_completion_tokens` first,
then `max_tokens`; `stop`; a sampled request's `seed` picks its continuation, greedy ones
ignore it); `return_meta_info`, `return_prompt_token_ids`, `rid`. Compared with the real
server's recorded answers: tests/fake_sglang/recorded-0.5.23.json. `"stream": true` is
answered as SGLang streams (`stream_events`), every event sent at once when the request
finishes (the double plans a request whole, so it has no per-step arrival times).

Failure modes for lifecycle tests (env `FAKE_SGLANG_MODE`): `ok`, `hang` (never
ready), `crash_start` (exits during start-up with an error in the log),
`crash_mid` (dies after `FAKE_SGLANG_CRASH_AFTER` requests, leaving its
children), `hang_mid` (after as many requests, answers none: a deadlock, every process
running), `no_meta` (a build whose /generate carries no spec figures).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODE = os.environ.get("FAKE_SGLANG_MODE", "ok")
VERSION = os.environ.get("FAKE_SGLANG_VERSION", "0.5.23")
STARTUP_S = float(os.environ.get("FAKE_SGLANG_STARTUP_S", "0.3"))
GENERATE_DELAY_S = float(os.environ.get("FAKE_SGLANG_DELAY_S", "0.0"))
STEP_S = float(os.environ.get("FAKE_SGLANG_STEP_S", "0.0"))  # wall time of one decode batch
ACCEPT = float(os.environ.get("FAKE_SGLANG_ACCEPT", "5.6"))
# Acceptance that falls with the running batch (sglang #21212 measured it per attention
# backend): the mean correct drafts drop by this much per other request in the server.
ACCEPT_DROP = float(os.environ.get("FAKE_SGLANG_ACCEPT_DROP", "0.0"))
CRASH_AFTER = int(os.environ.get("FAKE_SGLANG_CRASH_AFTER", "3"))
PIDFILE = os.environ.get("FAKE_SGLANG_PIDFILE")
READY_FILE = os.environ.get("FAKE_SGLANG_READY_FILE")  # when it became ready (benchmarks)
# Fault-injection tests: "got RID" as a request arrives, "sent RID" once its response is sent.
EVENTS_FILE = os.environ.get("FAKE_SGLANG_EVENTS")
BACKLOG = 1024  # the accept queue: SGLang's uvicorn takes 2048; http.server's default is 5


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--revision")
    parser.add_argument("--speculative-algorithm")
    parser.add_argument("--speculative-draft-model-path")
    parser.add_argument("--speculative-draft-model-revision")
    parser.add_argument("--speculative-num-draft-tokens", type=int)
    parser.add_argument("--speculative-dflash-block-size", type=int)
    parser.add_argument("--speculative-draft-attention-backend")
    parser.add_argument("--tp-size", type=int, default=1)
    parser.add_argument("--random-seed", type=int)
    parser.add_argument("--decode-log-interval", type=int, default=40)
    parser.add_argument("--max-running-requests", type=int)
    parser.add_argument("--disable-overlap-schedule", action="store_true")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    args, _unknown = parser.parse_known_args(argv)  # other SGLang flags are accepted
    return args


def import_oracle() -> tuple[Any, Any]:
    """tests/sglang_oracle from this checkout (or, for a copy of this file, the harness's)."""
    roots = [Path(__file__).resolve().parents[3]]
    spec = importlib.util.find_spec("harness")
    if spec is not None and spec.origin:
        roots.append(Path(spec.origin).resolve().parents[1])
    for root in roots:
        if (root / "tests" / "sglang_oracle" / "__init__.py").is_file():
            sys.path.insert(0, str(root))
            code = importlib.import_module("tests.sglang_oracle.sglang_code")
            simulate = importlib.import_module("tests.sglang_oracle.simulate")
            return code, simulate
    raise SystemExit("fake-sglang: cannot find tests/sglang_oracle (looked in "
                     + ", ".join(map(str, roots)) + ")")


class Engine:
    """The scheduler: a thread running decode batches through SGLang's own bookkeeping."""

    def __init__(self, args: argparse.Namespace) -> None:
        block = args.speculative_num_draft_tokens or args.speculative_dflash_block_size or 16
        if (args.speculative_num_draft_tokens and args.speculative_dflash_block_size
                and args.speculative_num_draft_tokens != args.speculative_dflash_block_size):
            sys.exit("ValueError: Both --speculative-num-draft-tokens and "
                     "--speculative-dflash-block-size are set but they differ.")
        code, self.simulate = import_oracle()
        try:
            self.sglang = code.SGLang(VERSION, block, args.decode_log_interval)
        except Exception as error:  # an OracleError names the wheel and what is missing
            sys.exit(f"fake-sglang: cannot run SGLang {VERSION}'s own metrics code: {error}")
        self.args = args
        self.block = block
        self.chat_params = chat_sampling_params()
        self.scheduler = self.simulate.Scheduler(
            self.sglang, overlap=not args.disable_overlap_schedule,
            max_running=args.max_running_requests or 48)
        self.cond = threading.Condition()
        self.events: dict[int, threading.Event] = {}
        self.in_server = 0  # requests received and not yet answered
        self.served = 0
        threading.Thread(target=self._loop, daemon=True).start()

    def generate(self, rid: str, text: str, params: dict[str, Any]) -> dict[str, Any]:
        stop = params.get("stop") or []
        # Greedy decoding ignores the seed; sampling repeats with the same seed only
        seeded = text if not params.get("temperature") else \
            f"{text}\0seed={params.get('sampling_seed')}"
        with self.cond:
            beside = max(self.in_server - 1, 0)
        accept = max(ACCEPT - ACCEPT_DROP * beside, 1.0)
        plan = self.simulate.plan_for(rid, seeded, int(params.get("max_new_tokens", 128)),
                                      [stop] if isinstance(stop, str) else list(stop),
                                      accept, self.block)
        done = threading.Event()
        with self.cond:
            item = self.scheduler.add(plan)
            self.events[id(item)] = done
            self.cond.notify()
        done.wait()
        return item.result

    def _loop(self) -> None:
        while True:
            with self.cond:
                while self.scheduler.idle:
                    self.cond.wait()
                for item in self.scheduler.iterate():
                    self.events.pop(id(item)).set()
            if STEP_S:
                time.sleep(STEP_S)

    def flush(self) -> bool:
        """SGLang flushes only when idle; it then resets the speculative counters."""
        with self.cond:
            if self.in_server or not self.scheduler.idle:
                return False
            self.sglang.reset()
            return True

    def server_average(self) -> float | None:
        with self.cond:
            return self.sglang.server_average()


def response(rid: str, text: str, result: dict[str, Any]) -> dict[str, Any]:
    meta = {
        "id": rid,
        "finish_reason": result["finish_reason"],
        "prompt_tokens": len(text.split()),
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": result["completion_tokens"],
        "cached_tokens": 0,
        "cached_tokens_details": None,
        "dp_rank": None,
        "e2e_latency": GENERATE_DELAY_S,
        "response_sent_to_client_ts": time.time(),
        "weight_versions": WEIGHT_VERSIONS,
    }
    if MODE != "no_meta":
        meta |= {k: v for k, v in result.items() if k.startswith("spec_")}
    return {"text": result["text"], "output_ids": list(range(result["completion_tokens"])),
            "meta_info": meta}


# What SGLang 0.5.23 answers next to its figures (compared with the real server on CPU:
# tests/sglang_cpu/test_sglang_clients.py).
WEIGHT_VERSIONS = [{"start": 0, "end": 0, "version": "default"}]


def chat_response(rid: str, model: str, prompt: str, result: dict[str, Any],
                  body: dict[str, Any]) -> dict[str, Any]:
    """`/v1/chat/completions` as SGLang's `serving_chat.py` shapes it (non-streaming); the
    double has no tokenizer or chat template: the prompt is the messages' contents."""
    meta = response(rid, prompt, result)["meta_info"]
    choice: dict[str, Any] = {
        "index": 0, "message": {"role": "assistant", "content": result["text"],
                                "reasoning_content": None},
        "logprobs": None, "finish_reason": meta["finish_reason"]["type"], "matched_stop": None}
    if body.get("return_meta_info"):
        choice["meta_info"] = meta
    if body.get("return_prompt_token_ids"):
        choice["prompt_token_ids"] = list(range(meta["prompt_tokens"]))
    completion = meta["completion_tokens"]
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": meta["prompt_tokens"], "completion_tokens": completion,
                      "total_tokens": meta["prompt_tokens"] + completion,
                      "prompt_tokens_details": None, "reasoning_tokens": 0,
                      "completion_tokens_details": None},
            "metadata": {"weight_version": "default", "weight_versions": WEIGHT_VERSIONS}}


def stream_events(route: str, rid: str, model: str, prompt: str, result: dict[str, Any],
                  body: dict[str, Any]) -> list[dict[str, Any]]:
    """The `data:` events SGLang 0.5.23 streams for the request (before `[DONE]`): on
    /generate each event the request's cumulative state (`meta_info.completion_tokens`
    rising, the last one the full answer); on the chat route the content chunks, the
    finish chunk, the `sglext` chunk (`return_spec_tokens_details`: the spec counts, absent
    without a verify step; `return_input_ids_in_sglext`) and the usage chunk
    (`stream_options.include_usage`)."""
    final = response(rid, prompt, result)
    meta = final["meta_info"]
    if route == "/generate":
        if meta["completion_tokens"] < 2:
            return [final]
        first = {"text": None, "output_ids": [0],
                 "meta_info": {**{k: v for k, v in meta.items() if not k.startswith("spec_")},
                               "completion_tokens": 1, "finish_reason": None}}
        return [first, final]
    head = {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": reason, "matched_stop": None}]}

    events = [chunk({"role": "assistant", "content": ""}),
              chunk({"content": result["text"]}), chunk({}, meta["finish_reason"]["type"])]
    sglext: dict[str, Any] = {}
    if body.get("return_spec_tokens_details") and "spec_verify_ct" in meta:
        sglext["spec_tokens_details"] = {k: v for k, v in meta.items() if k.startswith("spec_")}
    if body.get("return_input_ids_in_sglext"):
        sglext["input_ids"] = list(range(meta["prompt_tokens"]))
    if sglext:
        events.append({**head, "choices": [], "sglext": sglext})
    if (body.get("stream_options") or {}).get("include_usage"):
        completion = meta["completion_tokens"]
        events.append({**head, "choices": [], "usage": {
            "prompt_tokens": meta["prompt_tokens"], "completion_tokens": completion,
            "total_tokens": meta["prompt_tokens"] + completion}})
    return events


CHAT_PROTOCOL = "sglang/srt/entrypoints/openai/protocol.py"
# The sampling fields of a chat request that the double acts on or reports (the GPU's
# part, which tokens are sampled, stays the seeded plan's).
CHAT_SAMPLING = ("max_new_tokens", "stop", "temperature", "top_p", "top_k", "min_p",
                 "repetition_penalty", "sampling_seed")


def chat_sampling_params(version: str = VERSION) -> Any:
    """SGLang's own `ChatCompletionRequest.to_sampling_params` (its wheel's protocol.py),
    reduced to the entries `CHAT_SAMPLING` names: a function of the request body. So
    `max_completion_tokens` and the deprecated `max_tokens` count exactly as the release
    counts them (0.5.23: `self.max_completion_tokens or self.max_tokens`), and unset
    fields take the request's defaults (the model's generation_config plays no part: the
    double has none)."""
    import ast
    from types import SimpleNamespace

    import_oracle()  # puts tests/ on the path
    extract = importlib.import_module("tests.sglang_oracle.extract")
    src = extract.source(version, CHAT_PROTOCOL)
    cls = src.cls("ChatCompletionRequest")
    defaults = {}
    for stmt in cls.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
        if isinstance(target, ast.Name) and stmt.value is not None:
            try:
                defaults[target.id] = ast.literal_eval(stmt.value)
            except ValueError:
                if isinstance(stmt.value, ast.Call):  # Field(default=...)
                    for keyword in stmt.value.keywords:
                        if keyword.arg == "default":
                            with contextlib.suppress(ValueError):
                                defaults[target.id] = ast.literal_eval(keyword.value)
    method = src.method("ChatCompletionRequest", "to_sampling_params")
    literal = next(node.value for node in ast.walk(method)
                   if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                   and any(getattr(t, "id", None) == "sampling_params" for t in node.targets))
    keys, values = [], []
    for key, value in zip(literal.keys, literal.values, strict=True):
        if isinstance(key, ast.Constant) and key.value in CHAT_SAMPLING:
            keys.append(key)
            values.append(value)
    missing = set(CHAT_SAMPLING) - {k.value for k in keys}
    if missing:
        sys.exit(f"fake-sglang: sglang {version} {CHAT_PROTOCOL}: to_sampling_params has no "
                 f"{', '.join(sorted(missing))}")
    function = ast.Expression(ast.Lambda(
        args=ast.arguments(posonlyargs=[], args=[ast.arg("self"), ast.arg("stop"),
                                                 ast.arg("get_param")],
                           kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=ast.Dict(keys=keys, values=values)))
    ast.fix_missing_locations(function)
    evaluate = eval(compile(function, src.filename, "eval"), {})
    sampling_defaults = defaults.get("_DEFAULT_SAMPLING_PARAMS", {})

    def params(body: dict[str, Any]) -> dict[str, Any]:
        fields = {name: value for name, value in defaults.items() if not name.startswith("_")}
        request = SimpleNamespace(**{**fields, **body})

        def get_param(name: str) -> Any:
            value = getattr(request, name, None)
            return sampling_defaults.get(name) if value is None else value

        stop = body.get("stop") or []
        return evaluate(request, [stop] if isinstance(stop, str) else list(stop), get_param)

    return params


def make_handler(engine: Engine, ready: threading.Event) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # uvicorn's

        def log_message(self, fmt: str, *args: object) -> None:
            sys.stderr.write("fake-sglang: " + fmt % args + "\n")

        def _send(self, code: int, body: object,
                  content_type: str | None = "application/json") -> None:
            # SGLang's health and flush routes answer with a bare Response: no content type.
            data = (json.dumps(body) if content_type == "application/json" else str(body))
            raw = data.encode()
            self.send_response(code)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _stream(self, events: list[dict[str, Any]]) -> None:
            raw = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(raw.encode())))
            self.end_headers()
            self.wfile.write(raw.encode())

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/health", "/health_generate"):
                self._send(200 if ready.is_set() else 503, "", None)
            elif path in ("/server_info", "/get_server_info"):
                internal: dict[str, Any] = {"last_gen_throughput": 0.0}
                average = engine.server_average()
                if average is not None:
                    internal["avg_spec_accept_length"] = average
                args = engine.args
                self._send(200, {
                    "model_path": args.model_path,
                    "speculative_algorithm": args.speculative_algorithm,
                    "speculative_num_draft_tokens": engine.block,
                    "speculative_draft_model_path": args.speculative_draft_model_path,
                    "tp_size": args.tp_size,
                    "decode_log_interval": args.decode_log_interval,
                    "max_running_requests": args.max_running_requests or 48,
                    "disable_overlap_schedule": args.disable_overlap_schedule,
                    "internal_states": [internal],
                    "version": VERSION,
                })
            elif path == "/flush_cache":
                self._flush()
            else:
                self._send(404, {"detail": "Not Found"})

        def _flush(self) -> None:
            if engine.flush():
                self._send(200, "Cache flushed.\n", None)
            else:
                self._send(400, "Flush cache failed.\n", None)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path.split("?", 1)[0] == "/flush_cache":
                self._flush()
                return
            route = self.path.split("?", 1)[0]
            if route not in ("/generate", "/v1/chat/completions"):
                self._send(404, {"detail": "Not Found"})
                return
            with engine.cond:
                engine.in_server += 1
                engine.served += 1
                served = engine.served
            if EVENTS_FILE:  # the request arrived (fault tests time their fault by it)
                with open(EVENTS_FILE, "a") as events:
                    events.write(f"got {body.get('rid') or f'req-{served}'}\n")
            try:
                if MODE == "crash_mid" and served > CRASH_AFTER:
                    sys.stderr.write("fake-sglang: scheduler died: simulated crash\n")
                    sys.stderr.flush()
                    os._exit(1)  # children stay behind, as after a real scheduler crash
                if MODE == "hang_mid" and served > CRASH_AFTER:
                    time.sleep(3600)  # a deadlocked scheduler: alive, never answering
                time.sleep(GENERATE_DELAY_S)
                rid = str(body.get("rid") or f"req-{served}")
                if route == "/generate":
                    text = str(body.get("text", ""))
                    result = engine.generate(rid, text, dict(body.get("sampling_params") or {}))
                    if body.get("stream"):
                        self._stream(stream_events(route, rid, "", text, result, body))
                    else:
                        self._send(200, response(rid, text, result))
                else:
                    text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                    params = engine.chat_params(body)
                    # unset, SGLang generates up to the context; the double stops at 128
                    params["max_new_tokens"] = params["max_new_tokens"] or 128
                    result = engine.generate(rid, text, params)
                    if body.get("stream"):
                        self._stream(stream_events(route, rid, engine.args.model_path, text,
                                                   result, body))
                    else:
                        self._send(200, chat_response(rid, engine.args.model_path, text,
                                                      result, body))
                if EVENTS_FILE:
                    with open(EVENTS_FILE, "a") as events:
                        events.write(f"sent {rid}\n")
            finally:
                with engine.cond:
                    engine.in_server -= 1

    return Handler


class Server(ThreadingHTTPServer):
    request_queue_size = BACKLOG
    daemon_threads = True


def start_children(tp_size: int) -> list[subprocess.Popen]:
    # One scheduler per TP rank plus a detokenizer, as SGLang starts them.
    sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
    return [subprocess.Popen(sleeper) for _ in range(tp_size + 1)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    children = start_children(args.tp_size)
    if PIDFILE:
        with open(PIDFILE, "w") as handle:
            json.dump([os.getpid(), *[c.pid for c in children]], handle)
    print(f"fake-sglang: server_args model_path={args.model_path} tp={args.tp_size}", flush=True)
    if MODE == "crash_start":
        print("RuntimeError: CUDA error: out of memory (simulated)", file=sys.stderr, flush=True)
        return 1
    engine = Engine(args)
    ready = threading.Event()
    server = Server((args.host, args.port), make_handler(engine, ready))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if MODE == "hang":
        while True:
            time.sleep(1)
    time.sleep(STARTUP_S)  # loading weights
    ready.set()
    if READY_FILE:
        with open(READY_FILE, "w") as handle:
            handle.write(repr(time.time()))
    print("fake-sglang: The server is fired up and ready to roll!", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
