"""`samsa ingest http` as a real process, polling a real local HTTP server, into a real broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.cli.helpers import ok, one_line_error
from tests.pipeline.ingest_helpers import Reader, create_topic

TOKEN = "test-token-42"


def forecast(seq: int, lat: float, lon: float) -> bytes:
    """A Plume-like forecast body: location, hourly pollutant concentrations and indexes."""
    base = 1_795_000_000 + seq * 3600
    hours = [
        {"date": base + h * 3600, "pollutants": {
            "pm25": {"concentration": 11.5 + h, "aqi": 48 + h},
            "pm10": {"concentration": 19.0 + h, "aqi": 18 + h},
            "no2": {"concentration": 31.2, "aqi": 28},
            "o3": {"concentration": 44.0 + h, "aqi": 41},
        }}
        for h in range(3)
    ]
    return json.dumps({"seq": seq, "latitude": lat, "longitude": lon, "forecast": hours}).encode()


class Api:
    """What the fake API answers, request by request: "ok", "500" or "hang" (no answer until the
    test ends). After the script: "ok"."""

    def __init__(self) -> None:
        self.script: list[str] = []
        self.requests: list[tuple[float, str, dict[str, list[str]]]] = []  # (time, behaviour, query)
        self.served = 0  # "ok" bodies sent
        self.release = threading.Event()
        self.lock = threading.Lock()

    def next(self, query: dict[str, list[str]]) -> tuple[str, int]:
        with self.lock:
            i = len(self.requests)
            what = self.script[i] if i < len(self.script) else "ok"
            self.requests.append((time.monotonic(), what, query))
            seq = self.served
            if what == "ok":
                self.served += 1
            return what, seq


@pytest.fixture
def api() -> Iterator[tuple[Api, str]]:
    state = Api()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            what, seq = state.next(query)
            if what == "hang":
                state.release.wait(10)
                return
            if what == "500":
                body, status = b'{"error": "internal"}', 500
            else:
                body, status = forecast(seq, float(query["lat"][0]), float(query["lon"][0])), 200
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that timed out and left: expected here

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/1.0/pollution/forecast?token={{token}}&lat={{lat}}&lon={{lon}}"
    try:
        yield state, url
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


def ingest_http(*args: str, env_token: str | None = TOKEN, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PLUMETOKEN"}
    if env_token is not None:
        env["PLUMETOKEN"] = env_token
    return subprocess.run([sys.executable, "-m", "samsa", "ingest", "http", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def test_polls_arrive_in_order_keyed_by_location(broker: Any, topic_name: str, api: tuple[Api, str]) -> None:
    state, url = api
    create_topic(broker.bootstrap, topic_name)
    proc = ingest_http("--bootstrap-server", broker.bootstrap, "--topic", topic_name, "--url", url,
                       "--lat", "48.8566", "--lon", "2.3522", "--interval-ms", "50", "--count", "5")
    assert "http: 5 responses published" in ok(proc)
    for i in range(5):
        assert f"response {i + 1} delivered to {topic_name} [0] @ {i}" in proc.stderr
    assert TOKEN not in proc.stderr
    assert all(q == {"token": [TOKEN], "lat": ["48.8566"], "lon": ["2.3522"]} for _, _, q in state.requests)
    with Reader(broker.bootstrap, topic_name) as reader:
        reader.count(5)
    assert [r[2] for r in reader.records] == [b"48.8566,2.3522"] * 5
    assert reader.values == [forecast(i, 48.8566, 2.3522) for i in range(5)]  # raw bodies, in order
    starts = [t for t, _, _ in state.requests]
    assert starts[-1] - starts[0] >= 4 * 0.05 - 0.01, "polled faster than --interval-ms"


def test_errors_and_timeouts_back_off_then_polling_recovers(broker: Any, topic_name: str, api: tuple[Api, str]) -> None:
    state, url = api
    state.script = ["ok", "500", "500", "500", "hang", "hang", "ok", "ok"]
    create_topic(broker.bootstrap, topic_name)
    proc = ingest_http("--bootstrap-server", broker.bootstrap, "--topic", topic_name, "--url", url,
                       "--interval-ms", "20", "--timeout-ms", "300", "--backoff-initial-ms", "100",
                       "--backoff-max-ms", "2000", "--count", "3")
    assert "http: 3 responses published" in ok(proc) and "Traceback" not in proc.stderr
    assert [w for _, w, _ in state.requests] == state.script
    failures = [line for line in proc.stderr.splitlines() if "next try in" in line]
    assert len(failures) == 5, proc.stderr
    assert all("HTTP 500 from" in line for line in failures[:3]), failures
    assert all("timed out after 0.3 s" in line for line in failures[3:]), failures
    assert "the API answers again (after 5 failed requests)" in proc.stderr
    # Pauses after the n-th failure are at least half of 100 ms × 2^(n-1); without backoff they
    # would be the 20 ms interval.
    starts = [t for t, _, _ in state.requests]
    after_failures = [b - a for a, b in zip(starts[1:6], starts[2:7])]
    for n, gap in enumerate(after_failures, start=1):
        assert gap >= 0.05 * 2 ** (n - 1) - 0.01, after_failures
    with Reader(broker.bootstrap, topic_name) as reader:
        reader.count(3)
    assert [json.loads(v or b"")["seq"] for v in reader.values] == [0, 1, 2]


def test_a_missing_token_is_one_line_and_a_nonzero_exit(api: tuple[Api, str]) -> None:
    state, url = api
    line = one_line_error(ingest_http("--bootstrap-server", "127.0.0.1:1", "--url", url, env_token=None))
    assert re.search(r"set the environment variable PLUMETOKEN", line), line
    line = one_line_error(ingest_http("--token-env", "OTHER_TOKEN", env_token=TOKEN))
    assert "OTHER_TOKEN" in line
    assert state.requests == []


def test_a_template_without_token_needs_none(broker: Any, topic_name: str, api: tuple[Api, str]) -> None:
    state, url = api
    proc = ingest_http("--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                       "--url", url.replace("token={token}", "token=fixed"), "--count", "1", env_token=None)
    ok(proc)
    assert state.requests[0][2]["token"] == ["fixed"]
