"""Fetch sessions (KIP-227) on a real broker, over the wire: a session answers only what
changed, unknown sessions and wrong epochs get their errors, and a session can be closed."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

V = 12  # Fetch v12: flexible, topics by name


def fetch(c: RawClient, session_id: int, epoch: int, parts: dict[int, int], topic: str,
          forgotten: list[int] | None = None, max_wait: int = 50) -> Any:
    return c.request(1, V, {
        "replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": session_id, "session_epoch": epoch,
        "topics": [{"topic": topic, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20} for p, o in parts.items()]}] if parts else [],
        "forgotten_topics_data": [{"topic": topic, "partitions": forgotten}] if forgotten else [],
        "rack_id": ""})


def answered(resp: Any) -> list[int]:
    return sorted(p.partition_index for t in resp.responses for p in t.partitions)


def test_a_fetch_session_answers_only_what_changed(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(10)
    prod = Producer({"bootstrap.servers": broker.bootstrap})
    with RawClient(broker.bootstrap) as c:
        full = fetch(c, 0, 0, {p: 0 for p in range(4)}, topic_name)
        assert full.error_code == 0 and full.session_id > 0
        assert answered(full) == [0, 1, 2, 3]  # opening a session answers every partition
        sid = full.session_id

        nothing = fetch(c, sid, 1, {}, topic_name)  # names nothing: the session knows the positions
        assert nothing.error_code == 0 and nothing.session_id == sid and answered(nothing) == []

        prod.produce(topic_name, b"hello", partition=2)
        prod.flush(10)
        news = fetch(c, sid, 2, {}, topic_name, max_wait=5000)
        assert answered(news) == [2]  # only the partition with a record (and a new high watermark)
        entry = news.responses[0].partitions[0]
        assert entry.high_watermark == 1 and len(entry.records) > 0

        moved = fetch(c, sid, 3, {2: 1}, topic_name)  # the fetcher moved on past it
        assert answered(moved) == []

        assert fetch(c, sid, 3, {}, topic_name).error_code == 71  # INVALID_FETCH_SESSION_EPOCH (4 expected)
        assert fetch(c, sid + 1000, 1, {}, topic_name).error_code == 70  # FETCH_SESSION_ID_NOT_FOUND
        assert fetch(c, sid, 4, {}, topic_name, forgotten=[0, 1]).error_code == 0  # the right epoch still works

        closed = fetch(c, sid, -1, {3: 0}, topic_name)  # close: a full, sessionless fetch
        assert closed.session_id == 0 and answered(closed) == [3]
        assert fetch(c, sid, 5, {}, topic_name).error_code == 70

        plain = fetch(c, 0, -1, {0: 0, 1: 0}, topic_name)  # no session at all, as before
        assert plain.session_id == 0 and answered(plain) == [0, 1]
