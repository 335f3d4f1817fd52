"""`samsa demo`'s broker and ports, run twice back to back as a user reruns the demo.

The demo's own pieces (its port choice, its broker process and config, its dashboard server) run
twice on the same ports, each time with a browser-like server-sent-events client on the dashboard
and a client connected to the broker when they stop: both servers then close those connections
first, which leaves them in TIME_WAIT for a minute. The second run must start at once on the
same ports. (The whole demo with Spark: tests/pipeline/test_demo.py.)

The broker's config must hold only broker keys: the intended one-day retention is in force
(DescribeConfigs) and the broker logs no unknown key.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from samsa.cli import demo
from samsa.cli.common import CliError
from samsa.pipeline import contract
from samsa.pipeline.dashboard import Dashboard
from tests.brokerproc import free_port
from tests.cli.helpers import one_line_error, samsa
from tests.pipeline.test_dashboard import EventStream


def read_to_eof(sock: socket.socket, timeout: float = 15.0) -> None:
    """Wait for the server to close the connection (it closes first), then close our end."""
    sock.settimeout(timeout)
    while sock.recv(65536):
        pass
    sock.close()


def bind_without_reuse(port: int) -> OSError | None:
    """What the demo's old port check did: a bind without SO_REUSEADDR (None if it succeeds)."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return e
    return None


def configs(bootstrap: str, resource: ConfigResource) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (fut,) = admin.describe_configs([resource]).values()
    return {name: entry.value for name, entry in fut.result(15).items()}


def test_the_demo_reruns_at_once_on_the_same_ports_after_a_browser_was_attached(tmp_path: Path) -> None:
    data, http_port, broker_port = tmp_path / "demo", free_port(), free_port()
    data.mkdir()
    for run in (1, 2):
        # explicit ports: used or refused, never swapped
        assert demo.choose_port(http_port, demo.HTTP_PORT, "dashboard", "--http-port") == http_port, run
        assert demo.choose_port(broker_port, demo.BROKER_PORT, "broker", "--broker-port") == broker_port, run
        broker = demo.EmbeddedBroker(data, broker_port)
        broker.start()
        try:
            demo.create_topics(broker.bootstrap)
            kafka_client = socket.create_connection(("127.0.0.1", broker_port), timeout=10)
            with Dashboard(broker.bootstrap, port=http_port) as dash:
                browser = EventStream(dash.url)
                name, snap, _ = browser.next_event(time.monotonic() + 15)
                assert name == "snapshot" and snap["topics"]["readings"] == contract.READINGS
                dash.stop()  # the server ends the stream: its side of the connection goes to TIME_WAIT
                read_to_eof(browser.sock)
                browser.close()
            if run == 2:
                broker_config = configs(broker.bootstrap, ConfigResource("BROKER", "0"))
                assert broker_config["log.retention.ms"] == str(demo.RETENTION_MS)
                topic_config = configs(broker.bootstrap, ConfigResource("TOPIC", contract.READINGS))
                assert topic_config["retention.ms"] == str(demo.RETENTION_MS)  # one day, not Kafka's 7
        finally:
            broker.stop()
        read_to_eof(kafka_client)
        # The rerun is only a test of something if the old check would have refused it.
        assert bind_without_reuse(http_port) is not None, "no TIME_WAIT left on the dashboard's port"
        assert bind_without_reuse(broker_port) is not None, "no TIME_WAIT left on the broker's port"
    log = broker.log_path.read_text()
    assert log.count(" started (") == 2, log
    assert "unknown config key" not in log, log


def test_a_taken_default_port_moves_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        default = taken.getsockname()[1]
        port = demo.choose_port(None, default, "dashboard", "--http-port")
        assert port != default and demo.port_free(port)
        assert capsys.readouterr().out == (f"==> port {default} (the dashboard's default) is in use: the dashboard "
                                           f"takes port {port} instead (--http-port chooses one)\n")
        with pytest.raises(CliError, match=f"the dashboard cannot listen on 127.0.0.1:{default} "):
            demo.choose_port(default, default, "dashboard", "--http-port")


@pytest.mark.parametrize("flag", ["--broker-port", "--http-port"])
def test_the_demo_refuses_a_port_asked_for_that_is_taken(tmp_path: Path, flag: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"--broker-port": str(free_port()), "--http-port": str(free_port()), flag: str(port)}
        line = one_line_error(samsa("demo", "--data-dir", str(tmp_path / "demo"), *(x for kv in ports.items()
                                                                                      for x in kv)))
    what = "broker" if flag == "--broker-port" else "dashboard"
    assert line == (f"samsa demo: error: the {what} cannot listen on 127.0.0.1:{port} ({flag}): the port is in use; "
                    f"stop what listens there or pass another {flag}")
    assert not (tmp_path / "demo").exists()  # refused before anything started
