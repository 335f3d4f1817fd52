"""The Spark source's own client against a real broker: metadata, offsets, raw batches that
decode into Spark's Kafka Arrow schema."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.spark.arrow import KAFKA_SCHEMA, decode_partition
from samsa.spark.client import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, ClientError, OffsetOutOfRange, SamsaClient
from tests.brokerproc import BrokerProcess


def make_topic(broker: BrokerProcess, name: str, partitions: int, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4"})
    for i in range(n):
        p.produce(name, key=f"k{i}".encode(), value=f"v{i:05d}".encode(), partition=i % partitions,
                  timestamp=1_700_000_000_000 + i)
    assert p.flush(10) == 0


def test_metadata_offsets_and_fetch(broker: BrokerProcess, topic_name: str) -> None:
    make_topic(broker, topic_name, 2, 1000)
    c = SamsaClient(broker.bootstrap)
    try:
        assert c.metadata([topic_name, "no-such-topic"]) == {topic_name: {0: 0, 1: 0}}
        tps = [(topic_name, 0), (topic_name, 1)]
        assert c.list_offsets(tps, EARLIEST_TIMESTAMP) == {tps[0]: 0, tps[1]: 0}
        assert c.list_offsets(tps, LATEST_TIMESTAMP) == {tps[0]: 500, tps[1]: 500}
        # by timestamp: record i of partition 0 has timestamp base + 2 * i
        assert c.list_offsets([tps[0]], 1_700_000_000_000 + 201) == {tps[0]: 101}

        rows = []
        offset = 100
        while offset < 400:
            data, hw, start = c.fetch(tps[0], offset)
            assert (hw, start) == (500, 0)
            batch = decode_partition(data, topic_name, 0, start_offset=offset, end_offset=400)
            assert batch.schema == KAFKA_SCHEMA
            rows += batch.to_pylist()
            offset = rows[-1]["offset"] + 1
        assert [r["offset"] for r in rows] == list(range(100, 400))
        assert [r["value"] for r in rows] == [f"v{2 * i:05d}".encode() for i in range(100, 400)]
        assert rows[0]["key"] == b"k200" and rows[0]["partition"] == 0 and rows[0]["topic"] == topic_name

        with pytest.raises(OffsetOutOfRange) as e:
            c.fetch(tps[1], 10_000)
        assert (e.value.log_start, e.value.high_watermark) == (0, 500)
    finally:
        c.close()


def test_unreachable_broker_is_a_clear_error() -> None:
    from tests.brokerproc import free_port

    c = SamsaClient(f"127.0.0.1:{free_port()}", timeout=2)
    with pytest.raises(ClientError, match="no broker reachable: cannot connect to broker 127.0.0.1"):
        c.metadata()
    with pytest.raises(ClientError, match="expected host:port"):
        SamsaClient("localhost")
