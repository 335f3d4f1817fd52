"""Spark's own Kafka connector (spark-sql-kafka-0-10: Kafka's Java AdminClient, consumer and
producer) against a 3-broker Samsa cluster, through the kill -9 of a partition leader: a batch
read, a streaming read restarted from its checkpoint after the kill (every offset once), and
the batch and streaming sinks writing while a broker is down."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.cluster import Cluster
from tests.spark.test_kafka_connector import check_exactly_once, consume, kafka_read, produce, stream_to_parquet

pytestmark = pytest.mark.slow


def test_kafka_connector_reads_and_writes_through_a_leader_kill(kafka_connector: Any,
                                                                cluster: Callable[..., Cluster],
                                                                tmp_path: Path) -> None:
    spark = kafka_connector
    c = cluster(3)
    src, dst = "spark-src", "spark-dst"
    for t in (src, dst):
        c.create_topic(t, partitions=2, rf=3, configs={"min.insync.replicas": "2"})
    produce(c.bootstrap, src, [f"a{i}".encode() for i in range(300)], 2)
    assert kafka_read(spark, c.bootstrap, src).count() == 300
    out = tmp_path / "out"
    sizes = stream_to_parquet(spark, c.bootstrap, src, out, per_trigger=100)
    assert sum(sizes) == 300

    victim = c.leader_of(src, 0)
    assert victim is not None
    c.kill9(victim)
    c.wait_leader_change(src, 0, victim)
    # the batch sink, with one of the three bootstrap brokers dead
    df = spark.createDataFrame([(f"{i}", f"b{i}", i % 2) for i in range(100)], "key STRING, value STRING, partition INT")
    df.write.format("kafka").option("kafka.bootstrap.servers", c.bootstrap).option("topic", src).save()
    # the stream resumes from its checkpoint on the new leader
    sizes = stream_to_parquet(spark, c.bootstrap, src, out, per_trigger=100)
    assert sum(sizes) == 100
    check_exactly_once(spark, out, [f"a{i}" for i in range(300)] + [f"b{i}" for i in range(100)])

    # the streaming sink, src into dst, still with a broker down
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", c.bootstrap).option("subscribe", src)
         .option("startingOffsets", "earliest").load().selectExpr("key", "upper(CAST(value AS STRING)) AS value")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", c.bootstrap).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ckpt-dst")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    got = consume(c.live_bootstrap(), dst, 2)
    assert sorted(m.value() for m in got) == sorted([f"A{i}".encode() for i in range(300)] +
                                                     [f"B{i}".encode() for i in range(100)])
