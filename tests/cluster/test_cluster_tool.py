"""`samsa cluster start N` as a user runs it (README, "A cluster on one machine"): ZooKeeper and
three brokers from one command, records across them with acks=all, a broker's kill -9 reported,
and SIGTERM stopping every process within a few seconds. Also `samsa zookeeper start --port
--data-dir`, which it uses, and the ports it refuses with their address."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.cli import zookeeper as zkcli
from tests.brokerproc import free_port
from tests.cli.helpers import ok, one_line_error, samsa
from tests.cluster.cluster import produce_sync

pytestmark = pytest.mark.skipif(not (zkcli.JAVA_DIR / zkcli.ZK_JAR).exists(),
                                reason="Debian's zookeeper package is not installed")

STOPPED_WITHIN_S = 10.0  # "a few seconds": all three brokers stop at once, then ZooKeeper


def consecutive_free_ports(n: int) -> int:
    """A base port with n free ports from it (free now: the test binds them itself right after)."""
    for _ in range(50):
        base = free_port()
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports")


class ClusterCommand:
    """`samsa cluster start N` in a subprocess, its output read line by line as it comes (by a
    thread, so that waiting for a line has a deadline)."""

    def __init__(self, tmp_path: Path, n: int, *extra: str) -> None:
        self.base, self.zk_port = consecutive_free_ports(n), free_port()
        self.dir = tmp_path / "cluster"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samsa", "cluster", "start", str(n), "--base-port", str(self.base),
             "--zookeeper-port", str(self.zk_port), "--dir", str(self.dir), *extra],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()  # "" at the end of the output
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put("")

    def read_until(self, pattern: str, timeout: float = 120.0) -> re.Match[str]:
        """The first output line (from the start) matching `pattern`, waiting for more as it comes."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for line in self.lines[seen:]:
                m = re.search(pattern, line)
                if m:
                    return m
            seen = len(self.lines)
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no line matching {pattern!r}; output so far:\n" + "".join(self.lines)) from None
            if not line:
                self._queue.put("")
                raise AssertionError(f"`samsa cluster` exited ({self.proc.wait()}) before {pattern!r}:\n"
                                     + "".join(self.lines))
            self.lines.append(line)

    def rest(self) -> str:
        """All the output, once the command has exited."""
        self._reader.join(30)
        while not self._queue.empty():
            self.lines.append(self._queue.get())
        return "".join(self.lines)

    def pids(self) -> list[int]:
        return [int(m.group(1)) for line in self.lines for m in [re.search(r", pid (\d+) ", line)] if m]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        for pid in self.pids():  # whatever outlived it, by pid (never by name)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def three(tmp_path: Path) -> Iterator[ClusterCommand]:
    c = ClusterCommand(tmp_path, 3)
    yield c
    c.close()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_cluster_start_runs_three_brokers_and_sigterm_stops_them_all(three: ClusterCommand) -> None:
    c = three
    c.read_until(r"^==> ready in [\d.]+ s: ZooKeeper and 3 brokers; Ctrl-C stops them all$")
    bootstrap = c.read_until(r"^    bootstrap servers: (\S+)$").group(1)
    assert bootstrap == ",".join(f"127.0.0.1:{c.base + i}" for i in range(3))
    pids = c.pids()
    assert len(pids) == 4, c.lines  # ZooKeeper and three brokers, each said with its pid
    for i in range(3):  # the configs a user can read (and restart a broker with)
        props = (c.dir / f"broker-{i}.properties").read_text()
        assert f"broker.id={i}\n" in props and f"listeners=PLAINTEXT://127.0.0.1:{c.base + i}\n" in props

    topic = "my-replicated-topic"
    ok(samsa("topics", "--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", "1",
             "--replication-factor", "3"))
    values = [f"my test message {i}".encode() for i in range(100)]
    reports = produce_sync(bootstrap, topic, values, acks="all")
    assert [(offset, err) for _, offset, err in reports] == [(i, None) for i in range(100)]
    described = ok(samsa("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic))
    assert re.search(r"ReplicationFactor: 3\t", described) and re.search(r"Replicas: \d,\d,\d\t", described), described
    consumed = ok(samsa("console-consumer", "--bootstrap-server", f"127.0.0.1:{c.base + 2}", "--topic", topic,
                        "--from-beginning", "--max-messages", "100", "--timeout-ms", "30000"))
    assert consumed.splitlines() == [v.decode() for v in values]

    t0 = time.monotonic()
    c.proc.send_signal(signal.SIGTERM)
    assert c.proc.wait(STOPPED_WITHIN_S + 20) == 0
    took = time.monotonic() - t0
    out = c.rest()
    assert took < STOPPED_WITHIN_S, f"stopped in {took:.1f} s:\n{out}"
    assert not [pid for pid in pids if alive(pid)], out  # waited for by the command: gone, not zombies
    assert "==> stopping 3 brokers (controlled shutdown), then ZooKeeper" in out
    assert re.search(r"==> stopped in [\d.]+ s; data kept in ", out), out
    for i in range(3):
        log = (c.dir / f"broker-{i}.log").read_text()
        assert f"Samsa broker {i} stopped cleanly" in log, log[-3000:]
        assert "stopping anyway" not in log, log[-3000:]  # every controlled shutdown finished


def test_a_killed_broker_is_reported_and_the_rest_keep_running(three: ClusterCommand) -> None:
    c = three
    c.read_until(r"^==> ready in ")
    pid0 = int(c.read_until(rf"^    broker 0 on 127.0.0.1:{c.base}, pid (\d+) ").group(1))
    os.kill(pid0, signal.SIGKILL)
    m = c.read_until(r"^==> broker 0 \(127\.0\.0\.1:\d+\) was killed by SIGKILL; the others keep running\. "
                     r"Start it again \(in another terminal\) with: (.*)$")
    assert m.group(1) == f"samsa broker start {c.dir / 'broker-0.properties'}"
    ok(samsa("topics", "--bootstrap-server", f"127.0.0.1:{c.base + 1}", "--list"))
    c.proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert c.proc.wait(STOPPED_WITHIN_S + 20) == 0
    assert "==> stopping 2 brokers" in c.rest()


def test_the_children_stop_if_the_command_is_killed(three: ClusterCommand) -> None:
    c = three
    c.read_until(r"^==> ready in ")
    pids = c.pids()
    c.proc.kill()  # no chance to stop them: the kernel tells them (PR_SET_PDEATHSIG)
    c.proc.wait()
    deadline = time.monotonic() + 30
    while [p for p in pids if alive(p)]:  # not our children: nothing to wait() on but their pids
        assert time.monotonic() < deadline, [p for p in pids if alive(p)]
        time.sleep(0.1)


def test_ports_in_use_are_named(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_line_error(samsa("cluster", "start", "1", "--base-port", str(port), "--zookeeper-port",
                                    str(free_port()), "--dir", str(tmp_path / "c")))
        assert line == (f"samsa cluster: error: broker 0 cannot listen on 127.0.0.1:{port}: Address already in use; "
                        "stop what listens there or choose other ports (--base-port)")
        line = one_line_error(samsa("zookeeper", "start", "--data-dir", str(tmp_path / "zk"), "--port", str(port)))
        assert line == (f"samsa zookeeper: error: ZooKeeper cannot listen on 127.0.0.1:{port} (--port): Address "
                        "already in use; stop what listens there or choose another port (--port)")


def test_zookeeper_start_with_port_and_data_dir(tmp_path: Path) -> None:
    from samsa.cli.cluster import zookeeper_serves

    port = free_port()
    log = open(tmp_path / "zk.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "zookeeper", "start", "--data-dir", str(tmp_path / "zk"),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not zookeeper_serves(port):
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "zk.log").read_text()
            time.sleep(0.05)  # a port to ask across processes: no event to await
        cfg = (tmp_path / "zk" / "zoo.cfg").read_text()
        assert f"clientPort={port}\n" in cfg and f"dataDir={tmp_path / 'zk'}\n" in cfg
        assert (tmp_path / "zk" / "version-2").is_dir()  # ZooKeeper's own data went there
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 143
        log.close()


def test_cluster_arguments_are_checked() -> None:
    assert "N must be between 1 and 100" in one_line_error(samsa("cluster", "start", "0"), codes=(2,))
    line = one_line_error(samsa("cluster", "start", "3", "--override", "listeners=PLAINTEXT://:1"), codes=(2,))
    assert "--override listeners: `samsa cluster` sets it per broker" in line
    line = one_line_error(samsa("cluster", "start", "3", "--base-port", "9092", "--zookeeper-port", "9093"),
                          codes=(2,))
    assert "--zookeeper-port 9093 is one of the brokers' ports (9092-9094)" in line
