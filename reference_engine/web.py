"""HTTP plumbing: routing, SGLang's API-key rule, JSON and server-sent-event replies.

Why a stdlib `ThreadingHTTPServer`: the engine's environment should hold only what
generation needs (torch, transformers, dflash), and a handful of JSON endpoints do not
justify a web framework. Handler threads parse, tokenize and wait; decoding happens in the
worker processes (`engine.py`).

Error bodies have SGLang 0.5.23's shapes: native routes `{"error": {"message": ...}}`
(`http_server._create_error_response`), OpenAI routes an `ErrorResponse`
(`serving_base.create_error_response`), unknown routes FastAPI's `{"detail": "Not Found"}`,
a missing or wrong key `{"error": "Unauthorized"}` (`utils/auth.py`). A message is never
empty.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from reference_engine.engine import Engine
from reference_engine.params import BadRequest
from reference_engine.worker import error_text

log = logging.getLogger("reference_engine")

# The harness drives up to 128 concurrent requests (SGLang's GSM8K gate); the listen queue
# must hold them all, or the kernel drops connections (socketserver's default is 5).
LISTEN_BACKLOG = 2048
NATIVE, OPENAI = "native", "openai"
# SGLang's auth levels (sglang/srt/utils/auth.py): probes are always open; ADMIN_OPTIONAL
# routes take the admin key when one is set, else the API key.
OPEN_PREFIXES = ("/health", "/ready", "/metrics")


@dataclass(frozen=True)
class Route:
    handler: Callable[[Handler], None]
    errors: str = NATIVE  # which error body shape the route answers with
    admin_optional: bool = False


class Handler(BaseHTTPRequestHandler):
    """One instance per connection; `engine`, `routes` and keys are set by `make_server`."""

    engine: Engine
    routes: dict[tuple[str, str], Route]
    prefix_routes: dict[tuple[str, str], Route]
    api_key: str | None = None
    admin_api_key: str | None = None
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY on each connection (socketserver's switch), as uvicorn, SGLang's server,
    # sets it: a streamed event is a small write, and with Nagle's algorithm on it waits
    # for the ACK of the previous one, which the client's kernel delays by up to 40 ms on a
    # reused keep-alive connection, so a request's per-step events left in bursts.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    @property
    def path_only(self) -> str:
        return urlsplit(self.path).path

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)

    def _find(self, method: str, path: str) -> Route | None:
        route = self.routes.get((method, path))
        if route is None:
            for (verb, prefix), candidate in self.prefix_routes.items():
                if verb == method and path.startswith(prefix) and len(path) > len(prefix):
                    return candidate
        return route

    def _route(self, method: str) -> None:
        path = self.path_only
        route = self._find(method, path)
        status = self._auth_status(path, route)
        if status is not None:
            self._reply_json(status, {"error": "Unauthorized" if status == 401 else "Forbidden"})
            return
        if route is None:
            known = any(p == path for (_, p) in self.routes)
            status = HTTPStatus.METHOD_NOT_ALLOWED if known else HTTPStatus.NOT_FOUND
            self._reply_json(status, {"detail": status.phrase})
            return
        try:
            route.handler(self)
        except BadRequest as error:
            self.error(route, error.status, str(error))
        except BrokenPipeError:
            log.debug("client went away: %s %s", method, path)
        except Exception as error:
            log.exception("request %s %s failed", method, path)
            self.error(route, 500, error_text(error))

    def _auth_status(self, path: str, route: Route | None) -> int | None:
        """`decide_request_auth` of SGLang 0.5.23: None = allowed, else 401 (or 403)."""
        if path.startswith(OPEN_PREFIXES):
            return None
        if route is not None and route.admin_optional and self.admin_api_key:
            expected = self.admin_api_key
        elif self.api_key:
            expected = self.api_key
        else:
            return None
        header = self.headers.get("Authorization") or ""
        scheme, _, token = header.partition(" ")
        ok = scheme.lower() == "bearer" and secrets.compare_digest(token, expected)
        return None if ok else 401

    # -- reading -----------------------------------------------------------------------
    def body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as error:
            raise BadRequest(f"request body is not JSON: {error}") from error
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def drain(self) -> None:
        """Read and drop a body we do not use, so the keep-alive connection stays usable."""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    # -- replying ----------------------------------------------------------------------
    def error(self, route: Route, status: int, message: str) -> None:
        message = message or HTTPStatus(status).phrase
        if route.errors == OPENAI:
            payload: Any = {"object": "error", "message": message,
                            "type": "BadRequestError" if status == 400 else
                            HTTPStatus(status).phrase.replace(" ", ""),
                            "param": None, "code": status}
        else:
            payload = {"error": {"message": message}}
        # The body may be unread (early failure): close rather than let its bytes be read
        # as the next request on this keep-alive connection.
        self.close_connection = True
        self._reply_json(status, payload)

    def reply_json(self, payload: Any, status: int = 200) -> None:
        self._reply_json(status, payload)

    def reply_text(self, text: str, status: int = 200) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    def _reply_json(self, status: int, payload: Any) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def sse_start(self) -> None:
        """Begin a `text/event-stream` reply, chunked so the connection stays reusable."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def sse_data(self, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def sse_end(self) -> None:
        self.sse_data("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True


def make_server(engine: Engine, host: str, port: int, routes: dict[tuple[str, str], Route],
                *, api_key: str | None = None, admin_api_key: str | None = None) -> Server:
    """Bind exactly `host:port` (never all interfaces) with a deep listen queue.

    A route path ending in `/` followed by `*` matches any longer path (`/v1/models/{id}`).
    """
    exact = {key: route for key, route in routes.items() if not key[1].endswith("/*")}
    prefixed = {(verb, path[:-1]): route for (verb, path), route in routes.items()
                if path.endswith("/*")}
    handler = type("BoundHandler", (Handler,), {
        "engine": engine, "routes": exact, "prefix_routes": prefixed,
        "api_key": api_key, "admin_api_key": admin_api_key})
    return Server((host, port), handler)
