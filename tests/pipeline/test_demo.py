"""`samsa demo` as a user runs it: a real process with its own broker, simulator, Spark job and
dashboard; windows reach the dashboard, Ctrl-C stops everything with exit 0, and the results
stay queryable."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.brokerproc import free_port


def state(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(url + "api/state", timeout=2) as r:
            return json.loads(r.read())
    except OSError:
        return None


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_demo_runs_the_pipeline_end_to_end_and_stops_cleanly(tmp_path: Path) -> None:
    data, http_port, broker_port = tmp_path / "demo", free_port(), free_port()
    log = tmp_path / "demo.out"
    out = open(log, "w")  # shared with the demo and its JVM: only read it by path
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "demo", "--data-dir", str(data), "--http-port",
                             str(http_port), "--broker-port", str(broker_port), "--rate", "500", "--sensors", "20",
                             "--duration", "600"], stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{http_port}/"
    try:
        deadline = time.monotonic() + 240
        snap = None
        while time.monotonic() < deadline and proc.poll() is None:
            snap = state(url)
            if snap and snap["job"]["state"] == "running" and len(snap["cities"]) >= 3 and snap["sensors"]:
                break
            time.sleep(1)
        assert proc.poll() is None, log.read_text()
        assert snap and snap["job"]["state"] == "running", (snap, log.read_text())
        assert all(c["latest"]["aqi"] >= 0 for c in snap["cities"] if c["latest"])
        assert snap["health"]["readings_end_offset"] > 0
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.close()
    text = log.read_text()
    assert f"dashboard: {url}" in text and "stopped; results kept in" in text
    assert "Traceback" not in text
    assert not listening(http_port) and not listening(broker_port)  # nothing left running
    result = subprocess.run([sys.executable, "-m", "samsa", "pipeline", "query", "--data-dir", str(data),
                             "--format", "json", "SELECT count(*) AS n FROM windows WHERE kind = 'city_1m'"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["n"] > 0


def test_demo_runs_against_a_secured_cluster_given_client_properties(tmp_path: Path) -> None:
    """`samsa demo --bootstrap-server B --command-config F` on a SASL_SSL-only broker: the
    simulator, the Spark job (the samsa source and sink over TLS + SASL/PLAIN), the status
    producer and the dashboard all authenticate with the Java-style properties file."""
    from tests.broker.test_sasl import sasl_broker
    from tests.broker.test_secured_tools import _client_props
    from tests.pki import make_pki

    pki = make_pki(tmp_path / "pki")
    b = sasl_broker(tmp_path, "SASL_SSL", **{"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(pki.keystore("server"))})
    b.start()
    data, http_port = tmp_path / "demo", free_port()
    props = _client_props(tmp_path / "client.properties", pki.ca)
    log = tmp_path / "demo.out"
    out = open(log, "w")
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "demo", "--data-dir", str(data), "--http-port",
                             str(http_port), "--bootstrap-server", b.bootstrap, "--command-config", str(props),
                             "--rate", "500", "--sensors", "20", "--duration", "600"],
                            stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{http_port}/"
    try:
        deadline = time.monotonic() + 240
        snap = None
        while time.monotonic() < deadline and proc.poll() is None:
            snap = state(url)
            if snap and snap["job"]["state"] == "running" and len(snap["cities"]) >= 3:
                break
            time.sleep(1)
        assert proc.poll() is None, log.read_text()
        assert snap and snap["job"]["state"] == "running", (snap, log.read_text())
        assert snap["health"]["readings_end_offset"] > 0
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        out.close()
        b.stop()
    text = log.read_text()
    assert "using the cluster at" in text and "Traceback" not in text
    assert "authentication failed" not in b.log_text()
    result = subprocess.run([sys.executable, "-m", "samsa", "pipeline", "query", "--data-dir", str(data),
                             "--format", "json", "SELECT count(*) AS n FROM windows WHERE kind = 'city_1m'"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[0])["n"] > 0
