"""A real HTTP server in the test's own event loop (aiohttp.web on 127.0.0.1, a free
port): the harness's client (harness.run.http_client) talks to it over a socket."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """The server's base URL while `handler` answers every route."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def stream(request: web.Request, pieces: list[bytes], content_type: str,
                 status: int = 200) -> web.StreamResponse:
    """An answer written piece by piece, each flushed to the socket."""
    response = web.StreamResponse(status=status, headers={"content-type": content_type})
    await response.prepare(request)
    for piece in pieces:
        await response.write(piece)
    await response.write_eof()
    return response
