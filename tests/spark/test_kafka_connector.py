"""Spark's own Kafka connector (spark-sql-kafka-0-10, Kafka's Java AdminClient, consumer and
producer) against a Samsa broker: batch and streaming reads, a streaming query restarted from
its checkpoint, the batch and streaming sinks. The shared SparkSession loads the connector's
jars (tests/conftest.py: scripts/kafka-jars.sh spark-kafka)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess


def create(bootstrap: str, topic: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(15)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, key=str(i).encode(), value=v, partition=i % partitions)
    assert p.flush(30) == 0


def consume(bootstrap: str, topic: str, partitions: int, timeout: float = 30) -> list[Any]:
    """Every record of `topic` (confluent-kafka, not Spark): from the start to the end offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check-" + uuid.uuid4().hex,
                  "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        while sum(ends.values()) > len(out):
            assert time.monotonic() < deadline, f"read {len(out)} of {sum(ends.values())}"
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(m)
        return out
    finally:
        c.close()


def kafka_read(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
            .options(**options).load())


def stream_to_parquet(spark: Any, bootstrap: str, topic: str, out: Path, per_trigger: int) -> list[int]:
    """readStream.format("kafka") into parquet until caught up (Trigger.AvailableNow); the rows of each batch."""
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", str(per_trigger)).load()
         .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
         .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(out) + "-ckpt")
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    return [p["numInputRows"] for p in q.recentProgress]


def check_exactly_once(spark: Any, out: Path, want: list[str]) -> None:
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(want)  # every offset once
    assert sorted(r["value"] for r in rows) == sorted(want)


def test_batch_read_with_offset_bounds(kafka_connector: Any, broker: BrokerProcess, topic_name: str) -> None:
    spark = kafka_connector
    create(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, [f"v{i}".encode() for i in range(100)], 2)
    everything = kafka_read(spark, broker.bootstrap, topic_name)
    assert everything.count() == 100
    df = kafka_read(spark, broker.bootstrap, topic_name,
                    startingOffsets=f'{{"{topic_name}":{{"0":10,"1":-2}}}}',
                    endingOffsets=f'{{"{topic_name}":{{"0":20,"1":-1}}}}')
    got = sorted((r["partition"], r["offset"], bytes(r["key"]), bytes(r["value"]))
                 for r in df.select("partition", "offset", "key", "value").collect())
    want = sorted([(0, o, b"%d" % (2 * o), b"v%d" % (2 * o)) for o in range(10, 20)] +
                  [(1, o, b"%d" % (2 * o + 1), b"v%d" % (2 * o + 1)) for o in range(50)])
    assert got == want
    # the same rows as Samsa's own source gives, column for column (timestamps included)
    samsa = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic_name).load())
    cols = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert sorted(everything.select(cols).collect()) == sorted(samsa.select(cols).collect())


def test_stream_restarted_from_its_checkpoint_reads_every_offset_once(kafka_connector: Any, broker: BrokerProcess,
                                                                      topic_name: str, tmp_path: Path) -> None:
    spark = kafka_connector
    create(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, [f"a{i}".encode() for i in range(300)], 2)
    out = tmp_path / "out"
    sizes = stream_to_parquet(spark, broker.bootstrap, topic_name, out, per_trigger=100)
    assert sum(sizes) == 300 and max(sizes) <= 100
    produce(broker.bootstrap, topic_name, [f"b{i}".encode() for i in range(100)], 2)
    sizes = stream_to_parquet(spark, broker.bootstrap, topic_name, out, per_trigger=100)
    assert sum(sizes) == 100  # the restart resumed where the first run stopped
    check_exactly_once(spark, out, [f"a{i}" for i in range(300)] + [f"b{i}" for i in range(100)])


def test_batch_sink_writes_keys_values_headers_and_partitions(kafka_connector: Any, broker: BrokerProcess,
                                                              topic_name: str) -> None:
    spark = kafka_connector
    create(broker.bootstrap, topic_name, 3)
    df = spark.createDataFrame([(f"k{i}", f"v{i}", i % 3) for i in range(60)], "key STRING, value STRING, partition INT")
    (df.selectExpr("key", "value", "partition", "array(named_struct('key', 'h', 'value', CAST(key AS BINARY))) AS headers")
     .write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic_name).save())
    got = consume(broker.bootstrap, topic_name, 3)
    assert sorted((m.partition(), m.key(), m.value(), tuple(m.headers())) for m in got) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), (("h", f"k{i}".encode()),)) for i in range(60))


def test_stream_sink_from_one_topic_into_another(kafka_connector: Any, broker: BrokerProcess, topic_name: str,
                                                 tmp_path: Path) -> None:
    spark = kafka_connector
    src, dst = topic_name, topic_name + "-out"
    create(broker.bootstrap, src, 2)
    create(broker.bootstrap, dst, 2)
    produce(broker.bootstrap, src, [f"r{i}".encode() for i in range(200)], 2)

    def run() -> None:
        q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", src).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "80")
             .load().selectExpr("key", "upper(CAST(value AS STRING)) AS value")
             .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", dst)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()

    run()
    produce(broker.bootstrap, src, [f"s{i}".encode() for i in range(50)], 2)
    run()
    got = consume(broker.bootstrap, dst, 2)
    assert sorted(m.value() for m in got) == sorted([f"R{i}".encode() for i in range(200)] +
                                                     [f"S{i}".encode() for i in range(50)])


def test_timestamps_headers_patterns_and_split_ranges(kafka_connector: Any, broker: BrokerProcess,
                                                      topic_name: str) -> None:
    """startingOffsetsByTimestamp (the AdminClient's ListOffsets by time), includeHeaders,
    subscribePattern, minPartitions (one partition's range read by several consumers), and
    every compression codec, as the connector reads them."""
    spark = kafka_connector
    create(broker.bootstrap, topic_name, 2)
    base = int(time.time() * 1000) - 60_000
    for i, codec in enumerate(["gzip", "snappy", "lz4", "zstd"]):
        p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
        for j in range(50):
            p.produce(topic_name, value=f"{codec}-{j}".encode(), partition=j % 2, timestamp=base + i * 1000 + j,
                      headers=[("codec", codec.encode()), ("j", b"%d" % j)])
        assert p.flush(30) == 0
    df = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribePattern", topic_name.replace("-", ".") + "$").option("includeHeaders", "true")
          .option("minPartitions", "6")
          .option("startingOffsetsByTimestamp", f'{{"{topic_name}": {{"0": {base + 2000}, "1": {base + 2000}}}}}')
          .load())
    assert df.rdd.getNumPartitions() >= 6
    rows = df.select("value", "headers", "timestamp").collect()
    assert sorted(bytes(r["value"]) for r in rows) == sorted(f"{c}-{j}".encode() for c in ("lz4", "zstd")
                                                             for j in range(50))
    for r in rows:
        codec = bytes(r["value"]).split(b"-")[0]
        assert [(h["key"], bytes(h["value"])) for h in r["headers"]][0] == ("codec", codec)


def test_read_committed_skips_aborted_transactions(kafka_connector: Any, broker: BrokerProcess,
                                                   topic_name: str, tmp_path: Path) -> None:
    """kafka.isolation.level=read_committed through the connector: the offsets of aborted
    records and of the transaction markers are gaps it must step over, batch and streaming."""
    spark = kafka_connector
    create(broker.bootstrap, topic_name, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx"})
    p.init_transactions(20)
    for i, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for j in range(5):
            p.produce(topic_name, b"%d-%d" % (i, j))
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(20)
    committed = [b"%d-%d" % (i, j) for i in (0, 2, 4) for j in range(5)]
    batch = kafka_read(spark, broker.bootstrap, topic_name, **{"kafka.isolation.level": "read_committed"})
    assert [bytes(r.value) for r in batch.orderBy("offset").collect()] == committed
    q = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "7").load()
         .selectExpr("CAST(value AS STRING) AS value").writeStream.format("parquet")
         .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None, q.exception()
    assert sorted(r["value"].encode() for r in spark.read.parquet(str(tmp_path / "out")).collect()) == sorted(committed)
