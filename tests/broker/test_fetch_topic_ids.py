"""Fetch v13-v17 over raw frames: topics named by id (KIP-516), and what each version carries.

- v13+ name topics by id, in the request and the answer; the records are the bytes a fetch by
  name (v12) returns;
- an id no topic has is UNKNOWN_TOPIC_ID for its partitions, the id echoed;
- a fetch session opened with ids is keyed by (topic id, partition): a topic deleted and created
  again under its name is another topic to it, and a fetch that changes from ids to names
  mid-session is FETCH_SESSION_TOPIC_ID_ERROR;
- v15 puts a follower's id in the tagged `replica_state` (a consumer sends none);
- v16's leader hints (current_leader, node_endpoints) need a leader elsewhere or a newer leader
  epoch: they are tested on a cluster, tests/cluster/test_fetch_leader_hints.py.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import wait_until
from tests.fetchwire import fetch, topic_id
from tests.rawclient import RawClient


def produce(bootstrap: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=partition)
    assert p.flush(10) == 0


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (must outlive its futures)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
def test_a_fetch_by_topic_id_returns_what_a_fetch_by_name_does(broker: BrokerProcess, topic_name: str,
                                                                version: int) -> None:
    create(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, 5, partition=1)
    with RawClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        by_name = fetch(c, 12, {topic_name: {0: 0, 1: 2}})
        by_id = fetch(c, version, {tid: {0: 0, 1: 2}})
    assert by_id.error_code == 0 and by_id.session_id == 0
    (t,) = by_id.responses
    assert bytes(t.topic_id) == tid
    got = [(p.partition_index, p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records or b""))
           for p in t.partitions]
    want = [(p.partition_index, p.error_code, p.high_watermark, p.log_start_offset, bytes(p.records or b""))
            for p in by_name.responses[0].partitions]
    assert got == want and got[1][2] == 5 and len(got[1][4]) > 0
    if version >= 16:
        assert not by_id.node_endpoints  # (only with leader errors)


def test_an_unknown_topic_id_is_unknown_topic_id(broker: BrokerProcess, topic_name: str) -> None:
    create(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, 2)
    unknown = bytes(range(1, 17))
    with RawClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        resp = fetch(c, 17, {unknown: {0: 0, 3: 0}, tid: {0: 0}}, max_wait=5000)
    assert resp.error_code == 0
    first, second = resp.responses
    assert bytes(first.topic_id) == unknown
    assert [(p.partition_index, p.error_code) for p in first.partitions] == [(0, 100), (3, 100)]  # UNKNOWN_TOPIC_ID
    assert bytes(second.topic_id) == tid and second.partitions[0].error_code == 0
    assert second.partitions[0].high_watermark == 2 and second.partitions[0].records


def test_a_session_by_topic_id(broker: BrokerProcess, topic_name: str) -> None:
    """Opened with ids, continued incrementally; a fetch by name in it is refused; the topic
    deleted and created again under its name is answered UNKNOWN_TOPIC_ID for the old id."""
    create(broker.bootstrap, topic_name, 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with RawClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        full = fetch(c, 17, {tid: {0: 0, 1: 0, 2: 0}}, epoch=0)
        sid = full.session_id
        assert full.error_code == 0 and sid > 0
        assert sorted(p.partition_index for p in full.responses[0].partitions) == [0, 1, 2]
        assert not fetch(c, 17, {}, session_id=sid, epoch=1).responses  # nothing new

        produce(broker.bootstrap, topic_name, 1, partition=2)
        news = fetch(c, 17, {}, session_id=sid, epoch=2, max_wait=5000)
        (t,) = news.responses
        assert bytes(t.topic_id) == tid and [p.partition_index for p in t.partitions] == [2]
        assert t.partitions[0].records

        by_name = fetch(c, 12, {}, session_id=sid, epoch=3)
        assert by_name.error_code == 106  # FETCH_SESSION_TOPIC_ID_ERROR: the session uses ids
        moved = fetch(c, 17, {tid: {2: 1}}, session_id=sid, epoch=3, forgotten={tid: [1]})
        assert moved.error_code == 0 and not moved.responses

        admin.delete_topics([topic_name])[topic_name].result(10)
        wait_until(lambda: _id_if_ready(c, topic_name) is None, what="the topic to be gone")
        gone = fetch(c, 17, {}, session_id=sid, epoch=4)
        assert gone.error_code == 0
        assert {(p.partition_index, p.error_code) for t in gone.responses for p in t.partitions} == {
            (0, 100), (2, 100)}  # the session's partitions of the deleted topic: UNKNOWN_TOPIC_ID
        create(broker.bootstrap, topic_name, 1)
        new_id = wait_until(lambda: _id_if_ready(c, topic_name), what="the new topic's id")
        assert new_id != tid
        again = fetch(c, 17, {new_id: {0: 0}}, session_id=sid, epoch=5)
        assert {(bytes(t.topic_id), p.partition_index, p.error_code) for t in again.responses
                for p in t.partitions} == {(new_id, 0, 0), (tid, 0, 100), (tid, 2, 100)}


def _id_if_ready(c: RawClient, topic: str) -> bytes | None:
    try:
        return topic_id(c, topic)
    except AssertionError:
        return None


def test_v15_carries_the_follower_id_in_replica_state(broker: BrokerProcess, topic_name: str) -> None:
    """A consumer's v15+ fetch names no replica (state absent: -1) and reads to the high
    watermark; replica_state with an id that is no replica of the partition is a follower fetch
    of a broker that does not follow it: the leader answers it, as Kafka does, from the log end."""
    create(broker.bootstrap, topic_name)
    produce(broker.bootstrap, topic_name, 3)
    with RawClient(broker.bootstrap) as c:
        tid = topic_id(c, topic_name)
        consumer = fetch(c, 15, {tid: {0: 0}})
        follower = fetch(c, 15, {tid: {0: 0}}, body={"replica_state": {"replica_id": 7, "replica_epoch": -1}})
    assert consumer.responses[0].partitions[0].error_code == 0
    assert consumer.responses[0].partitions[0].high_watermark == 3
    assert follower.responses[0].partitions[0].error_code == 0
