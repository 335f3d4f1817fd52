"""Run a real Samsa broker as a child process for tests: start, wait until it serves, stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """One `samsa broker start` child with its own config file and log dir.

    `host` is the address it listens on and is reached at; `wrap` is a command prefix the
    process is started through (e.g. `nsenter --net=...` to run it in a network namespace; the
    prefix must exec the broker, so that the child's pid is the broker's).
    """

    def __init__(self, workdir: Path, overrides: dict[str, str] | None = None, port: int | None = None,
                 host: str = "127.0.0.1", wrap: Sequence[str] = (), args: Sequence[str] = ()):
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.host = host
        self.wrap = list(wrap)
        self.args = list(args)  # more `samsa broker start` arguments (e.g. --request-log)
        self.log_dir = workdir / "data"
        self.config_path = workdir / "server.properties"
        self.log_path = workdir / "broker.log"
        props = {
            "broker.id": "0",
            "listeners": f"PLAINTEXT://{host}:{self.port}",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "group.initial.rebalance.delay.ms": "0",  # tests wait for events, not for timers
        }
        props.update(overrides or {})
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 20.0) -> BrokerProcess:
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [*self.wrap, sys.executable, "-m", "samsa", "broker", "start", str(self.config_path), *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.02)  # polling for the port: there is no event to await across processes
        raise TimeoutError(f"broker did not listen on {self.port} in {timeout}s:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # Its log ends with every thread's stack when the shutdown stalls (SHUTDOWN_STALL_S).
            raise AssertionError(f"broker {self.port} did not stop within {timeout} s of SIGTERM; its log ends:\n"
                                 + self.log_text()[-12000:]) from None

    def kill9(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def restart(self) -> BrokerProcess:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        return self.start()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
