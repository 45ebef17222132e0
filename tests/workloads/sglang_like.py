"""A test server with SGLang 0.5.23's chat and generate response shapes.

Only what the chat protocol needs, as SGLang's source defines it: `/v1/chat/completions`
renders the messages with a chat template (here a fixed toy one, taking
`chat_template_kwargs`), and with `return_meta_info` puts the request's `meta_info` in
the choice (`serving_chat.py`, `_build_chat_response`), with `return_prompt_token_ids`
the rendered prompt's ids (`choices[i].prompt_token_ids`); `/generate` returns
`{"text", "meta_info"}`. Each answer is a fixed function of the rendered prompt, and its
speculative figures a fixed function of the answer, so a test can predict every row.
Every request body is kept for the test to inspect.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def render(messages: list[dict[str, str]], kwargs: dict[str, Any]) -> str:
    text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
    return text + ("<assistant><think></think>" if kwargs.get("enable_thinking") is False
                   else "<assistant>")


def ids_of(text: str) -> list[int]:
    return [ord(c) for c in text]


def answer_for(prompt: str) -> str:
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return f"  answer {digest[:8]} has {len(prompt)} characters 42 \n"


def meta_for(answer: str, rid: str) -> dict[str, Any]:
    tokens = len(answer.split()) + 3
    steps = max(1, tokens // 3)
    drafts = tokens - 1 - steps
    histogram = [0] * 4
    remaining = drafts
    for _ in range(steps):  # spread the correct drafts over the steps
        take = min(3, remaining)
        histogram[take] += 1
        remaining -= take
    return {"id": rid, "finish_reason": {"type": "stop", "matched": None},
            "prompt_tokens": 11, "completion_tokens": tokens, "spec_verify_ct": steps,
            "spec_num_correct_drafts": drafts, "spec_accept_length": tokens / steps,
            "spec_correct_drafts_histogram": histogram}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, payload: Any, status: int = 200) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append((self.path, body))
        if self.path == "/generate":
            answer = answer_for(body["text"])
            self._reply({"text": answer, "meta_info": meta_for(answer, body["rid"])})
        elif self.path == "/v1/chat/completions":
            prompt = render(body["messages"], body.get("chat_template_kwargs") or {})
            answer = answer_for(prompt)
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant",
                                                               "content": answer},
                                      "finish_reason": "stop"}
            if body.get("return_meta_info"):
                choice["meta_info"] = meta_for(answer, body["rid"])
            if body.get("return_prompt_token_ids"):
                choice["prompt_token_ids"] = ids_of(prompt)
            self._reply({"id": body["rid"], "object": "chat.completion", "choices": [choice],
                         "usage": {"completion_tokens": 0}})
        else:
            self._reply({"error": "no route"}, 404)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, Any]]] = []


def start() -> _Server:
    server = _Server()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
