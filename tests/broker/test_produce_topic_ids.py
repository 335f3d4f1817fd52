"""Produce v13 (KIP-516, Kafka 4.1) and Metadata v13 (KIP-1102, Kafka 4.0) over raw frames.

Produce v13 names topics by id, in the request and the answer; an id no topic has is
UNKNOWN_TOPIC_ID for its partitions. Metadata v13 adds a top-level error code (for
REBOOTSTRAP_REQUIRED), 0 from a broker that never asks a client to rebootstrap.
"""

from __future__ import annotations

from samsa.protocol.records import build_batch, decode_records, scan_batches
from tests.brokerproc import BrokerProcess
from tests.fetchwire import ZERO_ID, fetch, topic_id
from tests.rawclient import RawClient


def produce(c: RawClient, topics: dict[bytes, dict[int, bytes]], version: int = 13) -> object:
    return c.request(0, version, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
        {"topic_id": tid, "partition_data": [{"index": p, "records": batch} for p, batch in parts.items()]}
        for tid, parts in topics.items()]})


def test_produce_by_topic_id(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        md = c.request(3, 13, {"topics": [{"name": topic_name, "topic_id": ZERO_ID}],
                               "allow_auto_topic_creation": True, "include_topic_authorized_operations": False})
        assert md.error_code == 0 and md.topics[0].error_code in (0, 5)  # (5: created, leader on its way)
        tid = topic_id(c, topic_name)
        assert bytes(md.topics[0].topic_id) == tid
        batch = build_batch([(b"k", b"by-id-%d" % i, [], 1_700_000_000_000 + i) for i in range(3)])
        unknown = bytes(range(16))
        resp = produce(c, {tid: {0: batch}, unknown: {0: batch, 1: batch}})
        by_id = {bytes(t.topic_id): [(p.index, p.error_code, p.base_offset) for p in t.partition_responses]
                 for t in resp.responses}  # type: ignore[attr-defined]
        assert by_id == {tid: [(0, 0, 0)], unknown: [(0, 100, -1), (1, 100, -1)]}  # 100: UNKNOWN_TOPIC_ID
        again = produce(c, {tid: {0: batch}})
        assert again.responses[0].partition_responses[0].base_offset == 3  # type: ignore[attr-defined]
        got = fetch(c, 17, {tid: {0: 0}}).responses[0].partitions[0]
    data = bytes(got.records)
    values = [r.value for pos, h in scan_batches(data) for r in decode_records(data[pos:pos + h.size], h)]
    assert values == [b"by-id-%d" % i for i in range(3)] * 2
