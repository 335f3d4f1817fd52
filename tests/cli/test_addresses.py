"""Addresses a user gets wrong: a bootstrap server without a port is refused in Kafka's words (as
Kafka's tools refuse it; librdkafka would quietly try 9092), and a port that is taken is named in
the error by the broker's listeners (the dashboard's: tests/pipeline/test_dashboard.py, ZooKeeper's:
tests/cluster/test_cluster_tool.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli.common import CliError, bootstrap_servers
from tests.cli.helpers import one_line_error, samsa


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9092", [("127.0.0.1", 9092)]),
    ("a:1, b:2,c:3", [("a", 1), ("b", 2), ("c", 3)]),
    ("[::1]:9093", [("::1", 9093)]),
    ("PLAINTEXT://broker-0.example:9092", [("broker-0.example", 9092)]),
])
def test_bootstrap_servers(text: str, expected: list[tuple[str, int]]) -> None:
    assert bootstrap_servers(text) == expected


@pytest.mark.parametrize("text", ["127.0.0.1", "a:1,b", "host:", "host:0", "host:65536", "host:port", ""])
def test_bootstrap_servers_refuses(text: str) -> None:
    with pytest.raises(CliError) as e:
        bootstrap_servers(text)
    assert e.value.exit_code == 2
    assert text == "" or str(e.value).startswith("Invalid url in bootstrap.servers: ")


@pytest.mark.parametrize("tool", [
    ["topics", "--list"],
    ["console-producer", "--topic", "t"],
    ["console-consumer", "--topic", "t"],
    ["consumer-groups", "--list"],
    ["configs", "--describe", "--entity-type", "topics"],
    ["transactions", "list"],
    ["dashboard"],
    ["ingest", "simulate"],
    ["pipeline", "run"],
    ["demo"],
], ids=lambda t: t[0])
def test_a_bootstrap_server_without_a_port_is_refused(tool: list[str]) -> None:
    line = one_line_error(samsa(*tool, "--bootstrap-server", "127.0.0.1"), codes=(2,))
    assert line.endswith("Invalid url in bootstrap.servers: 127.0.0.1 (expected HOST:PORT, e.g. 127.0.0.1:9092)")


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_broker_names_the_address_it_cannot_listen_on(tmp_path: Path, taken_port: int) -> None:
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{taken_port}\nlog.dirs={tmp_path / 'data'}\n")
    proc = samsa("broker", "start", str(config))
    assert proc.returncode == 1, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("samsa broker: error: broker failed to start: listener PLAINTEXT cannot listen on "
                           f"127.0.0.1:{taken_port}: Address already in use"), line

