"""aiokafka against a real Samsa broker: admin create, every codec (aiokafka compresses with
cramjam, a samsa dependency), manual-assignment reads, ListOffsets (beginning, end, by time).

Each test runs its own event loop with asyncio.run (no pytest-asyncio needed).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import (
    CODECS,
    DEADLINE_S,
    Rec,
    base_timestamp_ms,
    make_records,
    stored_codecs,
    timestamp_queries,
)

TOPIC_ALREADY_EXISTS = 36


async def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> int:
    """Create a topic; returns the per-topic error code of the CreateTopics response."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-aiokafka")
    await admin.start()
    try:
        resp = await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        (entry,) = [e for e in resp.topic_errors if e[0] == topic]
        return int(entry[1])
    finally:
        await admin.close()


def new_consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="none", fetch_max_wait_ms=100, client_id="compat-aiokafka",
    )


def test_create_topic_with_admin_client(broker: BrokerProcess, topic_name: str) -> None:
    async def run() -> None:
        assert await create_topic(broker.bootstrap, topic_name, partitions=3) == 0
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compat-aiokafka")
        await admin.start()
        try:
            (t,) = await admin.describe_topics([topic_name])
        finally:
            await admin.close()
        assert t["error_code"] == 0
        assert sorted(p["partition"] for p in t["partitions"]) == [0, 1, 2]
        assert all(p["error_code"] == 0 and p["leader"] == 0 for p in t["partitions"])
        assert await create_topic(broker.bootstrap, topic_name) == TOPIC_ALREADY_EXISTS

    asyncio.run(run())


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_and_list_offsets(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    b = broker.bootstrap
    recs = make_records(codec, 30, base_timestamp_ms())

    async def run() -> None:
        assert await create_topic(b, topic_name) == 0
        p = AIOKafkaProducer(
            bootstrap_servers=b, acks="all", linger_ms=5, client_id="compat-aiokafka",
            compression_type=None if codec == "none" else codec,
        )
        await p.start()
        try:
            offsets = []
            for half in (recs[:15], recs[15:]):
                futures = [
                    await p.send(topic_name, value=r.value.encode(), key=r.key.encode(), partition=0,
                                 timestamp_ms=r.timestamp, headers=[(k, v.encode()) for k, v in r.headers])
                    for r in half
                ]
                offsets += [(await asyncio.wait_for(f, DEADLINE_S)).offset for f in futures]
        finally:
            await p.stop()
        assert offsets == list(range(30))

        tp = TopicPartition(topic_name, 0)
        c = new_consumer(b)
        await c.start()
        try:
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 30:
                assert time.monotonic() < deadline, f"read {len(got)}/30 records"
                for msgs in (await c.getmany(tp, timeout_ms=500)).values():
                    got += msgs
            assert [m.offset for m in got] == list(range(30))
            assert [
                Rec(m.key.decode(), m.value.decode(), m.timestamp, tuple((k, v.decode()) for k, v in m.headers))
                for m in got
            ] == recs

            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 30}
            for ts, want in timestamp_queries(recs).items():
                found = (await c.offsets_for_times({tp: ts}))[tp]
                if want < 0:
                    assert found is None, f"offsets_for_times({ts})"
                else:
                    assert found is not None and found.offset == want, f"offsets_for_times({ts}) = {found}"
        finally:
            await c.stop()

    asyncio.run(run())
    assert stored_codecs(b, topic_name) == {codec}
