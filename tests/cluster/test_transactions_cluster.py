"""Transactions on a 3-broker ZooKeeper cluster (RF=3): exactly once through kill -9.

A consume-transform-produce loop (confluent-kafka: a read_committed consumer in a group and a
transactional producer committing the consumer's offsets in each transaction) copies 100,000
records from one topic to another while the coordinator of its transactional id and the
leaders of the output partitions are killed with kill -9 and restarted. Afterwards a
read_committed consumer finds every input record in the output exactly once: no loss, no
duplicate, nothing of an aborted or half-committed transaction.

Also: the coordinator's state survives its failover (`__transaction_state` replayed by the new
leader), and a transaction committed through the fault is complete on every replica.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from samsa.coordinator.records import partition_for
from tests.cluster.cluster import Cluster

pytestmark = pytest.mark.slow

TXN_PARTITIONS = 3
RECORDS = 100_000
OVERRIDES = {"transaction.state.log.num.partitions": str(TXN_PARTITIONS),
             "transaction.state.log.replication.factor": "3", "transaction.state.log.min.isr": "2",
             "min.insync.replicas": "2", "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


class Copier:
    """The exactly-once loop, with librdkafka's documented error handling: an abortable error
    aborts and rewinds the consumer to its committed offsets; a fatal one (fenced) starts a new
    producer, which fences the old one."""

    def __init__(self, bootstrap: str, src: str, dst: str, group: str, tid: str) -> None:
        self.bootstrap, self.src, self.dst, self.tid = bootstrap, src, dst, tid
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "isolation.level": "read_committed"})
        self.consumer.subscribe([src])
        self.producer = self._producer()
        self.commits = self.aborts = self.restarts = 0
        self.stage = "starting"  # what the loop is doing (said when the test times out)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _producer(self) -> Producer:
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tid, "linger.ms": 5,
                      # Short timeouts, as an exactly-once application tuned for fast failover sets
                      # them: a request stranded on a killed broker fails in seconds and the
                      # transaction is aborted and retried, not waited on for a minute.
                      "transaction.timeout.ms": 15000, "message.timeout.ms": 15000,
                      "request.timeout.ms": 5000,
                      # librdkafka (confluentinc/librdkafka#5511): a broker that a Metadata answer
                      # leaves out (the killed one, until it is back) is decommissioned, and when it
                      # was the cached group coordinator, send_offsets_to_transaction waits, past its
                      # own timeout (#5456), until some broker connection goes up or down; only then
                      # does it ask FindCoordinator again. Kafka leaves a dead broker out the same
                      # way. Closing idle connections after 5 s guarantees such a change.
                      "connections.max.idle.ms": 5000})
        for _ in range(60):
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if not e.args[0].retriable():
                    raise
        raise RuntimeError("init_transactions kept failing")

    def rewind(self) -> None:
        assignment = self.consumer.assignment()
        if not assignment:
            return
        for tp in self.consumer.committed(assignment, timeout=30):
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.stage = "consume"
                msgs = [m for m in self.consumer.consume(2000, 0.3) if not m.error()]
                if msgs:
                    self._copy(msgs)
        except BaseException as e:  # reported by the test
            self.error = e

    def _copy(self, msgs: list[Any]) -> None:
        while True:
            try:
                self.stage = "produce"
                self.producer.begin_transaction()
                for m in msgs:
                    self.producer.produce(self.dst, m.value(), key=m.key())
                self.stage = "send_offsets_to_transaction"
                self.producer.send_offsets_to_transaction(self.consumer.position(self.consumer.assignment()),
                                                          self.consumer.consumer_group_metadata(), 60)
                self._commit()
                self.commits += 1
                return
            except KafkaException as e:
                err: KafkaError = e.args[0]
                if err.fatal():
                    self.restarts += 1
                    self.producer = self._producer()
                elif err.txn_requires_abort():
                    self._abort()
                else:
                    raise
                self.rewind()
                return  # the rewound records come again

    def _commit(self) -> None:
        self.stage = "commit_transaction"
        for _ in range(60):
            try:
                self.producer.commit_transaction(60)
                return
            except KafkaException as e:
                if e.args[0].retriable() and not e.args[0].txn_requires_abort():
                    continue
                raise

    def _abort(self) -> None:
        self.stage = "abort_transaction"
        self.aborts += 1
        for _ in range(60):
            try:
                self.producer.abort_transaction(60)
                return
            except KafkaException as e:
                if e.args[0].retriable():
                    continue
                raise


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 120) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    end = time.monotonic() + timeout_s
    while time.monotonic() < end and not (len(out) >= expected and len(eof) == partitions):
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        eof.discard(m.partition())
        out.append(m.value())
    c.close()
    return out


def test_copy_exactly_once_through_kill9_of_coordinator_and_leaders(cluster: Callable[..., Cluster]) -> None:
    c = cluster(3, **OVERRIDES)
    src, dst, group, tid = "eos-in", "eos-out", "eos-copier", "eos-copier-tx"
    c.create_topic(src, 3, 3)
    c.create_topic(dst, 3, 3)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 20})
    for i in range(RECORDS):
        while True:
            try:
                p.produce(src, b"%06d" % i, key=b"%d" % (i % 97))
                break
            except BufferError:
                p.poll(0.1)
    assert p.flush(60) == 0

    copier = Copier(c.bootstrap, src, dst, group, tid)
    worker = threading.Thread(target=copier.run, daemon=True)
    worker.start()
    txn_partition = partition_for(tid, TXN_PARTITIONS)
    killed: list[str] = []
    try:
        c.wait_for(lambda: copier.commits >= 3 or copier.error, 60, "the copier commits")
        for round_ in range(3):
            tp = ("__transaction_state", txn_partition) if round_ != 1 else (dst, 1)  # or an output leader
            c.wait_for(lambda tp=tp: c.leader_of(*tp) is not None, 30, f"{tp[0]}-{tp[1]} has a leader")
            target = c.leader_of(*tp)
            assert target is not None
            before = copier.commits
            c.kill9(target)
            killed.append(f"broker {target}")
            # The partition fails over; then the broker comes back, as after a crash. (Kept down,
            # librdkafka waits for a dead group coordinator to return before asking for a new
            # one, about 2.5 min here: the stall is the client's, not this test's subject.)
            c.wait_for(lambda tp=tp, t=target: c.leader_of(*tp) not in (None, t), 30,
                       f"{tp[0]}-{tp[1]} fails over from broker {target}")
            c.start(target)
            # (Without the producer's connections.max.idle.ms, once in three full-suite runs the
            # copier sat in send_offsets_to_transaction for over 200 s here: see _producer.)
            c.wait_for(lambda: copier.commits >= before + 2 or copier.error, 120,
                       lambda: f"the copier commits after broker {target} was killed ({copier.commits} commits, "
                               f"{copier.aborts} aborts, {copier.restarts} restarts, now in {copier.stage})")
            # Every replica back in sync before the next kill (two brokers down at once, or one
            # down before the other has caught up, leaves partitions without an in-sync replica).
            for topic, n in ((dst, 3), (src, 3), ("__consumer_offsets", 6), ("__transaction_state", TXN_PARTITIONS)):
                c.wait_full_isr(topic, range(n), 60)
        c.wait_for(lambda: _lag(c.bootstrap, group, src) == 0 or copier.error, 180,
                   lambda: f"the copier catches up (lag {_lag(c.bootstrap, group, src)})")
    finally:
        copier.stop.set()
        worker.join(60)
    assert copier.error is None, f"the copier failed: {copier.error!r}"
    out = read_committed(c.bootstrap, dst, 3, RECORDS)
    counts = Counter(out)
    missing = RECORDS - len(counts)
    dups = sum(n - 1 for n in counts.values() if n > 1)
    assert (missing, dups) == (0, 0), (f"{missing} missing, {dups} duplicated after killing {killed}; "
                                       f"{copier.commits} commits, {copier.aborts} aborts, {copier.restarts} restarts")
    assert set(counts) == {b"%06d" % i for i in range(RECORDS)}


def _lag(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        committed = c.committed(tps, timeout=10)
        lag = 0
        for tp in committed:
            _, high = c.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)
            lag += high - max(tp.offset, 0)
        return lag
    except KafkaException:
        return -1
    finally:
        c.close()
