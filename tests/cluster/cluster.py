"""A Samsa cluster on one machine for black-box tests: N real `samsa broker` processes on one
real ZooKeeper (a fresh chroot per cluster), plus the observations the tests make of it.

Everything here looks at the cluster from outside, as an operator would: the partition state
znodes in ZooKeeper (kazoo), client metadata (confluent_kafka), the `samsa topics` tool and the
replicas' segment files on disk. Nothing imports the broker's internals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tests.brokerproc import BrokerProcess, free_port

T = TypeVar("T")

# Short timers so that failures are detected in seconds (ZooKeeper's tickTime is 500 ms in the
# test server, so sessions may be as short as 1 s).
DEFAULTS: dict[str, str] = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "2000",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",  # Kafka's 50 would only make start-up slower here
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}

POLL_INTERVAL = 0.05


def _key(k: str) -> str:
    """`min_insync_replicas` → `min.insync.replicas` (Kafka's broker keys contain no `_`)."""
    return k if "." in k else k.replace("_", ".")


# Where broker i runs: the address it listens on and a command prefix to start it through
# (e.g. into a network namespace of its own); by default 127.0.0.1, started directly.
Placement = Callable[[int], tuple[str, list[str]]]


class Cluster:
    def __init__(self, root: Path, zk_hosts: str, n: int = 3, overrides: dict[str, Any] | None = None,
                 place: Placement | None = None) -> None:
        self.root = root
        self.chroot = f"/samsa-{uuid.uuid4().hex[:10]}"
        self.zk_connect = zk_hosts + self.chroot
        self.overrides = {_key(k): str(v) for k, v in (overrides or {}).items()}
        self.brokers: list[BrokerProcess] = []
        self.paused: set[int] = set()
        for i in range(n):
            props = {**DEFAULTS, **self.overrides, "broker.id": str(i), "zookeeper.connect": self.zk_connect}
            host, wrap = place(i) if place is not None else ("127.0.0.1", [])
            self.brokers.append(BrokerProcess(root / f"broker{i}", props, port=free_port(), host=host, wrap=wrap))
        # The test's own ZooKeeper client, outside the chroot: it must work before a broker has
        # created the chroot and after every broker is gone.
        self.zk = KazooClient(hosts=zk_hosts, timeout=10)
        self.zk.start(timeout=15)

    # --- processes --------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.brokers)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def live_bootstrap(self) -> str:
        """The brokers that run and are not paused (a paused one accepts TCP but never answers)."""
        return ",".join(b.bootstrap for i, b in enumerate(self.brokers) if self.alive(i) and i not in self.paused)

    def broker(self, i: int) -> BrokerProcess:
        return self.brokers[i]

    def alive(self, i: int) -> bool:
        p = self.brokers[i].proc
        return p is not None and p.poll() is None

    def start_all(self, timeout: float = 30.0, parallel: bool = False) -> Cluster:
        """Start every broker (one after the other, or all at once with `parallel`) and wait
        until all are registered in ZooKeeper and one of them is the controller."""
        if not parallel:
            for b in self.brokers:
                b.start(timeout)
            return self._wait_ready(timeout)
        errors: list[BaseException] = []

        def start(b: BrokerProcess) -> None:
            try:
                b.start(timeout)
            except BaseException as e:  # reported below, with the logs
                errors.append(e)

        threads = [threading.Thread(target=start, args=(b,)) for b in self.brokers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> Cluster:
        self.wait_registered(range(self.n), timeout)
        self.wait_for(lambda: self.controller() is not None, timeout, "a controller is elected")
        self.wait_metadata_brokers(range(self.n), timeout)
        return self

    def start(self, i: int, timeout: float = 30.0) -> BrokerProcess:
        b = self.brokers[i].start(timeout)
        self.wait_registered([i], timeout)
        return b

    def kill9(self, i: int) -> None:
        self.paused.discard(i)
        self.brokers[i].kill9()

    def sigterm(self, i: int, timeout: float = 30.0) -> int:
        """Controlled shutdown: SIGTERM and wait for the exit code."""
        return self.brokers[i].stop(timeout)

    def pause(self, i: int) -> None:
        p = self.brokers[i].proc
        assert p is not None
        os.kill(p.pid, signal.SIGSTOP)
        self.paused.add(i)

    def resume(self, i: int) -> None:
        p = self.brokers[i].proc
        assert p is not None
        os.kill(p.pid, signal.SIGCONT)
        self.paused.discard(i)

    def close(self) -> None:
        """Kill every broker this cluster started (by process object, never by name)."""
        for i, b in enumerate(self.brokers):
            if i in self.paused and b.proc is not None and b.proc.poll() is None:
                os.kill(b.proc.pid, signal.SIGCONT)
            b.close()
        self.paused.clear()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            pass

    # --- ZooKeeper state --------------------------------------------------------------------
    def _zget(self, path: str) -> bytes | None:
        try:
            return self.zk.get(self.chroot + path)[0]
        except NoNodeError:
            return None

    def registered(self) -> set[int]:
        try:
            return {int(c) for c in self.zk.get_children(self.chroot + "/brokers/ids")}
        except NoNodeError:
            return set()

    def wait_registered(self, ids: Iterable[int], timeout: float = 30.0) -> None:
        want = set(ids)
        self.wait_for(lambda: want <= self.registered(), timeout, f"brokers {sorted(want)} registered in ZooKeeper")

    def controller(self) -> int | None:
        raw = self._zget("/controller")
        return None if raw is None else int(json.loads(raw)["brokerid"])

    def controller_epoch(self) -> int | None:
        raw = self._zget("/controller_epoch")
        return None if raw is None else int(raw)

    def assignment(self, topic: str) -> dict[int, list[int]]:
        raw = self._zget(f"/brokers/topics/{topic}")
        if raw is None:
            return {}
        return {int(p): list(r) for p, r in json.loads(raw)["partitions"].items()}

    def state(self, topic: str, p: int = 0) -> dict[str, Any] | None:
        """`/brokers/topics/<t>/partitions/<p>/state`: leader, leader_epoch, isr, controller_epoch."""
        raw = self._zget(f"/brokers/topics/{topic}/partitions/{p}/state")
        return None if raw is None else json.loads(raw)

    def leader_of(self, topic: str, p: int = 0) -> int | None:
        s = self.state(topic, p)
        return None if s is None or s["leader"] < 0 else int(s["leader"])

    def isr(self, topic: str, p: int = 0) -> list[int]:
        s = self.state(topic, p)
        return [] if s is None else list(s["isr"])

    def followers(self, topic: str, p: int = 0) -> list[int]:
        leader = self.leader_of(topic, p)
        return [r for r in self.assignment(topic)[p] if r != leader]

    def wait_full_isr(self, topic: str, partitions: Iterable[int] | None = None, timeout: float = 30.0) -> None:
        parts = list(partitions) if partitions is not None else sorted(self.assignment(topic))

        def full() -> bool:
            assignment = self.assignment(topic)
            for p in parts:
                s = self.state(topic, p)
                if s is None or s["leader"] < 0 or sorted(s["isr"]) != sorted(assignment[p]):
                    return False
            return True

        self.wait_for(full, timeout, f"every replica of {topic} {parts} in the ISR")

    def wait_leader_change(self, topic: str, p: int, old: int, timeout: float = 30.0) -> int:
        """A live leader other than `old` (and not a paused process)."""

        found: list[int] = []

        def moved() -> bool:  # (a bool: broker 0 is falsy)
            leader = self.leader_of(topic, p)
            if leader is not None and leader != old and leader not in self.paused:
                found.append(leader)
                return True
            return False

        self.wait_for(moved, timeout, f"leadership of {topic}-{p} moves away from broker {old}")
        return found[-1]

    # --- client metadata --------------------------------------------------------------------
    def admin(self, bootstrap: str | None = None) -> AdminClient:
        # log_level 2: no "connection refused" lines from probes that outlive a killed broker
        return AdminClient({"bootstrap.servers": bootstrap or self.live_bootstrap(), "log_level": 2})

    def metadata_brokers(self, via: int) -> set[int]:
        """The broker ids broker `via` lists in its Metadata responses."""
        return set(self.admin(self.brokers[via].bootstrap).list_topics(timeout=5).brokers)

    def wait_metadata_brokers(self, ids: Iterable[int], timeout: float = 30.0) -> None:
        """Every broker in `ids` tells clients about exactly the brokers `ids` (metadata is
        propagated asynchronously, as in Kafka)."""
        want = set(ids)
        for i in want:
            self.wait_for(lambda i=i: self.metadata_brokers(i) == want, timeout,
                          lambda i=i: f"broker {i}'s metadata lists brokers {sorted(want)} "
                                      f"(lists {self._safe(lambda: self.metadata_brokers(i))})")

    def metadata_leader(self, topic: str, p: int = 0, via: int | None = None) -> int | None:
        """The leader as broker `via` (or any live broker) tells clients in Metadata."""
        boot = self.brokers[via].bootstrap if via is not None else self.live_bootstrap()
        md = self.admin(boot).list_topics(topic, timeout=5)
        tm = md.topics.get(topic)
        if tm is None or tm.error is not None or p not in tm.partitions:
            return None
        pm = tm.partitions[p]
        return pm.leader if pm.leader >= 0 and pm.error is None else None

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, configs: dict[str, str] | None = None,
                     timeout: float = 30.0, wait_isr: bool = True,
                     assignment: list[list[int]] | None = None) -> None:
        """CreateTopics through a real AdminClient (with an explicit replica `assignment`, one
        list of broker ids per partition, the first being the preferred leader), then wait until
        every partition has a leader in ZooKeeper (and, with `wait_isr`, all its replicas in the
        ISR) and every live broker tells clients that leader."""
        if assignment is not None:
            partitions = len(assignment)
            new = NewTopic(name, partitions, replica_assignment=assignment, config=configs or {})
        else:
            new = NewTopic(name, partitions, rf, config=configs or {})
        admin = self.admin()  # keep a reference: a collected AdminClient fails its futures
        fut = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[name]
        fut.result(timeout)
        if wait_isr:
            self.wait_full_isr(name, range(partitions), timeout)
        else:
            self.wait_for(lambda: all(self.leader_of(name, p) is not None for p in range(partitions)),
                          timeout, f"every partition of {name} has a leader")
        for i in range(self.n):
            if self.alive(i) and i not in self.paused:
                for p in range(partitions):
                    self.wait_for(lambda p=p, i=i: self.metadata_leader(name, p, via=i) == self.leader_of(name, p),
                                  timeout, f"broker {i} serves metadata with the leader of {name}-{p}")

    # --- waiting ----------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[], T], timeout: float = 30.0,
                 what: str | Callable[[], str] = "condition") -> T:
        """Poll `predicate` until it returns something truthy, and return that (so a predicate
        must not return a broker id: 0 is falsy).

        The state lives in other processes (brokers, ZooKeeper), which offer the test no event
        to wait on, so this polls them with a short sleep in between. An exception raised by the
        predicate counts as "not yet" and is shown if the time runs out. `what` may be a
        callable, evaluated only then (to describe the state at the time of failure).
        """
        deadline = time.monotonic() + timeout
        last: object = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
                last = value
            except Exception as e:  # noqa: BLE001 - e.g. a broker that is still starting
                last = e
            if time.monotonic() >= deadline:
                desc = what() if callable(what) else what
                raise AssertionError(f"timed out after {timeout} s waiting until {desc}; last: {last!r}\n"
                                     + self.report())
            time.sleep(POLL_INTERVAL)

    def report(self, lines: int = 25) -> str:
        out = [f"controller: {self._safe(self.controller)}, registered: {sorted(self._safe(self.registered) or [])}"]
        for i, b in enumerate(self.brokers):
            state = "paused" if i in self.paused else ("up" if self.alive(i) else "down")
            tail = "\n    ".join(b.log_text().splitlines()[-lines:])
            out.append(f"--- broker {i} ({state}, {b.bootstrap}) log tail:\n    {tail}")
        return "\n".join(out)

    @staticmethod
    def _safe(f: Callable[[], Any]) -> Any:
        try:
            return f()
        except Exception as e:  # noqa: BLE001
            return e

    # --- data -------------------------------------------------------------------------------
    def partition_dir(self, i: int, topic: str, p: int = 0) -> Path:
        return self.brokers[i].log_dir / f"{topic}-{p}"

    def segment_bytes(self, i: int, topic: str, p: int = 0) -> bytes:
        """Broker i's copy of a partition: its `*.log` segments concatenated in offset order
        (replicas may roll segments at different places; the bytes must be the same)."""
        d = self.partition_dir(i, topic, p)
        return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))

    def replica_diff(self, topic: str, p: int = 0) -> str | None:
        """None when every replica's log is byte-identical, else a one-line description."""
        copies = {i: self.segment_bytes(i, topic, p) for i in self.assignment(topic)[p]}
        ref_id, ref = next(iter(copies.items()))
        for i, data in copies.items():
            if data != ref:
                at = next((k for k in range(min(len(ref), len(data))) if ref[k] != data[k]), min(len(ref), len(data)))
                sizes = {b: len(d) for b, d in copies.items()}
                return f"{topic}-{p}: broker {i} differs from broker {ref_id} at byte {at} (sizes {sizes})"
        return None

    def wait_replicas_identical(self, topic: str, partitions: Iterable[int] = (0,), timeout: float = 30.0) -> None:
        for p in partitions:
            # Followers fetch asynchronously: once idle, their files converge on the leader's.
            self.wait_for(lambda p=p: self.replica_diff(topic, p) is None, timeout,
                          lambda p=p: f"the replicas of {topic}-{p} are byte-identical "
                                      f"({self._safe(lambda: self.replica_diff(topic, p))})")

    def consume_all(self, topic: str, partitions: Iterable[int] = (0,), bootstrap: str | None = None,
                    timeout: float = 30.0) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
        """Every record of the partitions from the beginning up to the high watermark, as
        (offset, key, value), read by a real consumer (assign, no group membership)."""
        parts = list(partitions)
        c = Consumer({
            "bootstrap.servers": bootstrap or self.live_bootstrap(),
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "topic.metadata.refresh.interval.ms": 1000,
            **({"debug": os.environ["SAMSA_TEST_RDKAFKA_DEBUG"]} if os.environ.get("SAMSA_TEST_RDKAFKA_DEBUG") else {}),
        })
        try:
            ends: dict[int, int] = {}
            for p in parts:
                ends[p] = self.wait_for(lambda p=p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)
                                        or None, timeout, f"the high watermark of {topic}-{p}")[1]
            got: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {p: [] for p in parts}
            c.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
            pending = {p for p in parts if ends[p] > 0}
            deadline = time.monotonic() + timeout
            while pending:
                if time.monotonic() > deadline:
                    raise AssertionError(f"consumed only {({p: len(v) for p, v in got.items()})} of {ends} "
                                         f"records of {topic} in {timeout} s\n" + self.report())
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= ends[msg.partition()]:
                            pending.discard(msg.partition())
                        continue
                    if msg.error().fatal():
                        raise KafkaException(msg.error())
                    continue  # transient (a leader moving): the consumer retries by itself
                p = msg.partition()
                if msg.offset() < ends[p]:
                    got[p].append((msg.offset(), msg.key(), msg.value()))
                if msg.offset() + 1 >= ends[p]:
                    pending.discard(p)
            return got
        finally:
            c.close()

    # --- tools ------------------------------------------------------------------------------
    def topics_tool(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """`samsa topics --bootstrap-server <live brokers> ARGS`."""
        return subprocess.run([sys.executable, "-m", "samsa", "topics", "--bootstrap-server", self.live_bootstrap(),
                               *args], capture_output=True, text=True, timeout=timeout)


def produce_sync(bootstrap: str, topic: str, values: Iterable[bytes], partition: int = 0, acks: str = "all",
                 idempotent: bool = True, retries: int | None = None, key: bytes | None = None,
                 timeout: float = 60.0, **conf_extra: Any) -> list[tuple[bytes, int, KafkaError | None]]:
    """Produce `values` with a real producer and wait for every delivery report:
    [(value, offset or -1, error or None)] in produce order."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": idempotent,
                            "linger.ms": 5, "message.timeout.ms": int(timeout * 1000) - 5000,
                            "topic.metadata.refresh.interval.ms": 1000}
    if retries is not None:
        conf["retries"] = retries
    conf.update(conf_extra)
    p = Producer(conf)
    reports: dict[int, tuple[bytes, int, KafkaError | None]] = {}
    vals = list(values)
    for i, v in enumerate(vals):
        def report(err: KafkaError | None, msg: Any, i: int = i, v: bytes = v) -> None:
            reports[i] = (v, -1 if err is not None else msg.offset(), err)
        p.produce(topic, value=v, key=key, partition=partition, on_delivery=report)
        p.poll(0)
    left = p.flush(timeout)
    assert left == 0, f"{left} of {len(vals)} records still undelivered after {timeout} s"
    return [reports[i] for i in range(len(vals))]
