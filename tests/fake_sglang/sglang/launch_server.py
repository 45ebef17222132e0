"""A stand-in for `python -m sglang.launch_server` where no GPU or 31B checkpoint exists.

It behaves as SGLang 0.5.23's source describes, up to the process and HTTP
boundary: a parent that starts one scheduler process per TP rank plus a
detokenizer (so teardown must kill a tree), `/health_generate` answering 503
while starting and 200 once ready, native `/generate` with 0.5.23's
`meta_info` (spec keys only when a verify step happened), `/server_info` with
the server args and `internal_states[0].avg_spec_accept_length` (cumulative,
cleared by `/flush_cache`, absent before any verify step), and `/flush_cache`
answering 400 while requests run. Generation is simulated: each prompt gets a
seeded accept length around `FAKE_SGLANG_ACCEPT`.

Failure modes for lifecycle tests (env `FAKE_SGLANG_MODE`): `ok`, `hang` (never
ready), `crash_start` (exits during start-up with an error in the log),
`crash_mid` (dies after `FAKE_SGLANG_CRASH_AFTER` requests, leaving its
children), `no_meta` (a build whose /generate carries no spec figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("FAKE_SGLANG_MODE", "ok")
STARTUP_S = float(os.environ.get("FAKE_SGLANG_STARTUP_S", "0.3"))
GENERATE_DELAY_S = float(os.environ.get("FAKE_SGLANG_DELAY_S", "0.0"))
ACCEPT = float(os.environ.get("FAKE_SGLANG_ACCEPT", "5.6"))
CRASH_AFTER = int(os.environ.get("FAKE_SGLANG_CRASH_AFTER", "3"))
PIDFILE = os.environ.get("FAKE_SGLANG_PIDFILE")
READY_FILE = os.environ.get("FAKE_SGLANG_READY_FILE")  # when it became ready (benchmarks)
ANSWER = "Let me think step by step. {n} plus {n} is {m}. The answer is {m}."


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
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    args, _unknown = parser.parse_known_args(argv)  # other SGLang flags are accepted
    return args


class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.ready = False
        self.lock = threading.Lock()
        self.running = 0
        self.served = 0
        self.accepted = 0  # cumulative since start or flush, like SGLang's internal state
        self.steps = 0
        block = args.speculative_num_draft_tokens or args.speculative_dflash_block_size or 16
        if (args.speculative_num_draft_tokens and args.speculative_dflash_block_size
                and args.speculative_num_draft_tokens != args.speculative_dflash_block_size):
            sys.exit("ValueError: Both --speculative-num-draft-tokens and "
                     "--speculative-dflash-block-size are set but they differ.")
        self.block = block


def simulate(state: State, text: str, params: dict) -> dict:
    """Deterministic per prompt: the same prompt gives the same tokens and steps."""
    digest = int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)
    rng = random.Random(digest)
    n = digest % 50 + 1
    answer = ANSWER.format(n=n, m=2 * n)
    tokens = min(int(params.get("max_new_tokens", 128)), 24 + digest % 40)
    accept = min(max(1.0, rng.gauss(ACCEPT, 0.6)), state.block)
    steps = max(1, math.ceil((tokens - 1) / accept)) if tokens > 1 else 0
    histogram = [0] * state.block
    remaining = tokens - 1
    for _ in range(steps):
        taken = min(remaining, max(1, round(accept)))
        histogram[min(taken - 1, state.block - 1)] += 1
        remaining -= taken
    meta = {
        "id": params.get("rid") or f"req-{digest:x}",
        "finish_reason": {"type": "stop", "matched": "Question"},
        "prompt_tokens": len(text.split()),
        "weight_version": "default",
        "num_retractions": 0,
        "reasoning_tokens": 0,
        "completion_tokens": tokens,
        "cached_tokens": 0,
        "e2e_latency": GENERATE_DELAY_S,
    }
    if steps > 0 and MODE != "no_meta":
        correct = sum(i * c for i, c in enumerate(histogram))
        proposed = steps * (state.block - 1)
        meta |= {
            "spec_accept_rate": correct / proposed,
            "spec_accept_length": tokens / steps,
            "spec_num_correct_drafts": correct,
            "spec_num_proposed_drafts": proposed,
            "spec_verify_ct": steps,
            "spec_correct_drafts_histogram": histogram,
        }
    with state.lock:
        state.accepted += tokens - 1  # the server-wide figure counts decode tokens only
        state.steps += steps
    return {"text": answer, "output_ids": list(range(tokens)), "meta_info": meta}


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: object) -> None:
            sys.stderr.write("fake-sglang: " + fmt % args + "\n")

        def _send(self, code: int, body: object, content_type: str = "application/json") -> None:
            data = (json.dumps(body) if content_type == "application/json" else str(body))
            raw = data.encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            if self.path in ("/health", "/health_generate"):
                self._send(200 if state.ready else 503, "", "text/plain")
            elif self.path in ("/server_info", "/get_server_info"):
                internal = {"last_gen_throughput": 0.0}
                if state.steps > 0:
                    internal["avg_spec_accept_length"] = state.accepted / state.steps
                info = {
                    "model_path": state.args.model_path,
                    "speculative_algorithm": state.args.speculative_algorithm,
                    "speculative_num_draft_tokens": state.block,
                    "speculative_draft_model_path": state.args.speculative_draft_model_path,
                    "tp_size": state.args.tp_size,
                    "internal_states": [internal],
                    "version": "0.5.23",
                }
                self._send(200, info)
            elif self.path == "/flush_cache":
                self._flush()
            else:
                self._send(404, {"detail": "Not Found"})

        def _flush(self) -> None:
            with state.lock:
                if state.running:
                    self._send(400, "Flush cache failed.\n", "text/plain")
                    return
                state.accepted = state.steps = 0
            self._send(200, "Cache flushed.\n", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/flush_cache":
                self._flush()
                return
            if self.path != "/generate":
                self._send(404, {"detail": "Not Found"})
                return
            with state.lock:
                state.running += 1
                state.served += 1
                served = state.served
            try:
                if MODE == "crash_mid" and served > CRASH_AFTER:
                    sys.stderr.write("fake-sglang: scheduler died: simulated crash\n")
                    sys.stderr.flush()
                    os._exit(1)  # children stay behind, as after a real scheduler crash
                time.sleep(GENERATE_DELAY_S)
                params = dict(body.get("sampling_params") or {}, rid=body.get("rid"))
                self._send(200, simulate(state, str(body.get("text", "")), params))
            finally:
                with state.lock:
                    state.running -= 1

    return Handler


def start_children(tp_size: int) -> list[subprocess.Popen]:
    # One scheduler per TP rank plus a detokenizer, as SGLang starts them.
    sleeper = [sys.executable, "-c", "import time; time.sleep(3600)"]
    return [subprocess.Popen(sleeper) for _ in range(tp_size + 1)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    state = State(args)
    children = start_children(args.tp_size)
    if PIDFILE:
        with open(PIDFILE, "w") as handle:
            json.dump([os.getpid(), *[c.pid for c in children]], handle)
    print(f"fake-sglang: server_args model_path={args.model_path} tp={args.tp_size}", flush=True)
    if MODE == "crash_start":
        print("RuntimeError: CUDA error: out of memory (simulated)", file=sys.stderr, flush=True)
        return 1
    server = ThreadingHTTPServer((args.host, args.port), make_handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if MODE == "hang":
        while True:
            time.sleep(1)
    time.sleep(STARTUP_S)  # loading weights
    state.ready = True
    if READY_FILE:
        with open(READY_FILE, "w") as handle:
            handle.write(repr(time.time()))
    print("fake-sglang: The server is fired up and ready to roll!", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
