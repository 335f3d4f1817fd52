"""The samsa sink (`df.write` / `df.writeStream`) in a real local Spark against a real broker,
read back with librdkafka (confluent-kafka)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.spark.client import ClientError, SamsaClient
from samsa.spark.encode import Records, encode_batches
from tests.brokerproc import BrokerProcess, free_port

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]  # partition, key, value, headers


def create(broker: BrokerProcess, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])
    for f in futures.values():
        f.result(10)


def consume(broker: BrokerProcess, topic: str, expected: int, timeout: float = 20.0) -> list[Record]:
    """Every record of `topic` from the start (stops once `expected` are in, or at the timeout)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    partitions = c.list_topics(topic, 10).topics[topic].partitions
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out: list[Record] = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                assert m.error() is None, m.error()
                out.append((m.partition(), m.key(), m.value(), list(m.headers() or [])))
        for m in c.consume(1000, 0.2):  # nothing more than expected
            out.append((m.partition(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    return out


def writer(df: Any, broker: BrokerProcess, **options: str) -> Any:
    w = df.write.format("samsa").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    return w


def test_string_keys_go_where_librdkafka_murmur2_sends_them(spark: Any, broker: BrokerProcess,
                                                            topic_name: str) -> None:
    theirs = topic_name + "-rdkafka"
    create(broker, (topic_name, 3), (theirs, 3))
    n = 500
    rows = [(f"key-{i}", f"value-{i}") for i in range(n)]
    writer(spark.createDataFrame(rows, "key string, value string").repartition(2), broker,
           topic=topic_name).save()

    p = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for k, v in rows:
        p.produce(theirs, key=k.encode(), value=v.encode())
    assert p.flush(10) == 0

    ours = consume(broker, topic_name, n)
    assert sorted((k, v) for _, k, v, _ in ours) == sorted((k.encode(), v.encode()) for k, v in rows)
    want = {k: part for part, k, _, _ in consume(broker, theirs, n)}
    assert len({part for part, _, _, _ in ours}) == 3  # the keys spread over every partition
    assert {k: part for part, k, _, _ in ours} == want


def test_binary_keys_values_nulls_and_compression(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    create(broker, (topic_name, 2))
    rows = [(bytes([i % 256, 0, 255]) if i % 3 else None, bytes(range(i % 50)) * 3 if i % 7 else None)
            for i in range(300)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    writer(df, broker, topic=topic_name, **{"kafka.compression.type": "zstd", "kafka.acks": "1"}).save()
    got = consume(broker, topic_name, len(rows))
    assert sorted((k or b"", v or b"", k is None, v is None) for _, k, v, _ in got) == sorted(
        (k or b"", v or b"", k is None, v is None) for k, v in rows)


def test_keyless_rows_spread_over_partitions_in_small_batches(spark: Any, broker: BrokerProcess,
                                                             topic_name: str) -> None:
    create(broker, (topic_name, 2))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df = spark.range(2000).selectExpr("CAST(id AS STRING) AS value").coalesce(1)
        writer(df, broker, topic=topic_name, **{"kafka.batch.size": "1000"}).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    got = consume(broker, topic_name, 2000)
    assert sorted(int(v) for _, _, v, _ in got) == list(range(2000))
    per_partition = [sum(1 for p, _, _, _ in got if p == q) for q in (0, 1)]
    assert per_partition == [1000, 1000]  # 20 Arrow batches of 100, turn by turn
    in_order = [int(v) for p, _, v, _ in got if p == 0]
    assert in_order == sorted(in_order)  # a partition keeps the order rows were written in


def test_topic_column_routes_rows_and_the_option_wins(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    a, b, c = topic_name + "-a", topic_name + "-b", topic_name + "-c"
    create(broker, (a, 2), (b, 1), (c, 1))
    rows = [(a if i % 3 else b, f"k{i}", f"v{i}") for i in range(90)]
    df = spark.createDataFrame(rows, "topic string, key string, value string")
    writer(df, broker).save()
    assert sorted(v for _, _, v, _ in consume(broker, a, 60)) == sorted(f"v{i}".encode() for i in range(90) if i % 3)
    assert sorted(v for _, _, v, _ in consume(broker, b, 30)) == sorted(f"v{i}".encode() for i in range(0, 90, 3))
    writer(df, broker, topic=c).save()  # like Spark: the topic option overrides the column
    assert len(consume(broker, c, 90)) == 90


def test_partition_column_is_obeyed(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    create(broker, (topic_name, 4))
    rows = [(f"k{i}", f"v{i}", i % 4 if i % 5 else None) for i in range(200)]
    writer(spark.createDataFrame(rows, "key string, value string, partition int"), broker, topic=topic_name).save()
    got = {v: p for p, _, v, _ in consume(broker, topic_name, 200)}
    assert len(got) == 200
    for k, v, part in rows:
        if part is not None:
            assert got[v.encode()] == part, v


def test_headers_round_trip(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    create(broker, (topic_name, 1))
    rows = [("a", [("trace", b"abc"), ("n", b"\x00\x01"), ("trace", b"again")]), ("b", None), ("c", []),
            ("d", [("nothing", None)])]
    df = spark.createDataFrame(rows, "value string, headers array<struct<key: string, value: binary>>")
    writer(df.coalesce(1), broker, topic=topic_name).save()
    got = {v: h for _, _, v, h in consume(broker, topic_name, 4)}
    assert got == {b"a": [("trace", b"abc"), ("n", b"\x00\x01"), ("trace", b"again")], b"b": [], b"c": [],
                   b"d": [("nothing", None)]}
    back = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic_name).option("includeHeaders", "true").load()
            .selectExpr("CAST(value AS STRING) AS v", "headers").collect())
    assert {r["v"]: [(h["key"], h["value"]) for h in r["headers"] or []] for r in back} == {
        "a": [("trace", b"abc"), ("n", b"\x00\x01"), ("trace", b"again")], "b": [], "c": [], "d": [("nothing", None)]}


def test_stream_from_one_topic_into_another(spark: Any, broker: BrokerProcess, topic_name: str,
                                            tmp_path: Path) -> None:
    out = topic_name + "-out"
    create(broker, (topic_name, 2), (out, 2))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(400):
        p.produce(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(10) == 0
    q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "250").load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
         .writeStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out)
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.processAllAvailable()
        assert q.exception() is None
    finally:
        q.stop()
    got = consume(broker, out, 400)
    assert sorted((k, v) for _, k, v, _ in got) == sorted((f"k{i}".encode(), f"V{i}".encode()) for i in range(400))


@pytest.mark.parametrize("schema, options, message", [
    ("value string", {}, "topic option required"),
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value string, extra int", {"topic": "t"}, "column 'extra' is not one the samsa sink writes"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("value string, partition long", {"topic": "t"}, "partition attribute type must be an int"),
    ("value string", {"topic": "t", "kafka.compression.type": "brotli"}, "kafka.compression.type"),
    ("value string", {"topic": "t", "kafka.acks": "2"}, "kafka.acks"),
    ("value string", {"transactional.id.prefix": "p"}, "needs the 'topic' option"),
    ("value string", {"topic": "t", "transactional.id.prefix": "p", "kafka.acks": "1"}, "needs kafka.acks=all"),
    ("value string", {"topic": "t", "kafka.transactional.id": "x"}, "set 'transactional.id.prefix'"),
])
def test_bad_input_fails_at_query_start(spark: Any, broker: BrokerProcess, schema: str, options: dict[str, str],
                                        message: str) -> None:
    df = spark.createDataFrame([], schema)
    with pytest.raises(Exception, match=message):
        writer(df, broker, **options).save()


def test_missing_or_unreachable_bootstrap_fails_at_query_start(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        df.write.format("samsa").mode("append").option("topic", "t").save()
    with pytest.raises(Exception, match="cannot reach Samsa at kafka.bootstrap.servers=127.0.0.1:1"):
        df.write.format("samsa").mode("append").option("kafka.bootstrap.servers", "127.0.0.1:1").option(
            "topic", "t").save()
    # a stream makes its writer in the query's thread: the first step fails, before any data
    with pytest.raises(Exception, match="Option 'kafka.bootstrap.servers' must be specified"):
        q = (spark.readStream.format("rate").load().selectExpr("CAST(value AS STRING) AS value")
             .writeStream.format("samsa").option("topic", "t").option("checkpointLocation", str(tmp_path / "c"))
             .start())
        try:
            q.awaitTermination(60)
        finally:
            q.stop()


def test_null_topic_and_missing_partition_fail_the_write(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    create(broker, (topic_name, 2))
    df = spark.createDataFrame([(topic_name, "a"), (None, "b")], "topic string, value string")
    with pytest.raises(Exception, match="Null topic present in the data"):
        writer(df, broker).save()
    df = spark.createDataFrame([("a", 7)], "value string, partition int")
    with pytest.raises(Exception, match=f"partition 7 of topic '{topic_name}' does not exist"):
        writer(df, broker, topic=topic_name).save()


def test_overwrite_mode_is_refused(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="Save mode overwrite is not allowed"):
        writer(df, broker, topic=topic_name).mode("overwrite").save()


def test_too_large_batches_fail_with_advice_and_a_smaller_batch_size_fits(spark: Any, broker: BrokerProcess,
                                                                          topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"max.message.bytes": "2000"})])[topic_name].result(10)
    df = spark.createDataFrame([(f"value-{i:04d}" * 5,) for i in range(100)], "value string").coalesce(1)
    with pytest.raises(Exception, match="MESSAGE_TOO_LARGE.*lower kafka.batch.size"):
        writer(df, broker, topic=topic_name).save()
    writer(df, broker, topic=topic_name, **{"kafka.batch.size": "1500"}).save()
    assert len(consume(broker, topic_name, 100)) == 100


def test_client_produce_retries_after_stale_metadata(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, (topic_name, 2))
    batch, = encode_batches(Records(None, pa.array([b"a", b"b", b"c"])), max_batch_bytes=1 << 20, compression=0,
                            timestamp_ms=1)
    c = SamsaClient(broker.bootstrap)
    try:
        assert c.produce({(topic_name, 0): batch, (topic_name, 1): batch}) == {(topic_name, 0): 0, (topic_name, 1): 0}
        c.brokers[99] = ("127.0.0.1", free_port())  # a leader that moved away and a broker that is gone
        c.leaders[(topic_name, 0)] = 99
        assert c.produce({(topic_name, 0): batch}, backoff_ms=1) == {(topic_name, 0): 3}
        assert c.produce({(topic_name, 1): batch}, acks=0) == {(topic_name, 1): -1}
    finally:
        c.close()
    quick = SamsaClient(broker.bootstrap, timeout=0.5)  # retries go on for the client's timeout too
    try:
        t0 = time.monotonic()
        with pytest.raises(ClientError, match=f"Produce to {topic_name}-5 still failing after [0-9]+ retries"):
            quick.produce({(topic_name, 5): batch}, retries=2, backoff_ms=1)
        assert 0.5 < time.monotonic() - t0 < 10
    finally:
        quick.close()
    got = consume(broker, topic_name, 12)
    assert sorted((p, v) for p, _, v, _ in got) == sorted([(0, v) for v in (b"a", b"b", b"c") * 2]
                                                          + [(1, v) for v in (b"a", b"b", b"c") * 2])


def test_exactly_once_mode_survives_a_rerun_micro_batch(spark: Any, broker: BrokerProcess, topic_name: str,
                                                       tmp_path: Path) -> None:
    """transactional.id.prefix: a micro-batch re-run after a restart (its commit log entry lost, as
    after a crash between committing and logging) is not written twice; read_committed readers
    see every record once. Without the mode the re-run duplicates its records."""
    out = topic_name + "-out"
    create(broker, (topic_name, 2), (out, 2))
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})

    def feed(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            p.produce(topic_name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
        assert p.flush(10) == 0

    ckpt = tmp_path / "ckpt"

    def run() -> None:
        q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic_name).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "100").load()
             .selectExpr("key", "CAST(value AS STRING) AS value")
             .writeStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out)
             .option("transactional.id.prefix", f"{topic_name}-sink")
             .option("checkpointLocation", str(ckpt)).start())
        try:
            q.processAllAvailable()
            assert q.exception() is None
        finally:
            q.stop()

    feed(0, 300)
    run()
    commits = sorted((ckpt / "commits").glob("[0-9]*"), key=lambda f: int(f.name))
    assert len(commits) >= 3
    commits[-1].unlink()  # the last micro-batch is committed in the topic but not in Spark's log
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)
    feed(300, 400)
    run()
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{out}-check", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(out, p, OFFSET_BEGINNING) for p in range(2)])
    got: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 20
    while len(eof) < 2 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            eof.add(m.partition())
            continue
        eof.discard(m.partition())
        got.append(m.value())
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(400))
