"""The metrics endpoint: a minimal HTTP/1.1 server answering GET /metrics on `prometheus.listener`.

How it works: one asyncio protocol per connection, on the broker's own event loop. It reads the
request's head (request line and headers), answers that one request and closes the
connection (`Connection: close`; a scraper opens a new one per scrape, every 15 s or so).
Bytes after the head (a body, pipelined requests) are not read. The answer is built by
`render` (prometheus.py); requests arriving while a rendering runs share it, so scrapers
asking at once cost one rendering.

Nothing a client sends costs more than its own connection:
- a head larger than `MAX_HEAD` bytes: 431, closed;
- no whole head within `HEAD_TIMEOUT_S` of connecting (a slowloris): closed;
- a malformed request line: 400; a method other than GET or HEAD: 405; any path but
  /metrics: 404; each closed after its answer;
- more than `MAX_CONNECTIONS` at once: the newcomer is closed at once;
- a client that does not read its answer: cut `SEND_TIMEOUT_S` after it was written;
- a rendering that fails (a bug): 500 and one log line; the broker carries on.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Awaitable, Callable
from typing import cast

from samsa.ratelimit import RateLimitedLog

log = logging.getLogger("samsa.metrics")

MAX_HEAD = 8192
HEAD_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 32
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}


class MetricsServer:
    """The endpoint on (host, port); `render` makes the body of a GET /metrics."""

    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int,
                 render: Callable[[], Awaitable[bytes]]) -> None:
        self.loop = loop
        self.host = host
        self.port = port
        self.render = render
        self.connections: set[_HttpConnection] = set()
        self.scrapes = 0
        self._server: asyncio.AbstractServer | None = None
        self._rendering: asyncio.Future[bytes] | None = None
        self._warn = RateLimitedLog(log, interval_s=60.0)

    async def start(self) -> None:
        """Listen (an OSError when the address cannot be bound; the caller names it)."""
        self._server = await self.loop.create_server(lambda: _HttpConnection(self), self.host or None, self.port,
                                                     reuse_address=True, backlog=64)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.abort()

    async def body(self) -> bytes:
        """The metrics text: this scrape's own rendering, or the one already running."""
        if self._rendering is None:
            self._rendering = asyncio.ensure_future(self._render())
        return await asyncio.shield(self._rendering)

    async def _render(self) -> bytes:
        try:
            self.scrapes += 1
            return await self.render()
        finally:
            self._rendering = None

    def failed(self, error: BaseException) -> None:
        self._warn.error("render", "Rendering the metrics failed:\n%s",
                         "".join(traceback.format_exception(error)).rstrip())


class _HttpConnection(asyncio.Protocol):
    def __init__(self, server: MetricsServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.done = False  # the request is read: nothing more is
        self.timer: asyncio.TimerHandle | None = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)
        server = self.server
        if len(server.connections) >= MAX_CONNECTIONS:
            self.done = True
            self.transport.abort()
            return
        server.connections.add(self)
        self.timer = server.loop.call_later(HEAD_TIMEOUT_S, self.abort)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.task is not None:
            self.task.cancel()
        self.transport = None

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.done:
            return
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            end = self.head.find(b"\n\n")
        if end < 0:
            if len(self.head) > MAX_HEAD:
                self.respond(431, b"request head too large\n")
            return
        if end > MAX_HEAD:
            self.respond(431, b"request head too large\n")
            return
        self.done = True
        assert self.transport is not None
        self.transport.pause_reading()
        line = bytes(self.head[:end]).split(b"\n", 1)[0].rstrip(b"\r")
        parts = line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1.") or not parts[1].startswith(b"/"):
            self.respond(400, b"bad request line\n")
            return
        method, target = parts[0], parts[1]
        if method not in (b"GET", b"HEAD"):
            self.respond(405, b"only GET and HEAD\n", b"Allow: GET, HEAD\r\n")
            return
        if target.split(b"?", 1)[0] != b"/metrics":
            self.respond(404, b"the metrics are at /metrics\n")
            return
        self.task = self.server.loop.create_task(self.scrape(method == b"HEAD"))

    def eof_received(self) -> bool | None:
        # The client has sent all it will: with a whole request read, its answer still goes out
        # (True keeps the transport open for it); half-closed before a whole head, close.
        return True if self.done else None

    async def scrape(self, head_only: bool) -> None:
        try:
            body = await self.server.body()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.server.failed(e)
            self.respond(500, b"rendering the metrics failed (see the broker's log)\n")
            return
        self.respond(200, body, content_type=CONTENT_TYPE, head_only=head_only)

    def respond(self, status: int, body: bytes, extra: bytes = b"", content_type: str = "text/plain; charset=utf-8",
                head_only: bool = False) -> None:
        self.done = True
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode() + extra + b"\r\n"
        transport.write(head if head_only else head + body)
        transport.close()  # once written
        if self.timer is not None:
            self.timer.cancel()
        self.timer = self.server.loop.call_later(SEND_TIMEOUT_S, self.abort)
