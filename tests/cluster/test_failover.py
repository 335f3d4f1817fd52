"""The cluster's invariant under faults, with real processes: with acks=all, RF=3 and
min.insync.replicas=2, no acknowledged record is ever lost or reordered, and the replicas never
diverge (their logs are byte-identical once healed).

An idempotent producer writes a numbered sequence to one partition from its own thread and
records every acknowledgement (sequence number, offset); meanwhile a fault is injected: kill -9
of the leader, of a follower, of the controller; SIGTERM of the leader (controlled shutdown);
SIGSTOP of the leader past its ZooKeeper session (a zombie leader); ZooKeeper itself killed for a
while. After healing, the partition is read from the beginning and compared with what was
acknowledged. Run with `-s` to see the measured failover times.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewTopic

from samsa.protocol.records import build_batch
from tests.broker.test_bad_input import produce as raw_produce
from tests.cluster.cluster import Cluster
from tests.rawclient import RawClient
from tests.zk.conftest import ZooKeeperServer, launcher_cmd, serving, start_server

pytestmark = pytest.mark.slow

FAILOVER_LIMIT = 30.0  # generous: Kafka's usual is a few seconds; the sessions here last 3 s


class AckingProducer:
    """A confluent_kafka producer (acks=all, idempotent) writing b"%08d" % seq to partition 0
    from its own thread, recording the acknowledgements its delivery callbacks report."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.producer = Producer({
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 120000,  # never give up on a record during the test
            # A paused broker never answers: give up on its in-flight requests after 5 s (librdkafka
            # times requests out after socket.timeout.ms, 60 s by default) and retry elsewhere.
            "request.timeout.ms": 5000,
            "socket.timeout.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self._on_error,
            **({"debug": os.environ["SAMSA_TEST_RDKAFKA_DEBUG"]} if os.environ.get("SAMSA_TEST_RDKAFKA_DEBUG") else {}),
        })
        self.cond = threading.Condition()
        self.sent_at: list[float] = []  # by sequence number
        self.acked: list[tuple[int, int, float]] = []  # (seq, offset, when)
        self.failed: list[tuple[int, KafkaError]] = []
        self.client_errors: list[KafkaError] = []
        self.stopping = threading.Event()
        self.left: int | None = None
        self.thread = threading.Thread(target=self._run, name="acking-producer", daemon=True)

    def _on_error(self, err: KafkaError) -> None:
        with self.cond:
            self.client_errors.append(err)

    def _on_delivery(self, seq: int, err: KafkaError | None, msg: Any) -> None:
        now = time.monotonic()
        with self.cond:
            if err is None:
                self.acked.append((seq, msg.offset(), now))
            else:
                self.failed.append((seq, err))
            self.cond.notify_all()

    def _run(self) -> None:
        seq = 0
        while not self.stopping.is_set():
            if len(self.producer) < 2000:  # bounded backlog while a partition has no leader
                with self.cond:
                    self.sent_at.append(time.monotonic())
                self.producer.produce(self.topic, value=b"%08d" % seq, key=b"k", partition=0,
                                      on_delivery=partial(self._on_delivery, seq))
                seq += 1
            self.producer.poll(0.003)  # serves the delivery callbacks; also paces the writes
        self.left = self.producer.flush(90)

    def start(self) -> AckingProducer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(100)
        assert not self.thread.is_alive(), "the producer did not finish flushing"

    def wait_acks_after(self, t0: float, n: int = 1, timeout: float = FAILOVER_LIMIT) -> float:
        """Block until `n` records enqueued after `t0` are acknowledged (woken by the delivery
        callbacks); return when the first of them was."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                times = [at for seq, _, at in self.acked if self.sent_at[seq] > t0]
                if len(times) >= n:
                    return min(times)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.failed:
                    break
                self.cond.wait(min(remaining, 0.5))
        raise AssertionError(
            f"{len(times)} of {n} records written after the fault acknowledged in {timeout} s; "
            f"delivery errors: {[(s, e.str()) for s, e in self.failed[:3]]}; "
            f"client errors: {[e.str() for e in self.client_errors[-3:]]}\n" + self.cluster.report()
        )


@dataclass
class Fault:
    down: set[int] = field(default_factory=set)  # brokers to start again when healing
    zombie: tuple[int, int] | None = None  # (error_code, base_offset) of the zombie's answer


def verify(c: Cluster, topic: str, prod: AckingProducer, fault: Fault) -> None:
    assert prod.left == 0, f"{prod.left} records never delivered"
    fatal = [e for e in prod.client_errors if e.fatal()]
    assert not fatal, f"the idempotent producer hit fatal errors: {[e.str() for e in fatal]}"
    assert not prod.failed, f"{len(prod.failed)} deliveries failed: {[(s, e.str()) for s, e in prod.failed[:5]]}"
    assert len(prod.acked) == len(prod.sent_at)

    log = c.consume_all(topic, [0])[0]
    at = {o: (k, v) for o, k, v in log}
    seqs = [int(v) for _, k, v in log if k == b"k" and v is not None]
    dups = sorted(s for s, n in Counter(seqs).items() if n > 1)
    assert not dups, f"{len(dups)} records stored twice (idempotence broken), first: {dups[:5]}"
    disorder = [(a, b) for a, b in zip(seqs, seqs[1:]) if b < a]
    assert not disorder, f"records reordered in the log, first: {disorder[:5]}"
    lost = [(s, o, at.get(o)) for s, o, _ in prod.acked if at.get(o) != (b"k", b"%08d" % s)]
    assert not lost, (f"{len(lost)} of {len(prod.acked)} acknowledged records lost or moved "
                      f"(seq, acked offset, found there), first: {lost[:5]}")
    assert set(seqs) == {s for s, _, _ in prod.acked}, "the log holds records that were never produced"
    if fault.zombie is not None and fault.zombie[0] == 0:
        # The zombie claimed an acks=all write: it must then be on the leader elected meanwhile.
        assert at.get(fault.zombie[1]) == (b"zombie", b"zombie-write"), (
            f"the zombie leader acknowledged an acks=all write at offset {fault.zombie[1]} that was lost: "
            f"found {at.get(fault.zombie[1])}")
    c.wait_replicas_identical(topic)


# --- the faults ----------------------------------------------------------------------------------


def kill9_leader(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    leader = c.leader_of(t, 0)
    assert leader is not None
    epoch = c.state(t, 0)["leader_epoch"]  # type: ignore[index]
    t0 = time.monotonic()
    c.kill9(leader)
    first = prod.wait_acks_after(t0)
    print(f"\nfailover: kill -9 of leader {leader} -> first acks=all write on the new leader: {first - t0:.2f} s")
    c.wait_leader_change(t, 0, leader)
    assert c.state(t, 0)["leader_epoch"] > epoch  # type: ignore[index]
    assert first - t0 < FAILOVER_LIMIT
    return Fault(down={leader})


def kill9_follower(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    follower = next(f for f in c.followers(t, 0) if f != c.controller())  # a follower only
    leader = c.leader_of(t, 0)
    t0 = time.monotonic()
    c.kill9(follower)
    c.wait_for(lambda: follower not in c.isr(t, 0), 20, f"broker {follower} leaves the ISR")
    first = prod.wait_acks_after(t0)
    print(f"\nkill -9 of follower {follower}: first acks=all write after it: {first - t0:.2f} s")
    assert c.leader_of(t, 0) == leader  # losing a follower moves no leadership
    return Fault(down={follower})


def kill9_controller(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    """The controller, a follower of the partition (see LAYOUTS)."""
    controller, epoch = c.controller(), c.controller_epoch()
    assert controller is not None and epoch is not None
    was_leader = c.leader_of(t, 0) == controller
    t0 = time.monotonic()
    c.kill9(controller)
    c.wait_for(lambda: c.controller() not in (None, controller) and (c.controller_epoch() or 0) > epoch, 20,
               "another broker becomes the controller with a higher epoch")
    if was_leader:
        c.wait_leader_change(t, 0, controller)
    first = prod.wait_acks_after(t0)
    print(f"\nkill -9 of controller {controller} (leader: {was_leader}): first acks=all write after it: "
          f"{first - t0:.2f} s")
    return Fault(down={controller})


def sigterm_leader(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    leader = c.leader_of(t, 0)
    assert leader is not None
    t0 = time.monotonic()
    assert c.sigterm(leader) == 0
    # Controlled shutdown: the controller moved the leadership (and took the broker out of the
    # ISR) before the broker was allowed to exit.
    state = c.state(t, 0)
    assert state is not None and state["leader"] not in (leader, -1), f"at exit: {state}"
    assert leader not in state["isr"], f"at exit: {state}"
    first = prod.wait_acks_after(t0)
    print(f"\ncontrolled shutdown of leader {leader}: exit after {time.monotonic() - t0:.2f} s, "
          f"first acks=all write after SIGTERM: {first - t0:.2f} s")
    return Fault(down={leader})


def sigstop_leader(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    leader = c.leader_of(t, 0)
    assert leader is not None
    epoch = c.state(t, 0)["leader_epoch"]  # type: ignore[index]
    t0 = time.monotonic()
    c.pause(leader)
    new = c.wait_leader_change(t, 0, leader)  # its session expired, the controller replaced it
    assert c.state(t, 0)["leader_epoch"] > epoch  # type: ignore[index]
    first = prod.wait_acks_after(t0)
    print(f"\nSIGSTOP of leader {leader}: broker {new} leads after its session expired; "
          f"first acks=all write: {first - t0:.2f} s")
    # The zombie wakes up, maybe still believing it leads. An acks=all write sent straight to
    # it must not be acknowledged unless the new leader has it (checked after healing).
    c.resume(leader)
    batch = build_batch([(b"zombie", b"zombie-write", [], int(time.time() * 1000))])
    answer: tuple[int, int] | None = None
    try:
        with RawClient(c.broker(leader).bootstrap, timeout=15) as rc:
            r = raw_produce(rc, t, batch)
            answer = (int(r.error_code), int(r.base_offset))  # type: ignore[attr-defined]
    except OSError:
        pass  # no answer: not acknowledged
    print(f"the zombie answered an acks=all write with (error_code, base_offset) = {answer}")
    return Fault(zombie=answer)


def kill9_controller_leader(c: Cluster, t: str, prod: AckingProducer) -> Fault:
    """The controller, also the partition's leader (see LAYOUTS)."""
    assert c.leader_of(t, 0) == c.controller()
    return kill9_controller(c, t, prod)


FAULTS: dict[str, Callable[[Cluster, str, AckingProducer], Fault]] = {
    f.__name__: f for f in (kill9_leader, kill9_follower, kill9_controller, kill9_controller_leader,
                            sigterm_leader, sigstop_leader)
}
# Each fault hits one role: the topic's replicas are assigned so that the controller leads the
# partition only where that is the point, and is a follower everywhere else.
CONTROLLER_LEADS = {"kill9_controller_leader"}


def assignment_for(c: Cluster, fault_name: str) -> list[list[int]]:
    controller = c.controller()
    assert controller is not None
    others = [i for i in range(c.n) if i != controller]
    if fault_name in CONTROLLER_LEADS:
        return [[controller, *others]]
    return [[others[0], controller, *others[1:]]]


@pytest.mark.parametrize("fault_name", list(FAULTS))
def test_no_acknowledged_record_is_lost(cluster, fault_name: str) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = cluster(3, min_insync_replicas=2)
    t = f"f-{uuid.uuid4().hex[:8]}"
    c.create_topic(t, configs={"min.insync.replicas": "2"}, assignment=assignment_for(c, fault_name))
    prod = AckingProducer(c, t).start()
    try:
        prod.wait_acks_after(0.0, 200)
        fault = FAULTS[fault_name](c, t, prod)
        prod.wait_acks_after(time.monotonic(), 100)  # the cluster keeps taking writes
        for i in range(c.n):  # nothing else died
            assert c.alive(i) or i in fault.down, f"broker {i} exited by itself\n" + c.report()
        for i in fault.down:
            c.start(i)
        c.wait_full_isr(t, timeout=40)
        prod.wait_acks_after(time.monotonic(), 100)
    finally:
        prod.stop()
    verify(c, t, prod, fault)


# --- ZooKeeper itself down -------------------------------------------------------------------------


def restart_zookeeper(zk: ZooKeeperServer, timeout: float = 30.0) -> None:
    """Start the same server again: same zoo.cfg, so the same port and data (and sessions)."""
    cfg = Path(zk.log).parent / "zoo.cfg"
    with open(zk.log, "ab") as out:
        zk.proc = subprocess.Popen(launcher_cmd("start", str(cfg)), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while not serving(zk.port):
        assert zk.proc.poll() is None, f"ZooKeeper exited: {zk.log.read_text()[-2000:]}"
        assert time.monotonic() < deadline, "ZooKeeper did not come back"
        time.sleep(0.02)  # polling its port: a separate process


@pytest.fixture
def own_zookeeper(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A ZooKeeper of this test's own, since the test kills it (the session's is shared)."""
    d = tmp_path / "own-zk"
    d.mkdir()
    zk = start_server(d)
    yield zk
    zk.stop()


def test_brokers_keep_serving_while_zookeeper_is_down(own_zookeeper: ZooKeeperServer, cluster) -> None:  # type: ignore[no-untyped-def]
    zk = own_zookeeper
    c: Cluster = cluster(3, zk_hosts=zk.hosts, min_insync_replicas=2)
    t = f"z-{uuid.uuid4().hex[:8]}"
    c.create_topic(t, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    prod = AckingProducer(c, t).start()
    try:
        prod.wait_acks_after(0.0, 200)
        t0 = time.monotonic()
        zk.proc.kill()  # kill -9 of ZooKeeper
        zk.proc.wait(10)
        # Leaders keep serving what they lead; the ISR cannot change, and needs not.
        first = prod.wait_acks_after(t0, 100, timeout=10)
        print(f"\nZooKeeper down: first acks=all write after it: {first - t0:.2f} s")
        # Keep it away longer than the brokers' session timeout (3 s): the outage's length is
        # the fault itself, there is no event to wait for.
        time.sleep(max(0.0, 4.5 - (time.monotonic() - t0)))
        assert all(c.alive(i) for i in range(3)), "a broker died while ZooKeeper was down\n" + c.report()
        prod.wait_acks_after(time.monotonic(), 50, timeout=10)
        restart_zookeeper(zk)
        t_back = time.monotonic()
        c.wait_registered(range(3), 30)  # brokers recover when it returns
        c.wait_for(lambda: c.controller() is not None, 30, "a controller after ZooKeeper returns")
        print(f"ZooKeeper back after {t_back - t0:.1f} s: brokers registered and a controller "
              f"{time.monotonic() - t_back:.2f} s later")
        prod.wait_acks_after(t_back, 100)
        c.wait_full_isr(t, timeout=40)
        assert all(c.alive(i) for i in range(3)), "a broker died after ZooKeeper came back\n" + c.report()
        prod.wait_acks_after(time.monotonic(), 100)
    finally:
        prod.stop()
    verify(c, t, prod, Fault())

    # What needs ZooKeeper works again (a broker may still be reconnecting: retry until it does).
    errors: list[str] = []

    def create() -> bool:
        admin = c.admin()
        fut = admin.create_topics([NewTopic(f"{t}-after", 1, 3)], request_timeout=10, operation_timeout=10)
        try:
            fut[f"{t}-after"].result(15)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # a retried request that did it
                errors.append(e.args[0].str())
                return False
        return True

    c.wait_for(create, 40, lambda: f"a topic can be created after ZooKeeper returned (errors: {errors})")
    c.wait_full_isr(f"{t}-after")
