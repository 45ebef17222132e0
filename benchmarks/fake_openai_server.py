"""A fast fake OpenAI-compatible streaming server, for measuring clients, not engines.

`python benchmarks/fake_openai_server.py --port P [--step-ms D] [--model NAME]` binds
127.0.0.1:P and answers, on plain asyncio (HTTP/1.1, keep-alive, chunked):
- `POST /v1/completions` and `/v1/chat/completions`: with `"stream": true`, `max_tokens`
  (or `max_completion_tokens`) server-sent events of one token each (`choices[0].text`, or
  `delta.content` for chat, always the text TOKEN_TEXT, one token in the project's tiny
  tokenizer; `token_ids` when `return_token_ids`), the last with `finish_reason:
  "length"`, then a usage chunk when `stream_options.include_usage` (with vLLM's
  `metrics.speculative_decoding` counts, so the harness's vLLM adapter accepts it:
  one verify step per token, no draft accepted), then `data: [DONE]`; unstreamed, the same
  answer as one JSON body (clients' readiness probes send one);
- `GET /health`, `/v1/models`, `/version`, `/metrics` (empty): what the clients probe;
- `GET /stats`: the chunks of output sent since `POST /stats/reset`, the first and last
  send times (`time.monotonic()`), the server's own count of the tokens it streamed, and
  its actual pace (`pace_s`: the mean interval between two consecutive steps that wrote,
  which is `--step-ms` plus the step's own cost and the event loop's lateness).

Tokens are made like an engine's decode steps: one step writes the next token to every
stream in flight, then waits `--step-ms` (0: only yields to the event loop, so the server
is as fast as this loop can write). A stream whose socket buffer is full (a client behind)
is skipped for that step, so the server never runs ahead of a slow client by more than
the buffer. The known pace per token is therefore `--step-ms` while the server keeps up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

TOKEN_TEXT = " the"  # one token (id 317) in reference_engine/tiny/target's tokenizer
TOKEN_ID = 317
BEHIND_BYTES = 256 * 1024  # a stream with more than this unsent waits for its client
SSE_HEADERS = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n"
               b"Connection: keep-alive\r\n\r\n")


def http_chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(payload: dict[str, Any]) -> bytes:
    return http_chunk(b"data: " + json.dumps(payload, separators=(",", ":")).encode()
                      + b"\n\n")


def reply(status: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n").encode() + body


@dataclass
class Stats:
    chunks: int = 0
    requests: int = 0
    first: float | None = None
    last: float | None = None
    gaps: int = 0  # intervals between two consecutive steps that both wrote
    gaps_s: float = 0.0  # their sum: the server's actual pace per token is gaps_s / gaps

    def as_dict(self) -> dict[str, Any]:
        pace = self.gaps_s / self.gaps if self.gaps else None
        return {"chunks": self.chunks, "requests": self.requests, "first": self.first,
                "last": self.last, "pace_s": pace}


@dataclass
class Stream:
    writer: asyncio.StreamWriter
    remaining: int
    token: bytes  # the chunk of one token, ready to write
    last: bytes  # the last token's chunk (finish_reason set)
    tail: bytes  # usage chunk (if asked), [DONE], the end of the chunked body
    done: asyncio.Future[None] = field(default_factory=lambda:
                                       asyncio.get_running_loop().create_future())


class FakeServer:
    def __init__(self, model: str, step_s: float) -> None:
        self.model, self.step_s = model, step_s
        self.active: list[Stream] = []
        self.wake = asyncio.Event()
        self.stats = Stats()

    async def stepper(self) -> None:
        """The decode loop: one token to every stream in flight per step."""
        previous = None  # when the last step that wrote ran
        while True:
            if not self.active:
                self.wake.clear()
                await self.wake.wait()
                previous = None  # an idle wait is no interval between tokens
            wrote = 0
            now = time.monotonic()
            for stream in list(self.active):
                transport = stream.writer.transport
                if transport.is_closing():
                    self.active.remove(stream)
                    stream.done.set_result(None)
                    continue
                if transport.get_write_buffer_size() > BEHIND_BYTES:
                    continue
                stream.remaining -= 1
                if stream.remaining > 0:
                    stream.writer.write(stream.token)
                else:
                    stream.writer.write(stream.last + stream.tail)
                    self.active.remove(stream)
                    stream.done.set_result(None)
                wrote += 1
            if wrote:
                stats = self.stats
                if previous is not None and stats.first is not None:
                    stats.gaps += 1
                    stats.gaps_s += now - previous
                stats.chunks += wrote
                stats.first = stats.first or now
                stats.last = now
            previous = now if wrote else None
            await asyncio.sleep(self.step_s if wrote or not self.active else 0.001)

    def answers(self, body: dict[str, Any], chat: bool, n: int, rid: str
                ) -> tuple[bytes, bytes, dict[str, Any]]:
        """(one token's choice JSON, the last one's, the usage payload)."""
        ids = {"token_ids": [TOKEN_ID]} if body.get("return_token_ids") else {}
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": kind, "created": int(time.time()), "model": self.model}

        def choice(reason: str | None) -> dict[str, Any]:
            text = {"delta": {"content": TOKEN_TEXT}} if chat else {"text": TOKEN_TEXT}
            return {**head, "choices": [{"index": 0, **text, "logprobs": None, **ids,
                                         "finish_reason": reason, "stop_reason": None}]}

        prompt = body.get("prompt") if not chat else json.dumps(body.get("messages"))
        prompt_tokens = max(1, len(str(prompt or "").split()))
        usage = {**head, "choices": [],
                 "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": n,
                           "total_tokens": prompt_tokens + n},
                 "metrics": {"speculative_decoding": {
                     "num_spec_steps": n, "num_accepted_draft_tokens": 0,
                     "acceptance_histogram": [n]}}}
        return event(choice(None)), event(choice("length")), usage

    async def complete(self, writer: asyncio.StreamWriter, body: dict[str, Any],
                       chat: bool) -> None:
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        self.stats.requests += 1
        rid = f"cmpl-{self.stats.requests}"
        token, last, usage = self.answers(body, chat, n, rid)
        if not body.get("stream"):
            text = TOKEN_TEXT * n
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
            choice |= {"message": {"role": "assistant", "content": text}} if chat else \
                {"text": text}
            payload = {**usage, "object": "chat.completion" if chat else "text_completion",
                       "choices": [choice]}
            self.stats.chunks += n
            writer.write(reply("200 OK", json.dumps(payload).encode()))
            return
        options = body.get("stream_options") or {}
        tail = event(usage) if options.get("include_usage") else b""
        tail += http_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        writer.write(SSE_HEADERS)
        stream = Stream(writer, max(n, 1), token, last, tail)
        self.active.append(stream)
        self.wake.set()
        await stream.done

    async def route(self, method: str, path: str, body: bytes,
                    writer: asyncio.StreamWriter) -> None:
        path = path.split("?")[0]
        if method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                writer.write(reply("400 Bad Request", b'{"error":"bad JSON"}'))
                return
            await self.complete(writer, request, chat=path.endswith("chat/completions"))
        elif path == "/health":
            writer.write(reply("200 OK", b""))
        elif path == "/v1/models":
            data = {"object": "list", "data": [{"id": self.model, "object": "model",
                                                "root": self.model, "owned_by": "fake",
                                                "max_model_len": 1 << 20}]}
            writer.write(reply("200 OK", json.dumps(data).encode()))
        elif path == "/version":
            writer.write(reply("200 OK", b'{"version":"fake"}'))
        elif path == "/metrics":
            writer.write(reply("200 OK", b"", "text/plain"))
        elif path == "/stats":
            writer.write(reply("200 OK", json.dumps(self.stats.as_dict()).encode()))
        elif path == "/stats/reset" and method == "POST":
            self.stats = Stats()
            writer.write(reply("200 OK", b"{}"))
        else:
            writer.write(reply("404 Not Found", b'{"error":"not found"}'))

    async def connection(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                await self.route(method, path, body, writer)
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


async def serve(port: int, model: str, step_s: float) -> None:
    server = FakeServer(model, step_s)
    stepper = asyncio.create_task(server.stepper())
    listener = await asyncio.start_server(server.connection, "127.0.0.1", port, backlog=1024)
    async with listener:
        try:
            await listener.serve_forever()
        finally:
            stepper.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="fake")
    parser.add_argument("--step-ms", type=float, default=0.0,
                        help="wait between decode steps (one token to every stream)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.port, args.model, args.step_ms / 1000))


if __name__ == "__main__":
    main()
