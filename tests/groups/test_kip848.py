"""The consumer group protocol of KIP-848 (`group.protocol=consumer`) with librdkafka."""

from __future__ import annotations

import time

from confluent_kafka import Consumer

from tests.brokerproc import BrokerProcess
from tests.groups.test_groups_clients import create, drain, produce

DEADLINE = 60.0  # reconciliation follows heartbeats (group.consumer.heartbeat.interval.ms, 5 s)


def consumer(b: BrokerProcess, group: str, **conf: str) -> Consumer:
    # librdkafka rejects session.timeout.ms / heartbeat.interval.ms / partition.assignment.strategy
    # with the new protocol: the broker owns them.
    base = {"bootstrap.servers": b.bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    base.update(conf)
    return Consumer(base)


def wait_balanced(consumers: list[Consumer], partitions: int, each: int) -> None:
    """Poll until every member owns `each` partitions and together they own all, once."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        for c in consumers:
            m = c.poll(0.05)
            assert m is None or m.error() is None, m.error()
        owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
        if sorted(p for o in owned for p in o) == list(range(partitions)) and all(len(o) == each for o in owned):
            return
    raise AssertionError(f"never balanced: {[c.assignment() for c in consumers]}")


def test_three_consumers_get_two_partitions_each_and_every_record_once(broker: BrokerProcess,
                                                                        topic_name: str) -> None:
    create(broker, topic_name, 6)
    cs = [consumer(broker, topic_name) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([topic_name])
        wait_balanced(cs, 6, 2)
        produce(broker, topic_name, range(3000))
        seen = drain(cs, 3000)
        assert len(seen) == 3000
        assert all(len(v) == 1 for v in seen.values()), "a record went to two members"
        assert all(len(c.assignment()) == 2 for c in cs)
    finally:
        for c in cs:
            c.close()


def test_a_member_leaving_hands_its_partitions_over(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name, 6)
    cs = [consumer(broker, topic_name) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([topic_name])
        wait_balanced(cs, 6, 2)
        cs.pop().close()
        wait_balanced(cs, 6, 3)
        produce(broker, topic_name, range(600))
        seen = drain(cs, 600)
        assert len(seen) == 600 and all(len(v) == 1 for v in seen.values())
    finally:
        for c in cs:
            c.close()
