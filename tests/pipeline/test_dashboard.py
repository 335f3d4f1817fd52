"""The dashboard against a real broker: records in the contract's format go in with confluent-kafka,
and /api/state, /events, /healthz, the static assets and `samsa dashboard` are checked from outside.

Each test creates its own set of pipeline topics (unique names, passed to `Dashboard`) on the
session's broker, so tests do not see each other's records.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from samsa.pipeline.dashboard import CATEGORY_COLORS, Dashboard, PipelineTopics
from tests.brokerproc import BrokerProcess, free_port
from tests.cli.helpers import one_line_error, samsa

_QUIET = logging.getLogger("tests.pipeline.dashboard.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def make_topics(broker: BrokerProcess, readings_partitions: int = 1) -> PipelineTopics:
    suffix = uuid.uuid4().hex[:8]
    topics = PipelineTopics(**{role: f"{name}-{suffix}" for role, name in PipelineTopics().as_dict().items()})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([
        NewTopic(name, num_partitions=readings_partitions if role == "readings" else 1, replication_factor=1)
        for role, name in topics.as_dict().items()
    ])
    for f in futures.values():
        f.result(15)
    return topics


class Pipeline:
    """Writes what the acquisition side and the Spark job would, in the contract's JSON."""

    def __init__(self, broker: BrokerProcess, topics: PipelineTopics) -> None:
        self.topics = topics
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "logger": _QUIET})

    @staticmethod
    def minute() -> int:
        return int(time.time() * 1000) // 60_000 * 60_000

    def _send(self, topic: str, key: str, value: dict[str, Any], partition: int | None = None) -> None:
        # -1: librdkafka's "unassigned", the partitioner picks by key
        self.producer.produce(topic, key=key, value=json.dumps(value), partition=-1 if partition is None else partition)

    def city(self, city: str, window_start: int, aqi: int, kind: str = "city_1m", pm25: float = 12.5) -> None:
        self._send(self.topics.aggregates, f"{kind}:{city}", {
            "kind": kind, "city": city, "sensor_id": None, "window_start": window_start,
            "window_end": window_start + (300_000 if kind == "city_5m" else 60_000), "count": 100,
            "pm25_avg": pm25, "pm25_max": pm25 * 1.5, "pm10_avg": 20.0, "pm10_max": 30.0, "no2_avg": 10.0,
            "o3_avg": 40.0, "temperature_avg": 17.0, "aqi": aqi, "category": _category(aqi)})

    def sensor(self, sensor_id: str, city: str, window_start: int, aqi: int, lat: float, lon: float) -> None:
        self.reading(sensor_id, city, lat, lon)
        self._send(self.topics.aggregates, f"sensor_1m:{sensor_id}", {
            "kind": "sensor_1m", "city": city, "sensor_id": sensor_id, "window_start": window_start,
            "window_end": window_start + 60_000, "count": 12, "pm25_avg": 30.5, "pm25_max": 40.0,
            "pm10_avg": 20.0, "pm10_max": 30.0, "no2_avg": 10.0, "o3_avg": 40.0, "temperature_avg": 17.0,
            "aqi": aqi, "category": _category(aqi)})

    def reading(self, sensor_id: str, city: str, lat: float, lon: float, partition: int | None = None) -> None:
        self._send(self.topics.readings, sensor_id, {
            "sensor_id": sensor_id, "city": city, "lat": lat, "lon": lon, "ts": int(time.time() * 1000),
            "pm25": 30.0, "pm10": 20.0, "no2": 10.0, "o3": 40.0, "temperature": 17.0}, partition)

    def alert(self, city: str, window_start: int, aqi: int) -> None:
        self._send(self.topics.alerts, city, {
            "city": city, "window_start": window_start, "window_end": window_start + 60_000, "aqi": aqi,
            "category": _category(aqi), "threshold": 151, "pm25_avg": 80.0})

    def status(self, readings_end: dict[str, int], ts: int | None = None, batch_id: int = 7) -> None:
        self._send(self.topics.status, "job", {
            "ts": int(time.time() * 1000) if ts is None else ts, "batch_id": batch_id, "input_rows": 120,
            "input_rows_per_second": 40.0, "processed_rows_per_second": 400.0, "duration_ms": 300,
            "end_offsets": {self.topics.readings: readings_end}})

    def dead_letter(self, reason: str, offset: int) -> None:
        self._send(self.topics.dlq, "k", {"reason": reason, "topic": self.topics.readings, "partition": 0,
                                          "offset": offset, "raw": "{not json"})

    def flush(self) -> None:
        assert self.producer.flush(15) == 0


def _category(aqi: int) -> str:
    from samsa.pipeline.aqi import category

    return category(aqi)


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers["Content-Type"], e.read()


def _city(snap: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((c for c in snap["cities"] if c["city"] == name), None)


def _latest_aqi(snap: dict[str, Any], name: str) -> int | None:
    city = _city(snap, name)
    return None if city is None or city["latest"] is None else int(city["latest"]["aqi"])


@pytest.fixture
def topics(broker: BrokerProcess) -> PipelineTopics:
    return make_topics(broker, readings_partitions=2)


@pytest.fixture
def pipe(broker: BrokerProcess, topics: PipelineTopics) -> Pipeline:
    return Pipeline(broker, topics)


def test_api_state_reflects_the_pipeline_topics(broker: BrokerProcess, topics: PipelineTopics,
                                                pipe: Pipeline) -> None:
    now = pipe.minute()
    for i in range(5):
        pipe.city("Paris", now - (4 - i) * 60_000, 40 + i)
    pipe.city("Delhi", now, 182, pm25=80.2)
    pipe.city("Delhi", now - 240_000, 175, kind="city_5m")
    pipe.sensor("delhi-001", "Delhi", now, 190, lat=28.61, lon=77.21)  # one reading, partition chosen by key
    for i in range(6):
        pipe.reading(f"paris-00{i}", "Paris", 48.85, 2.35, partition=i % 2)  # 3 + 3 more readings
    pipe.alert("Delhi", now, 182)
    pipe.dead_letter("malformed JSON", 3)
    pipe.dead_letter("negative pm25", 4)
    pipe.flush()
    # 7 readings in all; the job reports 2 + 1 of them processed: lag 4.
    pipe.status({"0": 2, "1": 1})
    pipe.flush()

    with Dashboard(broker.bootstrap, port=0, topics=topics) as dash:
        snap = dash.wait_until(lambda s: s["health"]["lag"] == 4 and s["dlq"]["count"] == 2
                               and len(s["cities"]) == 2 and s["alerts"] and s["sensors"], 20)
        status, ctype, body = _get(dash.url + "api/state")
        assert status == 200 and ctype == "application/json"
        served = json.loads(body)
        assert served["version"] >= snap["version"]
        assert served["health"]["lag"] == 4 and served["health"]["readings_end_offset"] == 7

    paris, delhi = _city(served, "Paris"), _city(served, "Delhi")
    assert paris is not None and delhi is not None
    assert [p["aqi"] for p in paris["series"]] == [40, 41, 42, 43, 44]
    assert paris["latest"]["aqi"] == 44 and paris["latest"]["category"] == "Good"
    assert delhi["latest"]["aqi"] == 182 and delhi["latest"]["color"] == CATEGORY_COLORS["Unhealthy"]
    assert delhi["latest"]["pm25"] == 80.2
    assert delhi["latest_5m"]["aqi"] == 175 and delhi["latest_5m"]["window_start"] == now - 240_000
    (sensor,) = served["sensors"]
    assert sensor["sensor_id"] == "delhi-001" and sensor["city"] == "Delhi" and sensor["aqi"] == 190
    assert (sensor["lat"], sensor["lon"]) == (28.61, 77.21)  # from its reading: sensor_1m has no position
    (alert,) = served["alerts"]
    assert alert["city"] == "Delhi" and alert["aqi"] == 182 and alert["threshold"] == 151
    assert [d["reason"] for d in served["dlq"]["latest"]] == ["negative pm25", "malformed JSON"]
    assert served["job"]["state"] == "running" and served["job"]["status"]["batch_id"] == 7
    assert served["broker"]["state"] == "ok"
    assert served["topics"] == topics.as_dict()
    assert served["ignored_records"] == 0


def test_a_re_emitted_window_replaces_the_earlier_one(broker: BrokerProcess, topics: PipelineTopics,
                                                      pipe: Pipeline) -> None:
    now = pipe.minute()
    pipe.city("Lyon", now - 60_000, 30)
    pipe.city("Lyon", now, 50)
    pipe.alert("Lyon", now, 160)
    pipe.flush()
    with Dashboard(broker.bootstrap, port=0, topics=topics) as dash:
        dash.wait_until(lambda s: _latest_aqi(s, "Lyon") == 50, 15)
        pipe.city("Lyon", now, 90)  # the Spark job updates the window with late readings
        pipe.alert("Lyon", now, 170)
        pipe.flush()
        snap = dash.wait_until(lambda s: _latest_aqi(s, "Lyon") == 90 and s["alerts"][0]["aqi"] == 170, 15)
    lyon = _city(snap, "Lyon")
    assert lyon is not None
    assert [(p["window_start"], p["aqi"]) for p in lyon["series"]] == [(now - 60_000, 30), (now, 90)]
    assert lyon["latest"]["category"] == "Moderate"
    assert len(snap["alerts"]) == 1


class EventStream:
    """A bare server-sent-events client: the HTTP exchange by hand, then events line by line."""

    def __init__(self, url: str, path: str = "/events") -> None:
        host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n" % path.encode())
        self.file = self.sock.makefile("rb")
        self.status_line = self.file.readline().decode()
        self.headers: dict[str, str] = {}
        while (line := self.file.readline().decode().strip()):
            name, _, value = line.partition(":")
            self.headers[name.lower()] = value.strip()
        self.comments = 0

    def next_event(self, deadline: float) -> tuple[str, dict[str, Any], float]:
        """The next event's (name, parsed data, arrival time); comments are counted."""
        name, data = "message", list[str]()
        while True:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            line = self.file.readline().decode().rstrip("\n")
            if not line and not data:
                if time.monotonic() >= deadline:
                    raise TimeoutError("no event before the deadline")
                continue
            if line.startswith(":"):
                self.comments += 1
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line == "" and data:
                return name, json.loads("\n".join(data)), time.monotonic()

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def test_events_stream_a_snapshot_then_updates(broker: BrokerProcess, topics: PipelineTopics,
                                               pipe: Pipeline) -> None:
    now = pipe.minute()
    pipe.city("Nantes", now - 60_000, 20)
    pipe.flush()
    with Dashboard(broker.bootstrap, port=0, topics=topics, keepalive_s=0.3) as dash:
        dash.wait_until(lambda s: _city(s, "Nantes") is not None, 15)
        stream = EventStream(dash.url)
        try:
            assert " 200 " in stream.status_line
            assert stream.headers["content-type"].startswith("text/event-stream")
            name, first, t_first = stream.next_event(time.monotonic() + 10)
            assert name == "snapshot" and _city(first, "Nantes") is not None
            pipe.city("Nantes", now, 77)
            pipe.flush()
            deadline = time.monotonic() + 15
            while True:
                name, snap, t_update = stream.next_event(deadline)
                nantes = _city(snap, "Nantes")
                if nantes is not None and nantes["latest"]["window_start"] == now:
                    break
            assert name == "snapshot" and nantes["latest"]["aqi"] == 77
            assert t_update - t_first >= 0.9  # at most one snapshot a second
            assert snap["version"] > first["version"]
            assert stream.comments >= 1  # keep-alives while nothing changed (every 0.3 s here)
        finally:
            stream.close()


def test_job_state_follows_the_status_topic(broker: BrokerProcess, topics: PipelineTopics, pipe: Pipeline) -> None:
    with Dashboard(broker.bootstrap, port=0, topics=topics, job_timeout_s=2.0, job_start_timeout_s=1.0) as dash:
        snap = dash.wait_until(lambda s: s["broker"]["state"] == "ok", 15)
        if snap["job"]["state"] == "starting":  # for job_start_timeout_s, unless this machine is slow
            assert snap["job"]["reason"] == "waiting for its first pipeline_status record"
        snap = dash.wait_until(lambda s: s["job"]["state"] != "starting", 15)
        assert snap["job"]["state"] == "not_running" and snap["job"]["last_status_ts"] is None
        assert snap["job"]["reason"] == "no pipeline_status record received"

        old = int(time.time() * 1000) - 60_000
        pipe.status({"0": 0, "1": 0}, ts=old)
        pipe.flush()
        snap = dash.wait_until(lambda s: s["job"]["last_status_ts"] == old, 15)
        assert snap["job"]["state"] == "not_running"
        assert snap["job"]["reason"] == "no pipeline_status record for more than 2 s"

        pipe.status({"0": 0, "1": 0}, batch_id=8)
        pipe.flush()
        snap = dash.wait_until(lambda s: s["job"]["state"] == "running", 15)
        assert snap["job"]["status"]["batch_id"] == 8
        # No status after it: the job is declared gone once the timeout passes.
        started = time.monotonic()
        dash.wait_until(lambda s: s["job"]["state"] == "not_running", 15)
        assert time.monotonic() - started >= 1.0
        status, _, body = _get(dash.url + "healthz")
        assert status == 200 and json.loads(body) == {"status": "ok", "broker": "ok", "job": "not_running"}


def test_static_assets_are_local_and_typed(broker: BrokerProcess) -> None:
    with Dashboard(broker.bootstrap, port=0, topics=make_topics(broker)) as dash:
        status, ctype, html = _get(dash.url)
        assert status == 200 and ctype == "text/html; charset=utf-8"
        page = html.decode()
        assert 'src="/static/dashboard.js"' in page and 'href="/static/dashboard.css"' in page
        assert 'src="/static/console.js"' in page
        expected = {"/static/dashboard.js": "text/javascript; charset=utf-8",
                    "/static/console.js": "text/javascript; charset=utf-8",
                    "/static/dashboard.css": "text/css; charset=utf-8"}
        bodies = {"/": html}
        for path, want in expected.items():
            status, ctype, body = _get(dash.url.rstrip("/") + path)
            assert (status, ctype) == (200, want), path
            bodies[path] = body
        for path, body in bodies.items():
            text = body.decode()
            assert "http://" not in text and "https://" not in text, f"{path} refers to another site"
            assert not re.search(r"""["'`(]//""", text), f"{path} has a protocol-relative URL"
        assert "url(" not in bodies["/static/dashboard.css"].decode()
        # Every URL the page loads is on this server.
        for ref in re.findall(r'(?:src|href)="([^"]*)"', page):
            assert ref.startswith("/static/") or ref.startswith("data:"), ref
        assert _get(dash.url + "static/nope.js")[0] == 404
        assert _get(dash.url + "static/../app.py")[0] == 404
        assert _get(dash.url + "elsewhere")[0] == 404


def test_broker_unreachable_then_back(tmp_path: Path) -> None:
    port = free_port()
    with Dashboard(f"127.0.0.1:{port}", port=0) as dash:
        snap = dash.wait_until(lambda s: s["broker"]["state"] == "unreachable", 15)
        assert snap["broker"]["error"]
        status, _, body = _get(dash.url + "healthz")
        assert status == 200 and json.loads(body)["broker"] == "unreachable"
        assert _get(dash.url + "api/state")[0] == 200
        late = BrokerProcess(tmp_path / "late", port=port).start()
        try:
            dash.wait_until(lambda s: s["broker"]["state"] == "ok", 20)
        finally:
            late.close()


def test_stop_ends_every_thread_even_with_a_stream_open(broker: BrokerProcess, topics: PipelineTopics) -> None:
    before = set(threading.enumerate())
    dash = Dashboard(broker.bootstrap, port=0, topics=topics).start()
    stream = EventStream(dash.url)
    try:
        stream.next_event(time.monotonic() + 10)
        dash.stop()
        assert set(threading.enumerate()) <= before
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", dash.port), timeout=2).close()
    finally:
        stream.close()
        dash.stop()


@pytest.fixture
def cli_process(broker: BrokerProcess, topics: PipelineTopics) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa", "dashboard", "--bootstrap-server", broker.bootstrap, "--http-port", "0",
         "--http-host", "127.0.0.1", "--aggregates-topic", topics.aggregates, "--status-topic", topics.status],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=10)


def test_cli_serves_until_interrupted(cli_process: subprocess.Popen[str], topics: PipelineTopics) -> None:
    assert cli_process.stdout is not None
    line = cli_process.stdout.readline()
    assert line.startswith("Dashboard at http://127.0.0.1:"), line
    url = line.split()[2]
    status, _, body = _get(url + "healthz")
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert json.loads(_get(url + "api/state")[2])["topics"]["aggregates"] == topics.aggregates
    cli_process.send_signal(signal.SIGINT)
    assert cli_process.wait(15) == 0


def test_cli_argument_errors(broker: BrokerProcess) -> None:
    assert "--http-port" in one_line_error(samsa("dashboard", "--bootstrap-server", broker.bootstrap,
                                                 "--http-port", "70000"), codes=(2,))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(samsa("dashboard", "--bootstrap-server", broker.bootstrap, "--http-port", str(port)))
    assert line == f"samsa dashboard: error: the dashboard cannot listen on 127.0.0.1:{port}: Address already in use"
