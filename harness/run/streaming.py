"""One streamed request: its server-sent events read as they arrive, timed on a monotonic
clock, assembled into the answer the route gives unstreamed (the adapter's
`StreamAssembler`), so the counts are parsed as before and each chunk's arrival is kept
(`RequestTiming`; what each figure made of it means is `harness.metrics.latency`'s).

Bad input, each named in the request's timing and never losing the answer's counts:
- a server that answers the streamed request with one JSON body (it does not stream): the
  body is parsed as the unstreamed answer; no TTFT or gaps (`timing.note` says why);
- a clock that steps backwards (the clock is `time.perf_counter`, monotonic by Python's
  guarantee; a substituted or broken one is caught): the request's timings are refused,
  its counts kept;
- a request whose stream carries no output token: no TTFT, counts kept;
- an error event in the stream, or an event that is not JSON: the request fails
  (`EngineError` naming the route and request), as a failed unstreamed request does.

Events are parsed per network read: every event completed by one read gets that read's
arrival time (`SSEParser`), which is what a reader of the socket can know.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from harness.engines.http_client import Client
from harness.engines.interface import StreamAssembler
from harness.errors import EngineError
from harness.results.record import RequestTiming

Clock = Callable[[], float]
DONE = "[DONE]"
EVENT_STREAM = "text/event-stream"
ROUND = 6  # digits kept of a time in seconds (microseconds)


class SSEParser:
    """Server-sent events from byte chunks: the `data:` payload of each complete event
    (several `data:` lines joined by newlines; comments and other fields skipped)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.data: list[bytes] = []

    def feed(self, chunk: bytes) -> Iterator[str]:
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self.data:
                    yield b"\n".join(self.data).decode("utf-8", "replace")
                    self.data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                self.data.append(value[1:] if value.startswith(b" ") else value)

    def close(self) -> Iterator[str]:
        """An event the stream ended without its blank line."""
        if self.buffer.startswith(b"data:"):
            value = self.buffer[5:]
            self.data.append(value[1:] if value.startswith(b" ") else value)
        self.buffer = b""
        if self.data:
            yield b"\n".join(self.data).decode("utf-8", "replace")
            self.data = []


@dataclass
class Timer:
    """The arrival of each chunk carrying output, seconds after sending; a step back of
    the clock refuses the request's timings (`note`) without touching its answer."""

    clock: Clock
    started: float = 0.0
    last: float = 0.0
    chunk_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int | None] = field(default_factory=list)
    stepped_back: float | None = None

    def start(self) -> None:
        self.started = self.last = self.clock()

    def now(self) -> float:
        now = self.clock()
        if now < self.last and self.stepped_back is None:
            self.stepped_back = self.last - now
        self.last = max(self.last, now)
        return now

    def chunk(self, at: float, tokens: int | None) -> None:
        self.chunk_s.append(round(at - self.started, ROUND))
        self.chunk_tokens.append(tokens)

    def timing(self, streamed: bool, note: str | None = None) -> RequestTiming:
        if self.stepped_back is not None:
            return RequestTiming(streamed=streamed, note=(
                f"the clock stepped back {self.stepped_back:.6g} s while the answer "
                "arrived: its timings are refused (its counts are kept)"))
        if not streamed:
            return RequestTiming(streamed=False, note=note)
        if not self.chunk_s:
            return RequestTiming(streamed=True, note="the stream carried no output token: "
                                                     "no TTFT (its counts are kept)")
        counts = None if None in self.chunk_tokens else [int(t or 0) for t in
                                                         self.chunk_tokens]
        return RequestTiming(streamed=True, ttft_s=self.chunk_s[0], chunk_s=self.chunk_s,
                             chunk_tokens=counts, note=note)


@dataclass
class Received:
    payload: object  # the answer in the route's unstreamed shape
    latency_s: float  # sending to the end of the answer
    timing: RequestTiming


def not_a_stream(path: str, content_type: str) -> str:
    return (f"{path} answered {content_type or 'with no content type'}, not a stream of "
            "events (text/event-stream): the server does not stream, so TTFT and the gaps "
            "between tokens are not measured (its counts are the response's own)")


async def receive(client: Client, path: str, body: Mapping[str, object],
                  assembler: StreamAssembler, where: str, clock: Clock) -> Received:
    """Send `body` to `path` as a stream and read its events as they arrive. A failure to
    get the answer (`http_client.TransportError`) propagates (the driver names it, with
    the server's death if that is the cause)."""
    timer = Timer(clock)
    parser = SSEParser()
    timer.start()
    async with client.stream(path, body) as response:
        if response.status_code != 200:
            text = (await response.read()).decode("utf-8", "replace")
            raise EngineError(f"{path} answered {response.status_code} for {where}: "
                              f"{text[:500] or '(empty body)'}")
        content_type = response.content_type
        if EVENT_STREAM not in content_type.lower():
            raw = await response.read()
            ended = timer.now()
            try:
                payload = json.loads(raw)
            except ValueError:
                raise EngineError(f"{path} answered {where} with neither a stream of events "
                                  f"nor JSON: {raw[:200]!r}") from None
            return Received(payload, ended - timer.started,
                            timer.timing(False, not_a_stream(path, content_type)))
        done = False
        async for chunk in response.chunks():
            at = timer.now()
            for data in parser.feed(chunk):
                done = done or _take(data, assembler, timer, at, path, where)
        for data in parser.close():
            done = done or _take(data, assembler, timer, timer.now(), path, where)
    ended = timer.now()
    return Received(assembler.payload(), ended - timer.started, timer.timing(True))


def _take(data: str, assembler: StreamAssembler, timer: Timer, at: float, path: str,
          where: str) -> bool:
    """One event's payload: True for the stream's end marker."""
    if data.strip() == DONE:
        return True
    try:
        event = json.loads(data)
    except ValueError:
        raise EngineError(f"{path} streamed an event that is not JSON for {where}: "
                          f"{data[:200]!r}") from None
    try:
        piece = assembler.feed(event)
    except EngineError as error:
        raise EngineError(f"{path} ({where}): {error.message}") from None
    if piece.output:
        timer.chunk(at, piece.tokens)
    return False


def cut_timing(timing: RequestTiming, tokens: int) -> RequestTiming:
    """`timing` of an answer cut to its first `tokens` output tokens (a stop string the
    harness applied, harness.engines.vllm.stops): the chunks up to the one carrying the
    last kept token, as if the engine had stopped there. Unchanged when the chunks do not
    say their tokens."""
    counts = timing.chunk_tokens
    if counts is None or sum(counts) <= tokens:
        return timing
    if tokens <= 0:
        return timing.model_copy(update={"chunk_s": [], "chunk_tokens": [], "ttft_s": None})
    kept, total = 0, 0
    for kept, count in enumerate(counts, start=1):  # noqa: B007
        total += count
        if total >= tokens:
            break
    return timing.model_copy(update={"chunk_s": timing.chunk_s[:kept],
                                     "chunk_tokens": counts[:kept]})
