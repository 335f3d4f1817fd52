"""Consumer groups with real clients: each record to one member, offsets committed and resumed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess

DEADLINE = 30.0


def create(b: BrokerProcess, topic: str, partitions: int = 6) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce(b: BrokerProcess, topic: str, values: Iterable[int], partitions: int = 6) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 2})
    for v in values:
        p.produce(topic, b"%d" % v, partition=v % partitions)
    assert p.flush(10) == 0


def consumer(b: BrokerProcess, group: str, protocol: str = "classic", **conf: str) -> Consumer:
    base: dict[str, object] = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                               "enable.auto.commit": False, "group.protocol": protocol}
    if protocol == "classic":  # with KIP-848 the broker owns these (librdkafka refuses them)
        base.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
    base.update(conf)
    return Consumer(base)


def drain(consumers: list[Consumer], want: int, seen: dict[int, list[int]] | None = None) -> dict[int, list[int]]:
    """Poll every consumer until `want` distinct values arrived; value -> indexes of consumers."""
    seen = {} if seen is None else seen
    deadline = time.monotonic() + DEADLINE
    while len(seen) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            for m in c.consume(1000, 0.05):
                assert m.error() is None, m.error()
                seen.setdefault(int(m.value()), []).append(i)
    return seen


def assigned(consumers: list[Consumer]) -> list[int]:
    return sorted(tp.partition for c in consumers for tp in c.assignment())


def wait_assignment(consumers: list[Consumer], partitions: int, seen: dict[int, list[int]] | None = None) -> None:
    """Poll until the members between them own every partition exactly once (records that
    arrive meanwhile go into `seen`)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is not None:
                assert m.error() is None, m.error()
                assert seen is not None, "a record arrived before the test produced any"
                seen.setdefault(int(m.value()), []).append(i)
        if assigned(consumers) == list(range(partitions)) and all(c.assignment() for c in consumers):
            return
    raise AssertionError(f"assignment never covered all partitions: {assigned(consumers)}")


def test_three_members_share_six_partitions_exactly_once(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name)
    cs = [consumer(broker, topic_name) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([topic_name])
        wait_assignment(cs, 6)  # membership is stable from here on
        produce(broker, topic_name, range(3000))
        seen = drain(cs, 3000)
        assert len(seen) == 3000
        assert all(len(v) == 1 for v in seen.values()), "a record went to two members"
        assert all(len(c.assignment()) == 2 for c in cs)
    finally:
        for c in cs:
            c.close()


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_members_leaving_and_joining_keep_every_partition_owned(broker: BrokerProcess, topic_name: str,
                                                                assignor: str) -> None:
    create(broker, topic_name)
    cs = [consumer(broker, topic_name, **{"partition.assignment.strategy": assignor}) for _ in range(2)]
    try:
        for c in cs:
            c.subscribe([topic_name])
        wait_assignment(cs, 6)
        joiner = consumer(broker, topic_name, **{"partition.assignment.strategy": assignor})
        joiner.subscribe([topic_name])
        cs.append(joiner)
        wait_assignment(cs, 6)
        leaver = cs.pop(0)
        leaver.close()
        wait_assignment(cs, 6)
        produce(broker, topic_name, range(600))
        seen = drain(cs, 600)
        assert len(seen) == 600 and all(len(v) == 1 for v in seen.values())
    finally:
        for c in cs:
            c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_restart_resumes_from_committed_offsets(broker_factory, topic_name: str, protocol: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    create(b, topic_name, 3)
    produce(b, topic_name, range(300), 3)
    c = consumer(b, "resume", protocol)
    c.subscribe([topic_name])
    seen = drain([c], 300)
    assert len(seen) == 300
    c.commit(asynchronous=False)
    c.close()
    produce(b, topic_name, range(300, 360), 3)  # not consumed, not committed
    b.kill9()
    b.start()
    c = consumer(b, "resume", protocol)
    c.subscribe([topic_name])
    again = drain([c], 60)
    c.close()
    assert sorted(again) == list(range(300, 360))


def test_clean_restart_keeps_offsets_and_committed_api(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    create(b, topic_name, 2)
    c = consumer(b, "g")
    c.commit(offsets=[TopicPartition(topic_name, 0, 7), TopicPartition(topic_name, 1, 3)], asynchronous=False)
    c.close()
    assert b.stop() == 0
    b.start()
    c = consumer(b, "g")
    got = c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)
    c.close()
    assert [(tp.partition, tp.offset) for tp in got] == [(0, 7), (1, 3)]


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky"])
def test_kafka_python_group(broker: BrokerProcess, topic_name: str, assignor: str) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    strategy = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                "sticky": StickyPartitionAssignor}[assignor]
    create(broker, topic_name, 4)
    consumers = [KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=topic_name,
                               auto_offset_reset="earliest", enable_auto_commit=False,
                               partition_assignment_strategy=[strategy],
                               session_timeout_ms=6000, heartbeat_interval_ms=300) for _ in range(2)]
    seen: dict[int, int] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        # Both members in, each owning two partitions, before anything is produced.
        while not all(len(kc.assignment()) == 2 for kc in consumers) and time.monotonic() < deadline:
            for kc in consumers:
                assert not kc.poll(timeout_ms=50)
        assert sorted(tp.partition for kc in consumers for tp in kc.assignment()) == [0, 1, 2, 3]
        produce(broker, topic_name, range(400), 4)
        deadline = time.monotonic() + DEADLINE  # (the reading's own time: the join may have used most of it)
        while len(seen) < 400 and time.monotonic() < deadline:
            for i, kc in enumerate(consumers):
                for records in kc.poll(timeout_ms=100).values():
                    for r in records:
                        assert int(r.value) not in seen, "a record went to two members"
                        seen[int(r.value)] = i
        assert len(seen) == 400, f"{len(seen)} of 400 read in {DEADLINE} s; assignments now " + str(
            [sorted(tp.partition for tp in kc.assignment()) for kc in consumers])
        for kc in consumers:
            kc.commit()
    finally:
        for kc in consumers:
            kc.close()
    c = consumer(broker, topic_name)
    committed = c.committed([TopicPartition(topic_name, p) for p in range(4)], timeout=10)
    c.close()
    assert sum(tp.offset for tp in committed) == 400


def test_aiokafka_group(broker: BrokerProcess, topic_name: str) -> None:
    from aiokafka import AIOKafkaConsumer

    create(broker, topic_name, 2)
    produce(broker, topic_name, range(100), 2)

    async def main() -> list[int]:
        c = AIOKafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=topic_name,
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        got: list[int] = []
        try:
            async with asyncio.timeout(DEADLINE):
                while len(got) < 100:
                    batch = await c.getmany(timeout_ms=200)
                    got += [int(r.value) for rs in batch.values() for r in rs]
            await c.commit()
        finally:
            await c.stop()
        return got

    got = asyncio.run(main())
    assert sorted(got) == list(range(100))
    c = consumer(broker, topic_name)
    committed = c.committed([TopicPartition(topic_name, p) for p in range(2)], timeout=10)
    c.close()
    assert sum(tp.offset for tp in committed) == 100


def test_static_member_gets_its_partitions_back(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name, 4)
    statics = [consumer(broker, topic_name, **{"group.instance.id": f"node-{i}"}) for i in range(2)]
    try:
        for c in statics:
            c.subscribe([topic_name])
        wait_assignment(statics, 4)
        before = sorted(tp.partition for tp in statics[0].assignment())
        statics[0].close()  # a static member leaves no LeaveGroup: its partitions wait for it
        statics[0] = consumer(broker, topic_name, **{"group.instance.id": "node-0"})
        statics[0].subscribe([topic_name])
        wait_assignment(statics, 4)
        assert sorted(tp.partition for tp in statics[0].assignment()) == before
    finally:
        for c in statics:
            c.close()
