"""`samsa cluster start N`: ZooKeeper and N brokers on this machine, in the foreground.

    samsa cluster start 3 [--base-port 9092] [--zookeeper-port 2181] [--dir data/cluster]
                          [--override KEY=VALUE ...]

What a user would otherwise do by hand in N + 1 terminals (README, "A cluster on one machine"):
it starts `samsa zookeeper start` on --zookeeper-port with its data in DIR/zookeeper, then the N
brokers at once, broker i as `samsa broker start DIR/broker-i.properties` (written here: broker.id
i, PLAINTEXT on 127.0.0.1:BASE+i, log.dirs DIR/broker-i, ZooKeeper chroot /samsa, replication
factors of min(3, N), then every --override), each logging to DIR/<name>.log. It says what runs
where, waits until every broker serves and sees the other N-1, and prints the bootstrap servers.

A broker that exits meanwhile (the kill -9 of a failover drill) is reported with the command that
starts it again; the rest keep running. Ctrl-C or SIGTERM stops the brokers all at once (each a
controlled shutdown), then ZooKeeper, and exits 0; data stays in DIR for the next start.

The children run in a process group of their own, so the terminal's Ctrl-C reaches this command
alone and the stop keeps its order; each is also asked by the kernel (PR_SET_PDEATHSIG) to stop
with SIGTERM should this command die without stopping them.
"""

from __future__ import annotations

import ctypes
import functools
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from samsa.cli.common import ArgumentParser, CliError, parse_properties

BASE_PORT = 9092
ZOOKEEPER_PORT = 2181
CHROOT = "/samsa"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_S = 0.05  # readiness across processes: there is no event to await, only a port to ask


def say(message: str) -> None:
    print(f"==> {message}", flush=True)


def broker_properties(i: int, n: int, port: int, data: Path, zk_port: int) -> dict[str, str]:
    """Broker i's config: Kafka's keys, as in config/cluster/server-*.properties."""
    rf = min(3, n)
    return {
        "broker.id": str(i),
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data / f"broker-{i}"),
        "zookeeper.connect": f"127.0.0.1:{zk_port}{CHROOT}",
        "zookeeper.session.timeout.ms": "6000",
        "num.partitions": "1",
        "default.replication.factor": str(rf),
        "min.insync.replicas": str(min(2, rf)),
        "offsets.topic.replication.factor": str(rf),
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min(2, rf)),
        "unclean.leader.election.enable": "false",
        "replica.lag.time.max.ms": "10000",
    }


def port_taken(port: int) -> str | None:
    """Why 127.0.0.1:port cannot be listened on (None: it can). With SO_REUSEADDR, as the broker
    and ZooKeeper bind, so that a connection of an earlier run in TIME_WAIT does not count."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            return str(e.strerror or e)
    return None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM it when this command dies (Linux's PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class Child:
    """One process of the cluster: ZooKeeper or a broker."""

    name: str
    address: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    reported: bool = False  # its unexpected exit was told

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         process_group=0, preexec_fn=_die_with_parent)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_text(self) -> str:
        assert self.proc is not None and self.proc.returncode is not None
        rc = self.proc.returncode
        if rc < 0:
            return f"was killed by {signal.Signals(-rc).name}"
        return f"exited with status {rc}"

    def last_error(self) -> str:
        """The child's own one-line error (`samsa ...: error: ...`), else its log's last line."""
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        errors = [line for line in lines if line.startswith("samsa ") and ": error: " in line]
        return errors[-1].split(": error: ", 1)[1] if errors else (lines[-1] if lines else "(its log is empty)")


def zookeeper_serves(port: int, timeout: float = 0.5) -> bool:
    """ZooKeeper answers `srvr` with its mode once it serves sessions (its `ruok` comes earlier)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"srvr")
            reply = b""
            while chunk := s.recv(4096):
                reply += chunk
            return b"Mode:" in reply
    except OSError:
        return False


def brokers_seen(port: int, timeout: float = 1.0) -> int | None:
    """How many brokers the broker on `port` lists in its Metadata (None: it does not answer yet)."""
    from samsa.cli.client import raw_request

    try:
        resp = raw_request("127.0.0.1", port, 3, 1, {"topics": []}, timeout)
    except CliError:
        return None
    return len(resp.brokers)


def _sees_all(port: int, n: int) -> bool:
    return (brokers_seen(port) or 0) >= n


class Cluster:
    def __init__(self, n: int, data: Path, base_port: int, zk_port: int, overrides: dict[str, str],
                 out: IO[str] = sys.stdout) -> None:
        self.n = n
        self.data = data
        self.base_port = base_port
        self.zk_port = zk_port
        self.overrides = overrides
        self.out = out
        self.stop_event = threading.Event()
        me = [sys.executable, "-m", "samsa"]
        self.zookeeper = Child("ZooKeeper", f"127.0.0.1:{zk_port}",
                               [*me, "zookeeper", "start", "--data-dir", str(data / "zookeeper"), "--port",
                                str(zk_port)], data / "zookeeper.log")
        self.brokers = [Child(f"broker {i}", f"127.0.0.1:{base_port + i}",
                              [*me, "broker", "start", str(data / f"broker-{i}.properties")], data / f"broker-{i}.log")
                        for i in range(n)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers)

    def check_ports(self) -> None:
        for child in (self.zookeeper, *self.brokers):
            port = int(child.address.rpartition(":")[2])
            why = port_taken(port)
            if why is not None:
                flag = "--zookeeper-port" if child is self.zookeeper else "--base-port"
                raise CliError(f"{child.name} cannot listen on {child.address}: {why}; stop what listens there or "
                               f"choose other ports ({flag})")

    def write_configs(self) -> None:
        for i in range(self.n):
            props = broker_properties(i, self.n, self.base_port + i, self.data, self.zk_port)
            props.update(self.overrides)
            path = self.data / f"broker-{i}.properties"
            path.write_text(f"# broker {i} of `samsa cluster start {self.n}` (rewritten at each start)\n"
                            + "".join(f"{k}={v}\n" for k, v in props.items()))

    def run(self) -> int:
        t0 = time.monotonic()
        self.data.mkdir(parents=True, exist_ok=True)
        self.check_ports()
        self.write_configs()
        try:
            self._start()
            say(f"ready in {time.monotonic() - t0:.1f} s: ZooKeeper and {self.n} broker{'s' if self.n > 1 else ''}; "
                "Ctrl-C stops them all")
            print(f"    bootstrap servers: {self.bootstrap}", flush=True)
            print(f"    try: samsa topics --bootstrap-server {self.brokers[0].address} --create --topic "
                  f"my-replicated-topic --partitions 1 --replication-factor {min(3, self.n)}", flush=True)
            self._watch()
        finally:
            self._stop_all()
        return 0

    def _start(self) -> None:
        zk = self.zookeeper
        zk.start()
        assert zk.proc is not None
        say(f"starting ZooKeeper on {zk.address}, pid {zk.proc.pid} (data: {self.data / 'zookeeper'}, "
            f"log: {zk.log_path})")
        self._await(zk, lambda: zookeeper_serves(self.zk_port), "to serve")
        say(f"starting {self.n} broker{'s' if self.n > 1 else ''}:")
        for i, b in enumerate(self.brokers):
            b.start()
            assert b.proc is not None
            print(f"    broker {i} on {b.address}, pid {b.proc.pid} (config: {self.data / f'broker-{i}.properties'}, "
                  f"data: {self.data / f'broker-{i}'}, log: {b.log_path})", flush=True)
        for b in self.brokers:
            self._await(b, functools.partial(_sees_all, int(b.address.rpartition(":")[2]), self.n),
                        f"to serve and see all {self.n} brokers")

    def _await(self, child: Child, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            if self.stop_event.is_set():
                raise KeyboardInterrupt
            if not child.running:
                child.reported = True
                raise CliError(f"{child.name} {child.exit_text()}: {child.last_error()} (its log: {child.log_path})")
            if time.monotonic() > deadline:
                raise CliError(f"{child.name} did not come up within {START_TIMEOUT_S:.0f} s; see {child.log_path}")
            self.stop_event.wait(POLL_S)

    def _watch(self) -> None:
        """Until asked to stop: tell of any process that exits."""
        while not self.stop_event.wait(0.5):
            for child in (self.zookeeper, *self.brokers):
                if child.running or child.reported:
                    continue
                child.reported = True
                again = shlex.join(["samsa", *child.argv[3:]])
                say(f"{child.name} ({child.address}) {child.exit_text()}; the others keep running. "
                    f"Start it again (in another terminal) with: {again}")

    def _stop_all(self) -> None:
        running = [b for b in self.brokers if b.running]
        t0 = time.monotonic()
        if running:
            say(f"stopping {len(running)} broker{'s' if len(running) > 1 else ''} (controlled shutdown), "
                "then ZooKeeper")
        stop_together(running)
        stop_together([self.zookeeper] if self.zookeeper.running else [])
        say(f"stopped in {time.monotonic() - t0:.1f} s; data kept in {self.data}")


def stop_together(children: list[Child]) -> None:
    """SIGTERM every child at once, then wait for each (SIGKILL after STOP_TIMEOUT_S)."""
    for c in children:
        if c.running:
            assert c.proc is not None
            c.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for c in children:
        assert c.proc is not None
        try:
            c.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(f"{c.name} did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM: killed (see {c.log_path})",
                  file=sys.stderr, flush=True)
            c.proc.kill()
            c.proc.wait()


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa cluster", description="Run ZooKeeper and N brokers on this machine.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    start = sub.add_parser(
        "start", help="start ZooKeeper and N brokers in the foreground; Ctrl-C stops them all",
        description="Start ZooKeeper and N brokers on 127.0.0.1 in the foreground, and stop them all on Ctrl-C or "
        "SIGTERM. Broker i listens on BASE+i; everything is kept in DIR (data, configs, logs).",
        epilog="e.g. samsa cluster start 3   (brokers on 9092, 9093, 9094; ZooKeeper on 2181; data in data/cluster)")
    start.add_argument("n", metavar="N", type=int, help="how many brokers (1 to 100)")
    start.add_argument("--base-port", type=int, default=BASE_PORT, metavar="PORT",
                       help=f"broker i listens on PORT+i (default {BASE_PORT})")
    start.add_argument("--zookeeper-port", type=int, default=ZOOKEEPER_PORT, metavar="PORT",
                       help=f"ZooKeeper's client port (default {ZOOKEEPER_PORT})")
    start.add_argument("--dir", default="data/cluster", metavar="DIR",
                       help="where the data, the brokers' configs and every log go (default data/cluster)")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                       help="a broker config key for every broker, e.g. --override min.insync.replicas=1 (repeatable)")
    return p


def run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    if not 1 <= a.n <= 100:
        raise CliError(f"N must be between 1 and 100, got {a.n}", exit_code=2)
    if not 0 < a.base_port <= 65535 - (a.n - 1) or not 0 < a.zookeeper_port < 65536:
        raise CliError("--base-port and --zookeeper-port must leave every port between 1 and 65535", exit_code=2)
    if a.base_port <= a.zookeeper_port < a.base_port + a.n:
        raise CliError(f"--zookeeper-port {a.zookeeper_port} is one of the brokers' ports "
                       f"({a.base_port}-{a.base_port + a.n - 1})", exit_code=2)
    overrides = parse_properties(a.override, "--override")
    for key in ("broker.id", "node.id", "listeners", "log.dirs", "log.dir", "zookeeper.connect"):
        if key in overrides:
            raise CliError(f"--override {key}: `samsa cluster` sets it per broker (see --base-port, --dir, "
                           "--zookeeper-port)", exit_code=2)
    cluster = Cluster(a.n, Path(a.dir).absolute(), a.base_port, a.zookeeper_port, overrides)

    def on_signal(signum: int, frame: Any) -> None:
        cluster.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        return cluster.run()
    except KeyboardInterrupt:  # Ctrl-C during start-up: _stop_all has run
        return 0
