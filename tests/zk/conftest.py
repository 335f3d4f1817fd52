"""A real ZooKeeper for the tests, started as users start it: `samsa zookeeper start zoo.cfg`.

One server per test session (free port, temporary dataDir, admin server off, `ruok` and `srvr` allowed);
tests isolate themselves with a chroot of their own. Stopped with SIGTERM at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from samsa.cli import zookeeper as zkcli

ZK_INSTALLED = (zkcli.JAVA_DIR / zkcli.ZK_JAR).exists()


def launcher_cmd(*args: str) -> list[str]:
    """`samsa zookeeper ...` once the tool is registered in samsa.cli.main, the module before."""
    from samsa.cli.main import TOOLS

    if "zookeeper" in TOOLS:
        return [sys.executable, "-m", "samsa.cli.main", "zookeeper", *args]
    return [sys.executable, "-m", "samsa.cli.zookeeper", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serving(port: int, timeout: float = 0.5) -> bool:
    """`srvr` answers with the server's mode once it serves sessions. (`ruok` says imok a moment
    earlier, while a new session would still be dropped: that race failed a test once.)"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"srvr")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
            return b"Mode:" in reply
    except OSError:
        return False


@dataclass
class ZooKeeperServer:
    port: int
    proc: subprocess.Popen[bytes]
    ready_seconds: float
    log: Path

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str | None = None) -> str:
        return f"{self.hosts}/{chroot}" if chroot else self.hosts

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait()
        return int(self.proc.returncode)


def write_zoo_cfg(d: Path, port: int, extra: str = "") -> Path:
    cfg = d / "zoo.cfg"
    cfg.write_text(
        "tickTime=500\n"  # sessions may be as short as 2 ticks: 1 s, for expiry tests
        f"dataDir={d / 'data'}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr\n"
        + extra
    )
    return cfg


def start_server(d: Path, timeout: float = 30.0, extra_config: str = "") -> ZooKeeperServer:
    """Start a ZooKeeper in `d`; `extra_config`: more zoo.cfg lines (e.g. maxSessionTimeout)."""
    port = free_port()
    cfg = write_zoo_cfg(d, port, extra_config)
    log = d / "zookeeper.out"
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(launcher_cmd("start", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
    while not serving(port):
        if proc.poll() is not None:
            raise RuntimeError(f"ZooKeeper exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            raise RuntimeError(f"ZooKeeper not ready after {timeout} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.02)
    return ZooKeeperServer(port, proc, time.monotonic() - t0, log)


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    if not ZK_INSTALLED:
        pytest.fail("Debian's zookeeper package is not installed: run scripts/install-deps.sh")
    server = start_server(tmp_path_factory.mktemp("zookeeper"))
    if os.environ.get("SAMSA_ZK_TIMINGS"):
        print(f"\nZooKeeper ready in {server.ready_seconds:.3f} s", file=sys.stderr)
    yield server
    server.stop()


@pytest.fixture
def chroot() -> str:
    return f"samsa-test-{uuid.uuid4().hex[:10]}"
