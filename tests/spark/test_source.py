"""The samsa data source in a real local Spark against a real broker."""

from __future__ import annotations

import json
import random
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


def test_include_headers_reads_record_headers(spark: Any, broker: BrokerProcess, topic_name: str) -> None:
    produce(broker, topic_name, 1, [])
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic_name, value=b"with", headers=[("trace", b"abc"), ("n", b"\x00\x01"), ("trace", b"again")])
    p.produce(topic_name, value=b"without")
    assert p.flush(10) == 0
    df = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name).option("includeHeaders", "true").load())
    assert df.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    rows = {bytes(r["value"]): r["headers"] for r in df.select("value", "headers").collect()}
    assert [(h["key"], bytes(h["value"])) for h in rows[b"with"]] == [("trace", b"abc"), ("n", b"\x00\x01"),
                                                                      ("trace", b"again")]
    assert not rows[b"without"]


def _events(n: int, seed: int) -> list[tuple[str, int, float]]:
    """(city, event time ms, value): mostly in order, some up to 20 s late (inside the watermark)."""
    rnd = random.Random(seed)
    base = 1_700_000_000_000
    out = []
    for i in range(n):
        ts = base + i * 100 - (rnd.randint(1, 20_000) if rnd.random() < 0.1 else 0)
        out.append((rnd.choice(["oslo", "lima", "pune"]), ts, round(rnd.uniform(0, 100), 2)))
    return out


def test_windowed_aggregation_with_watermark_matches_python(spark: Any, broker: BrokerProcess, topic_name: str,
                                                            tmp_path: Path) -> None:
    events = _events(3000, seed=7)  # 300 s of event time
    produce(broker, topic_name, 2, [json.dumps({"city": c, "ts": t, "v": v}).encode() for c, t, v in events])
    # one event far ahead moves the watermark past every window above
    flush_ts = events[0][1] + 3_600_000
    produce(broker, topic_name, 2, [json.dumps({"city": "oslo", "ts": flush_ts, "v": 0.0}).encode()])
    from pyspark.sql import functions as F

    q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "1000").load()
         .select(F.from_json(F.col("value").cast("string"), "city STRING, ts LONG, v DOUBLE").alias("e"))
         .select("e.city", F.timestamp_millis("e.ts").alias("t"), "e.v")
         .withWatermark("t", "30 seconds")
         .groupBy("city", F.window("t", "1 minute"))
         .agg(F.count("*").alias("n"), F.avg("v").alias("avg"), F.max("v").alias("max"))
         .select("city", (F.unix_millis(F.col("window.start"))).alias("start"), "n", "avg", "max")
         .writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ckpt")).outputMode("append")
         .trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    got = {(r["city"], r["start"]): (r["n"], r["avg"], r["max"]) for r in spark.read.parquet(str(tmp_path / "out")).collect()}

    want: dict[tuple[str, int], list[float]] = {}
    for c, t, v in events:
        want.setdefault((c, t - t % 60_000), []).append(v)
    assert set(got) == set(want)
    for k, vs in want.items():
        n, avg, mx = got[k]
        assert (n, mx) == (len(vs), max(vs)), k
        assert abs(avg - sum(vs) / len(vs)) < 1e-9, k


BAD_OPTIONS = [
    ({"subscribe": "{topic}", "assign": '{{"{topic}":[0]}}'}, "Only one of the following options"),
    ({"subscribe": "no-such-topic-{topic}"}, "create the topic first"),
    ({"subscribe": "{topic}", "startingOffsets": '{{"{topic}":{{"0":}}'}, "startingOffsets"),
    ({"subscribe": "{topic}", "bootstrap": "127.0.0.1:1"}, "kafka.bootstrap.servers=127.0.0.1:1"),
]


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize("options,message", BAD_OPTIONS, ids=["subscribe+assign", "unknown-topic", "bad-json",
                                                              "unreachable"])
def test_bad_options_fail_when_the_query_is_defined(spark: Any, broker: BrokerProcess, topic_name: str,
                                                    options: dict[str, str], message: str, streaming: bool) -> None:
    produce(broker, topic_name, 1, [b"x"])
    opts = {k: v.format(topic=topic_name) for k, v in options.items()}
    bootstrap = opts.pop("bootstrap", broker.bootstrap)
    reader = spark.readStream if streaming else spark.read
    with pytest.raises(Exception) as info:
        reader.format("samsa").option("kafka.bootstrap.servers", bootstrap).options(**opts).load()
    text = str(info.value)
    assert message in text
    assert text.count("File ") <= 3, text  # our message and a short stack, not a worker's innards


def test_streaming_only_mistake_fails_the_query_at_its_start(spark: Any, broker: BrokerProcess, topic_name: str,
                                                             tmp_path: Path) -> None:
    produce(broker, topic_name, 1, [b"x"])
    df = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic_name).option("endingOffsets", "latest").load())
    q = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c")).start()
    try:
        with pytest.raises(Exception, match="remove option 'endingOffsets'") as info:
            q.awaitTermination(60)
        assert "UnboundLocalError" not in str(info.value)
    finally:
        q.stop()


def test_read_committed_skips_aborted_and_open_transactions(spark: Any, broker: BrokerProcess,
                                                            topic_name: str) -> None:
    """kafka.isolation.level=read_committed: committed records only, up to the last stable offset
    (an open transaction's records are not read); read_uncommitted reads every data record, and
    neither shows the transaction markers as rows."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-tx"})
    p.init_transactions(20)
    for i, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for j in range(5):
            p.produce(topic_name, b"%d-%d" % (i, j))
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(20)
    p.begin_transaction()
    p.produce(topic_name, b"open")
    p.flush(10)  # left open

    def read(level: str) -> list[bytes]:
        df = (spark.read.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic_name).option("kafka.isolation.level", level).load())
        return [bytes(r.value) for r in df.orderBy("offset").collect()]

    committed = [b"%d-%d" % (i, j) for i in (0, 2) for j in range(5)]
    assert read("read_committed") == committed
    everything = [b"%d-%d" % (i, j) for i in range(3) for j in range(5)] + [b"open"]
    assert read("read_uncommitted") == everything
    p.abort_transaction(20)
    with pytest.raises(Exception, match="kafka.isolation.level"):
        read("serializable")
