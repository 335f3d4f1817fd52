"""The samsa data source in a real local Spark against a real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess


def produce(broker: BrokerProcess, topic: str, partitions: int, values: list[bytes]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    try:
        fut.result(10)
    except Exception as e:  # already there: appending more
        if "already exists" not in str(e):
            raise
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, key=str(i).encode(), value=v, partition=i % partitions)
    assert p.flush(10) == 0


def test_batch_read_with_offset_bounds(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    produce(broker, topic_name, 2, [f"v{i}".encode() for i in range(100)])
    df = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name)
          .option("startingOffsets", f'{{"{topic_name}":{{"0":10,"1":-2}}}}')
          .option("endingOffsets", f'{{"{topic_name}":{{"0":20,"1":-1}}}}').load())
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType"]
    rows = df.select("partition", "offset", "value").collect()
    got = sorted((r["partition"], r["offset"], bytes(r["value"])) for r in rows)
    want = sorted([(0, o, f"v{2 * o}".encode()) for o in range(10, 20)] +
                  [(1, o, f"v{2 * o + 1}".encode()) for o in range(50)])
    assert got == want


def test_stream_into_parquet_is_exactly_once_across_restart(spark: Any, broker: BrokerProcess, topic_name: str,
                                                             tmp_path: Path) -> None:
    produce(broker, topic_name, 2, [f"a{i}".encode() for i in range(300)])
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run() -> None:
        q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic_name).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "100").load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
        sizes = [p["numInputRows"] for p in q.recentProgress]
        assert sizes and max(sizes) <= 100 + 2  # maxOffsetsPerTrigger bounds every batch (+1 per partition)

    run()
    produce(broker, topic_name, 2, [f"b{i}".encode() for i in range(100)])
    run()
    rows = spark.read.parquet(out).collect()
    keys = sorted((r["partition"], r["offset"]) for r in rows)
    assert keys == sorted(set(keys)) and len(keys) == 400  # every offset exactly once
    assert sorted(r["value"] for r in rows) == sorted([f"a{i}" for i in range(300)] + [f"b{i}" for i in range(100)])


def test_missing_bootstrap_is_a_clear_error(spark: Any, topic_name: str) -> None:
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        spark.read.format("samsa").option("subscribe", topic_name).load().collect()
