"""Argument handling and connection failures: no broker needed."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.brokerproc import free_port
from tests.cli.helpers import one_line_error, samsa, spawn

BAD_ARGS = [
    ["topics", "--bootstrap-server", "x:1", "--create", "--topic", "t", "--partitions", "many"],
    ["topics", "--bootstrap-server", "x:1", "--list", "--create"],
    ["topics", "--list"],
    ["topics", "--bootstrap-server", "x:1", "--alter", "--topic", "t"],
    ["topics", "--bootstrap-server", "x:1", "--list", "--config", "a=b"],
    ["console-producer", "--bootstrap-server", "x:1"],
    ["console-producer", "--bootstrap-server", "x:1", "--topic", "t", "--compression-codec", "brotli"],
    ["console-consumer", "--bootstrap-server", "x:1", "--topic", "t", "--offset", "3"],
    ["console-consumer", "--bootstrap-server", "x:1", "--topic", "t", "--partition", "0", "--offset", "soon"],
    ["console-consumer", "--bootstrap-server", "x:1"],
    ["configs", "--bootstrap-server", "x:1", "--entity-type", "topics", "--entity-name", "t"],
    ["configs", "--bootstrap-server", "x:1", "--entity-type", "ips", "--describe"],
    ["configs", "--zookeeper", "x:1", "--entity-type", "topics", "--entity-name", "t", "--describe"],
    ["configs", "--zookeeper", "x:1", "--bootstrap-server", "x:1", "--entity-type", "users", "--describe"],
    ["configs", "--bootstrap-server", "x:1", "--broker", "zero", "--describe"],
    ["configs", "--bootstrap-server", "x:1", "--topic", "t", "--alter"],
    ["perf", "produce", "--topic", "t", "--num-records", "10", "--throughput", "-1"],
    [
        "perf",
        "produce",
        "--topic",
        "t",
        "--num-records",
        "0",
        "--record-size",
        "1",
        "--throughput",
        "-1",
        "--producer-props",
        "bootstrap.servers=x:1",
    ],
    ["perf", "consume", "--bootstrap-server", "x:1", "--topic", "t"],
    ["perf", "sideways"],
]


@pytest.mark.parametrize("argv", BAD_ARGS, ids=lambda a: " ".join(a[:4]))
def test_bad_argument_is_one_line_and_exit_2(argv: list[str]) -> None:
    line = one_line_error(samsa(*argv), codes=(2,))
    assert line.startswith("samsa "), line


@pytest.mark.parametrize(
    "tool",
    [["topics"], ["console-producer"], ["console-consumer"], ["configs"], ["perf", "produce"], ["perf", "consume"]],
)
def test_help(tool: list[str]) -> None:
    proc = samsa(*tool, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "--bootstrap-server" in proc.stdout or "--producer-props" in proc.stdout


def test_unreachable_broker_fails_fast_with_one_line() -> None:
    """Every tool, pointed at a port nobody listens on, says so in one line well within 10 s."""
    bootstrap = f"127.0.0.1:{free_port()}"
    commands = [
        ["topics", "--bootstrap-server", bootstrap, "--list"],
        ["topics", "--bootstrap-server", bootstrap, "--create", "--topic", "t"],
        ["configs", "--bootstrap-server", bootstrap, "--topic", "t", "--describe"],
        ["console-producer", "--bootstrap-server", bootstrap, "--topic", "t"],
        ["console-consumer", "--bootstrap-server", bootstrap, "--topic", "t"],
        [
            "perf",
            "produce",
            "--topic",
            "t",
            "--num-records",
            "5",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--producer-props",
            f"bootstrap.servers={bootstrap}",
        ],
        ["perf", "consume", "--bootstrap-server", bootstrap, "--topic", "t", "--messages", "5"],
    ]
    start = time.monotonic()
    procs = [spawn(*argv) for argv in commands]
    for argv, proc in zip(commands, procs, strict=True):
        _, err = proc.communicate(timeout=30)
        line = one_line_error((proc.returncode, err))
        assert f"cannot connect to {bootstrap}" in line and "refused" in line, (argv, line)
    assert time.monotonic() - start < 10.0


def test_unresolvable_host() -> None:
    line = one_line_error(samsa("topics", "--bootstrap-server", "no-such-host.invalid:9092", "--list"))
    assert "no-such-host.invalid" in line


def test_missing_properties_file() -> None:
    line = one_line_error(samsa("topics", "--bootstrap-server", "x:1", "--list", "--command-config", "/nonexistent/x"))
    assert "/nonexistent/x" in line


def test_unknown_client_property() -> None:
    line = one_line_error(
        samsa(
            "console-producer", "--bootstrap-server", "x:1", "--topic", "t", "--producer-property", "no.such.setting=1"
        )
    )
    assert "no.such.setting" in line


def test_silent_server_times_out(tmp_path: Path) -> None:
    """A listener that accepts but never answers: the tool gives up after default.api.timeout.ms."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        bootstrap = f"127.0.0.1:{server.getsockname()[1]}"
        config = tmp_path / "admin.properties"
        config.write_text("default.api.timeout.ms=1500\n")
        start = time.monotonic()
        line = one_line_error(
            samsa("topics", "--bootstrap-server", bootstrap, "--list", "--command-config", str(config))
        )
        assert line.startswith(f"samsa topics: error: timed out after 1.5 s waiting for {bootstrap}"), line
        assert time.monotonic() - start < 8
