"""A tool whose stdout is closed under it (`samsa topics --describe | head -1`) stops quietly: no
traceback, no error line, exit status 0 (`samsa.cli.main.CLOSED_STDOUT_EXIT`), as Kafka's tools.

Each tool writes into a real pipe whose reading end is closed before the tool starts, so its first
write fails whatever the machine's speed (a `| head -1` that reads first only fails the writes
that come after the pipe's buffer). The console consumer, which writes for as long as records
come, is also run the `| head -1` way.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any

import pytest

from samsa.cli.main import CLOSED_STDOUT_EXIT
from tests.cli.helpers import ok, samsa


def into_closed_pipe(*args: str, timeout: float = 60.0) -> tuple[int, str]:
    """Run `samsa ARGS` with stdout a pipe nobody reads any more; (exit status, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run([sys.executable, "-m", "samsa", *args], stdin=subprocess.DEVNULL,
                                  stdout=write_end, stderr=err, timeout=timeout)
        finally:
            os.close(write_end)
        err.seek(0)
        return proc.returncode, err.read().decode(errors="replace")


@pytest.fixture(scope="module")
def topics(broker: Any) -> list[str]:
    """Enough topics and partitions that --describe and --list write more than one line."""
    names = [f"pipe-{i}" for i in range(3)]
    for name in names:
        ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--if-not-exists", "--topic", name,
                 "--partitions", "4"))
    return names


@pytest.mark.parametrize("args", [
    ["topics", "--describe"],
    ["topics", "--list"],
    ["configs", "--describe", "--entity-type", "topics", "--entity-name", "pipe-0", "--all"],
    ["consumer-groups", "--list"],
    ["console-consumer", "--topic", "pipe-0", "--from-beginning", "--max-messages", "3"],
], ids=lambda a: " ".join(a[:2]))
def test_a_closed_stdout_ends_a_tool_quietly(broker: Any, topics: list[str], args: list[str]) -> None:
    if args[0] == "console-consumer":
        ok(samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", "pipe-0", input="a\nb\nc\n"))
    if args[0] == "consumer-groups":  # a group to list
        ok(samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "pipe-1", "--group",
                 "pipe-readers", "--from-beginning", "--timeout-ms", "1000"))
    rc, err = into_closed_pipe(args[0], "--bootstrap-server", broker.bootstrap, *args[1:])
    assert rc == CLOSED_STDOUT_EXIT, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    if args[0] == "console-consumer":  # kafka-console-consumer.sh's own two lines, as Kafka prints them
        assert err.splitlines() == ["Unable to write to standard out, closing consumer.",
                                    "Processed a total of 3 messages"], err
    else:
        assert err == "", err


@pytest.mark.parametrize("args", [["--help"], ["topics", "--help"], ["--version"]])
def test_help_into_a_closed_pipe_is_quiet(args: list[str]) -> None:
    rc, err = into_closed_pipe(*args)
    assert (rc, err) == (CLOSED_STDOUT_EXIT, "")


def test_console_consumer_piped_into_head(broker: Any) -> None:
    """`samsa console-consumer ... | head -1` with a shell: the consumer goes on writing after head
    has gone, until a write fails; it then stops as Kafka's does."""
    topic = "pipe-many"
    ok(samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
             input="".join(f"line {i}\n" for i in range(20_000))))
    cmd = (f"{sys.executable} -m samsa console-consumer --bootstrap-server {broker.bootstrap} --topic {topic} "
           "--from-beginning 2>consumer.err | head -1; echo \"status ${PIPESTATUS[0]}\"")
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=120)
        with open(os.path.join(cwd, "consumer.err")) as f:
            err = f.read()
    assert out.stdout.splitlines() == ["line 0", f"status {CLOSED_STDOUT_EXIT}"], (out, err)
    lines = err.splitlines()
    assert lines[0] == "Unable to write to standard out, closing consumer.", err
    assert lines[1].startswith("Processed a total of ") and len(lines) == 2, err
