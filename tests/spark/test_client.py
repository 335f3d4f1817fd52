"""The Spark source's own client against a real broker: metadata, offsets, raw batches that
decode into Spark's Kafka Arrow schema."""

from __future__ import annotations

import random

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


def test_read_range_starts_small_then_fetches_more(broker: BrokerProcess, topic_name: str) -> None:
    """An executor hands Spark a small first Arrow batch (Spark starts writing at once), then
    larger ones; every offset of the range comes out once, in order, including a record batch
    bigger than the first fetch (the broker returns it whole)."""
    from samsa.spark.source import FETCH_BYTES, FIRST_FETCH_BYTES, read_range

    assert FIRST_FETCH_BYTES <= 64 << 10 and FETCH_BYTES >= 32 * FIRST_FETCH_BYTES

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    rng = random.Random(7)
    values = [rng.randbytes(100) for _ in range(20_000)]
    big = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "batch.size": 1 << 20})
    for v in values[:2000]:  # one ~230 KB batch: larger than the first fetch
        big.produce(topic_name, value=v)
    assert big.flush(10) == 0
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.size": 16384})
    for v in values[2000:]:
        p.produce(topic_name, value=v)
    assert p.flush(10) == 0

    from samsa.spark.client import _POOL

    for lo in (0, 2000):
        batches = list(read_range((broker.bootstrap, topic_name, 0, lo, 20_000, False, (), 0)))
        rows = [b.num_rows for b in batches]
        assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(lo, 20_000))
        assert [v for b in batches for v in b.column("value").to_pylist()] == values[lo:]
        if lo == 2000:  # small record batches: the first fetch holds ~64 KiB of them, later ones 2 MiB
            assert rows[0] <= FIRST_FETCH_BYTES // 100 and max(rows) >= 8 * rows[0], rows
    _POOL.pop((broker.bootstrap, (), 0)).close()  # the executor's pooled client, left open by read_range


def test_the_driver_side_source_loads_no_reading_or_writing_code() -> None:
    """Spark starts a Python process for the source of every streaming query; it plans offsets
    only, so importing the source must not load the Arrow decoder, the sink or the Spark-home helper."""
    import json
    import subprocess
    import sys

    code = "import json, sys, samsa.spark.source; print(json.dumps([m for m in sys.modules if m.startswith('samsa.')]))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout))
    unneeded = {"samsa.spark.arrow", "samsa.spark.sink", "samsa.spark.encode", "samsa.spark.home", "samsa.protocol.records"}
    assert loaded.isdisjoint(unneeded), loaded & unneeded
    assert "samsa.spark.client" in loaded
