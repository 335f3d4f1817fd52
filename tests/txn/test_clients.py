"""Transactions with real clients: confluent-kafka (librdkafka), kafka-python and kafkajs each
commit and abort; a read_committed consumer sees only committed records, a read_uncommitted one
everything except the control records; and a consume-transform-produce loop commits its
consumer offsets inside its transactions (send_offsets_to_transaction)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

KAFKAJS_TXN = Path(__file__).resolve().parents[2] / "compat" / "kafkajs" / "txn.js"


def make_topics(bootstrap: str, *names: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        f.result(10)


def read_values(bootstrap: str, topic: str, isolation: str, expected: int, timeout_s: float = 15.0,
                group: str | None = None) -> list[bytes]:
    """Every value of `topic` a fresh consumer with `isolation` reads: until `expected` arrived
    and the partition end (its LSO for read_committed) is reached, or the timeout."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"{topic}-{isolation}",
                  "auto.offset.reset": "earliest", "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.subscribe([topic])
    out: list[bytes] = []
    end = time.monotonic() + timeout_s
    try:
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == -191 and len(out) >= expected:  # _PARTITION_EOF
                    break
                continue
            out.append(m.value())
    finally:
        c.close()
    return out


def test_confluent_commit_abort_and_isolation(broker: BrokerProcess, topic_name: str) -> None:
    make_topics(broker.bootstrap, topic_name)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, b"c%d" % i)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, b"a%d" % i)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic_name, b"end")
    p.commit_transaction(20)
    committed = read_values(broker.bootstrap, topic_name, "read_committed", 11)
    assert committed == [b"c%d" % i for i in range(10)] + [b"end"]
    uncommitted = read_values(broker.bootstrap, topic_name, "read_uncommitted", 21)
    assert uncommitted == [b"c%d" % i for i in range(10)] + [b"a%d" % i for i in range(10)] + [b"end"]


def test_confluent_consume_transform_produce(broker: BrokerProcess, topic_name: str) -> None:
    src, dst, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-g"
    make_topics(broker.bootstrap, src, dst)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(50):
        plain.produce(src, b"v%d" % i)
    plain.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([src])
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-copier"})
    p.init_transactions(20)
    copied = 0
    deadline = time.monotonic() + 30
    while copied < 50 and time.monotonic() < deadline:
        msgs = consumer.consume(20, 0.5)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, b"out-" + m.value())
        p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 20)
        p.commit_transaction(20)
        copied += len(msgs)
    consumer.close()
    assert copied == 50
    assert sorted(read_values(broker.bootstrap, dst, "read_committed", 50)) == sorted(b"out-v%d" % i for i in range(50))
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = check.committed([TopicPartition(src, 0)], timeout=10)
    check.close()
    assert committed[0].offset == 50


def test_kafka_python_commit_abort_and_offsets(broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KTP

    make_topics(broker.bootstrap, topic_name, f"{topic_name}-in")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic_name}-kp")
    p.init_transactions()
    p.begin_transaction()
    for i in range(5):
        p.send(topic_name, b"c%d" % i)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(5):
        p.send(topic_name, b"a%d" % i)
    p.flush()  # (kafka-python drops what it has not sent yet when aborting)
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic_name, b"end")
    # offsets of a group committed with the transaction
    p.send_offsets_to_transaction({KTP(f"{topic_name}-in", 0): OffsetAndMetadata(7, "", -1)}, f"{topic_name}-g")
    p.commit_transaction()
    p.close()

    def read(isolation: str, expected: int) -> list[bytes]:
        c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                          isolation_level=isolation, consumer_timeout_ms=3000, enable_auto_commit=False)
        out = [m.value for m in c]
        c.close()
        return out

    assert read("read_committed", 6) == [b"c%d" % i for i in range(5)] + [b"end"]
    assert read("read_uncommitted", 11) == [b"c%d" % i for i in range(5)] + [b"a%d" % i for i in range(5)] + [b"end"]
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g"})
    committed = check.committed([TopicPartition(f"{topic_name}-in", 0)], timeout=10)
    check.close()
    assert committed[0].offset == 7


def test_kafkajs_transactions(broker: BrokerProcess, topic_name: str, kafkajs_runner: list[str]) -> None:
    make_topics(broker.bootstrap, topic_name, f"{topic_name}-in", f"{topic_name}-out")
    spec: dict[str, Any] = {"bootstrap": broker.bootstrap, "topic": topic_name, "input": f"{topic_name}-in",
                            "output": f"{topic_name}-out", "group": f"{topic_name}-g", "count": 10}
    proc = subprocess.run([kafkajs_runner[0], str(KAFKAJS_TXN), json.dumps(spec)], capture_output=True, text=True,
                          timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"kafkajs printed nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    out = json.loads(lines[-1])
    assert "error" not in out, out["error"]
    assert out["committed"] == [f"c{i}" for i in range(10)] + ["end"]
    assert out["uncommitted"] == [f"c{i}" for i in range(10)] + [f"a{i}" for i in range(10)] + ["end"]
    assert out["copied"] == 10
    assert sorted(read_values(broker.bootstrap, f"{topic_name}-out", "read_committed", 10)) == sorted(
        f"out-in{i}".encode() for i in range(10))
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g"})
    committed = check.committed([TopicPartition(f"{topic_name}-in", 0)], timeout=10)
    check.close()
    assert committed[0].offset == 10


NODE_RDKAFKA_TXN = Path(__file__).resolve().parents[2] / "compat" / "node-rdkafka" / "txn.js"


def test_node_rdkafka_transactions(broker: BrokerProcess, topic_name: str, kafkajs_runner: list[str]) -> None:
    if not (NODE_RDKAFKA_TXN.parent / "node_modules" / "node-rdkafka" / "build" / "Release").is_dir():
        raise AssertionError("compat/node-rdkafka is not built: run scripts/install-deps.sh")
    make_topics(broker.bootstrap, topic_name, f"{topic_name}-in", f"{topic_name}-out")
    spec = {"bootstrap": broker.bootstrap, "topic": topic_name, "input": f"{topic_name}-in",
            "output": f"{topic_name}-out", "group": f"{topic_name}-g", "count": 10}
    proc = subprocess.run([kafkajs_runner[0], str(NODE_RDKAFKA_TXN), json.dumps(spec)], capture_output=True,
                          text=True, timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"node-rdkafka printed nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    out = json.loads(lines[-1])
    assert "error" not in out, out["error"]
    assert out["committed"] == [f"c{i}" for i in range(10)] + ["end"]
    assert out["uncommitted"] == [f"c{i}" for i in range(10)] + [f"a{i}" for i in range(10)] + ["end"]
    assert out["copied"] == 10
    assert sorted(read_values(broker.bootstrap, f"{topic_name}-out", "read_committed", 10)) == sorted(
        f"out-in{i}".encode() for i in range(10))
    check = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g"})
    committed = check.committed([TopicPartition(f"{topic_name}-in", 0)], timeout=10)
    check.close()
    assert committed[0].offset == 10
