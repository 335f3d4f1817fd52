"""`__consumer_offsets` stays bounded: superseded commits are compacted away, stale ones expire."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from tests.brokerproc import BrokerProcess
from tests.groups.test_groups_clients import create
from tests.rawclient import RawClient


def commit(c: RawClient, group: str, topic: str, offset: int) -> None:
    r = c.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                         "topics": [{"name": topic, "partitions": [
                             {"partition_index": 0, "committed_offset": offset, "committed_metadata": "x" * 50}]}]})
    assert r.topics[0].partitions[0].error_code == 0


def committed(b: BrokerProcess, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


def offsets_partition_size(b: BrokerProcess) -> int:
    return sum(f.stat().st_size for f in b.log_dir.glob("__consumer_offsets-*/*.log"))


def test_superseded_commits_are_compacted_and_survive_restart(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(**{"offsets.topic.segment.bytes": "20000", "log.cleaner.backoff.ms": "100",
                          "log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0",
                          "offsets.topic.num.partitions": "3"})
    create(b, topic_name, 1)
    with RawClient(b.bootstrap) as c:
        for i in range(2000):
            commit(c, "compacted", topic_name, i)
    written = 2000 * 150  # each commit is a ~150-byte batch
    deadline = time.monotonic() + 30
    while offsets_partition_size(b) > written / 4 and time.monotonic() < deadline:
        time.sleep(0.1)  # compaction and segment deletion run on the broker's timers
    assert offsets_partition_size(b) <= written / 4, "superseded commits were never compacted away"
    assert "Cleaned __consumer_offsets-" in b.log_text()  # (by the log cleaner, as any compacted topic)
    assert committed(b, "compacted", topic_name) == 1999
    b.kill9()
    b.start()
    assert committed(b, "compacted", topic_name) == 1999


def test_offsets_of_an_empty_group_expire(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(**{"offsets.retention.check.interval.ms": "100"})
    create(b, topic_name, 1)
    with RawClient(b.bootstrap) as c:
        # OffsetCommit v2-v4 carries a retention time of its own (here 300 ms).
        r = c.request(8, 2, {"group_id": "stale", "generation_id_or_member_epoch": -1, "member_id": "",
                             "retention_time": 300, "topics": [{"name": topic_name, "partitions": [
                                 {"partition_index": 0, "committed_offset": 3, "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0
    assert committed(b, "stale", topic_name) in (3, -1001)
    deadline = time.monotonic() + 20
    while committed(b, "stale", topic_name) != -1001 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert committed(b, "stale", topic_name) == -1001
