"""The dashboard's HTTP side: stdlib `http.server`, one thread per connection.

Routes:
  /              the page (static/index.html)
  /static/NAME   the page's own scripts and styles, from the package's `static/` directory
  /api/state     the snapshot as JSON
  /events        server-sent events: `event: snapshot` with the snapshot on connect, then again
                 whenever it changes (at most one per `min_interval_s`), and a `: keep-alive`
                 comment after `keepalive_s` of silence
  /events?view=console
                 the same for the broker console: `event: console` with its view (console.py);
                 the console's poller asks the cluster only while such a stream is open
  /api/console   the console's view as JSON (and keeps the poller polling for a minute)
  /api/console/configs?topic=T
                 every config of topic T as of the last poll (the view carries the non-default ones)
  /healthz       200 with {"status": "ok", "broker": ..., "job": ...} while the server runs

Handler threads are joined on shutdown (`block_on_close`); event streams end within half a
second of `stopping` being set. Responses are HTTP/1.0 (one request per connection), so no
idle keep-alive connection holds a thread open.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from samsa.pipeline.dashboard.live import LiveState, Published

log = logging.getLogger(__name__)

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def load_assets() -> dict[str, tuple[str, bytes]]:
    """name -> (content type, bytes) of every file in the package's static/ directory."""
    assets: dict[str, tuple[str, bytes]] = {}
    for entry in (resources.files("samsa.pipeline.dashboard") / "static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in CONTENT_TYPES:
            assets[entry.name] = (CONTENT_TYPES[suffix], entry.read_bytes())
    return assets


class _Source(Protocol):
    def payload(self) -> tuple[int, bytes]: ...

    def wait_newer(self, version: int, timeout: float) -> bool: ...


class Console(Protocol):
    """What the server needs of the broker console (app.py wires the poller in)."""

    published: Published
    wanted_s: float
    first_poll_s: float

    def all_configs(self, topic: str) -> list[dict[str, Any]] | None: ...


class DashboardServer(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close()
    block_on_close = True

    def __init__(
        self,
        address: tuple[str, int],
        live: LiveState,
        *,
        min_interval_s: float = 1.0,
        keepalive_s: float = 15.0,
        console: Console | None = None,
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.live = live
        self.console = console
        self.assets = load_assets()
        self.min_interval_s = min_interval_s
        self.keepalive_s = keepalive_s
        self.stopping = threading.Event()
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "samsa-dashboard"
    protocol_version = "HTTP/1.0"
    timeout = 10.0  # a client that opens a connection and sends nothing cannot pin a thread

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        console = self.server.console
        if path in ("/", "/index.html"):
            self._asset("index.html")
        elif path.startswith("/static/"):
            self._asset(path.removeprefix("/static/"))
        elif path == "/api/state":
            self._send(200, "application/json", self.server.live.payload()[1])
        elif path == "/events" and query.get("view", ["pipeline"]) == ["console"]:
            if console is None:
                self._send(404, "text/plain; charset=utf-8", b"the broker console is off\n")
            else:
                with console.published.watch():
                    self._events(console.published, b"console")
        elif path == "/events":
            self._events(self.server.live, b"snapshot")
        elif path == "/api/console" and console is not None:
            console.published.wanted_for(console.wanted_s)
            if console.published.payload()[0] == 0:  # not polled yet: give the first poll a moment
                console.published.wait_newer(0, console.first_poll_s)
            self._send(200, "application/json", console.published.payload()[1])
        elif path == "/api/console/configs" and console is not None:
            topic = query.get("topic", [""])[0]
            configs = console.all_configs(topic)
            if configs is None:
                body = {"error": f"no configs known for topic {topic!r} (yet)"}
                self._send(404, "application/json", json.dumps(body).encode())
            else:
                self._send(200, "application/json", json.dumps({"topic": topic, "configs": configs}).encode())
        elif path == "/healthz":
            snap = self.server.live.snapshot()
            body = {"status": "ok", "broker": snap["broker"]["state"], "job": snap["job"]["state"]}
            self._send(200, "application/json", json.dumps(body).encode())
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _asset(self, name: str) -> None:
        asset = self.server.assets.get(name)
        if asset is None:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")
        else:
            self._send(200, asset[0], asset[1])

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _events(self, source: _Source, event: bytes) -> None:
        srv = self.server
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        try:
            self.wfile.write(b"retry: 2000\n\n")
            sent, last_sent, last_write = -1, float("-inf"), time.monotonic()
            while not srv.stopping.is_set():
                version, body = source.payload()
                now = time.monotonic()
                if version != sent and now >= last_sent + srv.min_interval_s:
                    self.wfile.write(b"event: %s\nid: %d\ndata: %s\n\n" % (event, version, body))
                    sent, last_sent, last_write = version, now, now
                    continue
                if now - last_write >= srv.keepalive_s:
                    self.wfile.write(b": keep-alive\n\n")
                    last_write = now
                wake = last_write + srv.keepalive_s
                if version != sent:  # a change is held back by the rate limit
                    srv.stopping.wait(min(0.5, max(0.0, min(wake, last_sent + srv.min_interval_s) - now)))
                else:
                    source.wait_newer(sent, min(0.5, max(0.01, wake - now)))
        except OSError:  # the browser went away (broken pipe, reset, write timeout)
            return
