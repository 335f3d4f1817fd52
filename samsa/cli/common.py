"""Pieces shared by the command-line tools."""

from __future__ import annotations

import argparse
import os
import re
import select
import sys
from typing import NoReturn


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit code `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ArgumentParser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)


def parse_properties(pairs: list[str] | None, what: str = "--property") -> dict[str, str]:
    """Parse repeated `key=value` arguments."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"{what} expects key=value, got {pair!r}")
        out[key.strip()] = value
    return out


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone, as in `samsa topics --list | head -1`.

    Linux's poll() reports POLLERR on the write end of a pipe with no reader left, so this tells a
    closed stdout from any other broken pipe (a connection to a broker, say)."""
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def discard_stdout() -> None:
    """Point file descriptor 1 at /dev/null: what is still buffered for a closed stdout, and the
    interpreter's flush at exit, then go nowhere instead of raising BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


# Kafka's ClientUtils.parseAndValidateAddresses: anything (a PROTOCOL:// prefix), a host (an IPv6
# one in brackets), a colon and a port.
_HOST_PORT = re.compile(r".*?\[?([0-9a-zA-Z\-%._:]+)\]?:([0-9]+)")


def bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` as (host, port) pairs. An entry without a port is refused, in
    Kafka's words, as Kafka's tools refuse it: librdkafka would quietly try port 9092."""
    out = []
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        m = _HOST_PORT.fullmatch(entry)
        if m is None or not 0 < int(m.group(2)) < 65536:
            raise CliError(f"Invalid url in bootstrap.servers: {entry} (expected HOST:PORT, "
                           f"e.g. {entry.rpartition(':')[0] if m else entry}:9092)", exit_code=2)
        out.append((m.group(1), int(m.group(2))))
    if not out:
        raise CliError("no bootstrap server given (use --bootstrap-server HOST:PORT)", exit_code=2)
    return out


def check_bootstrap(text: str) -> str:
    """`text` if every entry is host:port (see `bootstrap_servers`)."""
    bootstrap_servers(text)
    return text
