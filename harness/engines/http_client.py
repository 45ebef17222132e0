"""The one home of the harness's HTTP requests to an engine's server while it drives it
(harness.run.drive, harness.run.streaming, an adapter's own reads such as vLLM's
`read_server_info`): aiohttp under a small typed interface.

Why aiohttp: the client must not be the bottleneck (docs/speed.md, "The client"). Against
a fake server that streams as fast as it can write, httpx (httpcore 1.0's connection pool
scans every connection per request, encode/httpcore#1035) sustained about a fifth of the
tokens/s `vllm bench serve` and AIPerf do at concurrency 64 and 256; aiohttp, what both
peers use, sustains theirs; httpx over an aiohttp transport (`httpx-aiohttp`) sat between.

What it keeps of the httpx client it replaces:
- no proxy or other setting taken from the environment (`trust_env` off);
- the request timeout is the longest wait for the next bytes of an answer (its headers
  included), not a cap on the whole answer; connecting has its own, shorter one;
- up to `connections` connections kept open, one per request in flight;
- every failure to get an answer (connection refused, reset, the server gone mid-stream, a
  timeout) is a `TransportError` (`TransportTimeout` for a timeout), with the library's
  own words; an answer with an error status is a `Response`, never an exception.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp

from harness.errors import error_text

CONNECT_TIMEOUT_S = 10.0


class TransportError(Exception):
    """A request that got no answer, or lost it midway: refused, reset, the server gone."""


class TransportTimeout(TransportError):
    """No bytes of the answer (or no connection) within the timeout."""


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """aiohttp's failures (and the OS's under it) as a `TransportError`."""
    try:
        yield
    except TimeoutError as error:  # asyncio.TimeoutError and aiohttp's timeouts
        raise TransportTimeout(error_text(error)) from error
    except (aiohttp.ClientError, OSError) as error:
        raise TransportError(error_text(error)) from error


@dataclass(frozen=True)
class Response:
    """A whole answer: its status, content type and body."""

    status_code: int
    content_type: str
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> object:
        """The body as JSON (ValueError when it is not)."""
        return json.loads(self.content)


class StreamResponse:
    """An answer whose body is read as it arrives."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status_code = response.status
        self.content_type = response.headers.get("content-type", "")

    async def read(self) -> bytes:
        with _translated():
            return await self._response.read()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body in the pieces the network delivers (each read's bytes at once)."""
        content = self._response.content
        while True:
            with _translated():
                chunk = await content.readany()
            if not chunk:
                return
            yield chunk


class Client:
    """Requests to one server (`base_url`, e.g. http://127.0.0.1:30000); use as
    `async with Client(...) as client:` inside the event loop that sends them."""

    def __init__(self, base_url: str, connections: int, timeout_s: float,
                 headers: Mapping[str, str] | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.connections = connections
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
        connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0)
        self._session = aiohttp.ClientSession(
            connector=connector, headers=self.headers, trust_env=False,
            timeout=self._timeout(self.timeout_s))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _timeout(self, timeout_s: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout_s,
                                     sock_read=timeout_s)

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("the client is used outside its `async with`")
        return self._session

    async def request(self, method: str, path: str, body: Mapping[str, object] | None = None,
                      headers: Mapping[str, str] | None = None,
                      timeout_s: float | None = None) -> Response:
        """One whole answer to `method path` (with `body` sent as JSON when given)."""
        kwargs: dict[str, Any] = {"headers": headers}
        if body is not None:
            kwargs["json"] = body
        if timeout_s is not None:
            kwargs["timeout"] = self._timeout(timeout_s)
        with _translated():
            async with self.session.request(method, self.base_url + path, **kwargs) as answer:
                return Response(answer.status, answer.headers.get("content-type", ""),
                                await answer.read())

    async def get(self, path: str, timeout_s: float | None = None) -> Response:
        return await self.request("GET", path, timeout_s=timeout_s)

    async def post(self, path: str, body: Mapping[str, object] | None = None,
                   headers: Mapping[str, str] | None = None) -> Response:
        return await self.request("POST", path, body, headers)

    @contextlib.asynccontextmanager
    async def stream(self, path: str, body: Mapping[str, object]) -> AsyncIterator[StreamResponse]:
        """POST `body` as JSON to `path`, its answer read as it arrives."""
        with _translated():
            answer = await self.session.post(self.base_url + path, json=body)
        try:
            yield StreamResponse(answer)
        finally:
            answer.release()
