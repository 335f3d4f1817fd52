"""read_committed consumers of real clients against the log side of transactions: the
transactions are written over raw requests (transactional batches through Produce, markers
through WriteTxnMarkers, as a coordinator would), and confluent-kafka (librdkafka) and
kafka-python read them. Both must skip the aborted transaction's records and the control
records, deliver the committed ones, and stop at an open transaction until it commits."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, TopicPartition

from samsa.protocol.records import build_batch
from tests.broker.test_bad_input import create_topic
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient
from tests.txnwire import init_pid, produce, txn_batch, write_markers

COMMITTED = [b"p0", b"b0", b"b1", b"p1"]
EVERYTHING = [b"p0", b"a0", b"a1", b"b0", b"b1", b"p1", b"c0"]
QUIET_S = 1.5  # how long a record that must not come is waited for


def write_transactions(bootstrap: str, topic: str) -> Callable[[], None]:
    """p0 | a0 a1 (aborted) | b0 | abort a | b1 | commit b | p1 | c0 (open). Returns the commit of c."""
    with RawClient(bootstrap) as c:
        create_topic(c, topic)
        (a, ea), (b, eb), (x, ex) = init_pid(c), init_pid(c), init_pid(c)

        def plain(v: bytes) -> None:
            assert produce(c, topic, build_batch([(None, v, [], int(time.time() * 1000))])).error_code == 0

        plain(b"p0")
        assert produce(c, topic, txn_batch(a, ea, 0, [b"a0", b"a1"])).error_code == 0
        assert produce(c, topic, txn_batch(b, eb, 0, [b"b0"])).error_code == 0
        assert write_markers(c, a, ea, False, {topic: [0]}) == {(topic, 0): 0}
        assert produce(c, topic, txn_batch(b, eb, 1, [b"b1"])).error_code == 0
        assert write_markers(c, b, eb, True, {topic: [0]}) == {(topic, 0): 0}
        plain(b"p1")
        assert produce(c, topic, txn_batch(x, ex, 0, [b"c0"])).error_code == 0

    def commit_c() -> None:
        with RawClient(bootstrap) as c:
            assert write_markers(c, x, ex, True, {topic: [0]}) == {(topic, 0): 0}

    return commit_c


def _ck_consumer(bootstrap: str, topic: str, isolation: str) -> Consumer:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{isolation}",
                     "enable.auto.commit": False, "isolation.level": isolation, "fetch.wait.max.ms": 100})
    cons.assign([CkTopicPartition(topic, 0, 0)])
    return cons


def _ck_poll(cons: Consumer, want: int, timeout: float) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        msg = cons.poll(0.2)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    return got


def test_confluent_kafka_read_committed(broker: BrokerProcess, topic_name: str) -> None:
    commit_c = write_transactions(broker.bootstrap, topic_name)
    uncommitted = _ck_consumer(broker.bootstrap, topic_name, "read_uncommitted")
    committed = _ck_consumer(broker.bootstrap, topic_name, "read_committed")
    try:
        assert _ck_poll(uncommitted, len(EVERYTHING), 20) == EVERYTHING
        assert _ck_poll(committed, len(COMMITTED), 20) == COMMITTED
        assert _ck_poll(committed, 1, QUIET_S) == []  # c0 is undecided: not delivered
        commit_c()
        assert _ck_poll(committed, 1, 20) == [b"c0"]
    finally:
        uncommitted.close()
        committed.close()


def _kp_consumer(bootstrap: str, topic: str, isolation: str) -> KafkaConsumer:
    cons = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", fetch_max_wait_ms=100, isolation_level=isolation,
                         client_id="compat-kafka-python-txn")
    tp = TopicPartition(topic, 0)
    cons.assign([tp])
    cons.seek(tp, 0)
    return cons


def _kp_poll(cons: KafkaConsumer, want: int, timeout: float) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for records in cons.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
    return got


def test_kafka_python_read_committed(broker: BrokerProcess, topic_name: str) -> None:
    commit_c = write_transactions(broker.bootstrap, topic_name)
    uncommitted = _kp_consumer(broker.bootstrap, topic_name, "read_uncommitted")
    committed = _kp_consumer(broker.bootstrap, topic_name, "read_committed")
    try:
        assert _kp_poll(uncommitted, len(EVERYTHING), 20) == EVERYTHING
        assert _kp_poll(committed, len(COMMITTED), 20) == COMMITTED
        assert _kp_poll(committed, 1, QUIET_S) == []
        commit_c()
        assert _kp_poll(committed, 1, 20) == [b"c0"]
        assert committed.position(TopicPartition(topic_name, 0)) == 10  # past c's commit marker (9)
    finally:
        uncommitted.close()
        committed.close()
