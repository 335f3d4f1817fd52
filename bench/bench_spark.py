"""The Spark source against a real broker (started here): rows/s into Spark, and the fixed cost
of a micro-batch.

1. N records of B bytes in P partitions; `spark.read.format("samsa")` then a query that
   touches every value (sum of lengths) and a write to parquet: rows/s (the second of two
   runs, so executor Python workers are warm).
2. Trigger.AvailableNow with maxOffsetsPerTrigger small: the median trigger duration of a
   micro-batch that reads few rows (the source's planning + Spark's per-batch overhead).

Usage: .venv/bin/python bench/bench_spark.py [--records N] [--size B] [--partitions P]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.brokerproc import BrokerProcess  # noqa: E402


def fill(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "lz4", "queue.buffering.max.messages": 2_000_000})
    value = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    with tempfile.TemporaryDirectory(prefix="samsa-bench-spark-") as tmp:
        b = BrokerProcess(Path(tmp) / "broker").start()
        try:
            fill(b.bootstrap, "bench", args.records, args.size, args.partitions)
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            reader = spark.read.format("samsa").option("kafka.bootstrap.servers", b.bootstrap).option(
                "subscribe", "bench")
            for run in range(2):
                t0 = time.monotonic()
                total = reader.load().selectExpr("sum(length(value)) AS s").collect()[0]["s"]
                dt = time.monotonic() - t0
                assert total == args.records * args.size
            print(f"batch read, {args.records:,} x {args.size} B in {args.partitions} partitions: "
                  f"{args.records / dt:,.0f} rows/s ({dt:.2f} s)")
            t0 = time.monotonic()
            reader.load().write.mode("overwrite").parquet(str(Path(tmp) / "parquet"))
            dt = time.monotonic() - t0
            print(f"batch read into parquet: {args.records / dt:,.0f} rows/s ({dt:.2f} s)")

            for run in range(2):
                out = Path(tmp) / f"stream-parquet-{run}"
                t0 = time.monotonic()
                q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", b.bootstrap)
                     .option("subscribe", "bench").option("startingOffsets", "earliest").load()
                     .writeStream.format("parquet").option("path", str(out))
                     .option("checkpointLocation", str(out) + "-ckpt").trigger(availableNow=True).start())
                q.awaitTermination()
                dt = time.monotonic() - t0
            rows = spark.read.parquet(str(out)).count()
            assert rows == args.records, rows
            print(f"stream (Trigger.AvailableNow) into parquet: {args.records / dt:,.0f} rows/s ({dt:.2f} s, "
                  f"{len(q.recentProgress)} micro-batch(es))")

            q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", b.bootstrap)
                 .option("subscribe", "bench").option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "2000").load()
                 .writeStream.format("noop").option("checkpointLocation", str(Path(tmp) / "ckpt"))
                 .trigger(availableNow=True).start())
            deadline = time.monotonic() + 60
            while len(q.recentProgress) < 25 and time.monotonic() < deadline:
                time.sleep(0.2)
            q.stop()
            durations = [p["durationMs"]["triggerExecution"] for p in q.recentProgress[5:]]
            print(f"micro-batches of <= 2000 rows: median {statistics.median(durations):.0f} ms per trigger "
                  f"over {len(durations)} batches")
            parts = {k: statistics.median(p["durationMs"].get(k, 0) for p in q.recentProgress[5:])
                     for k in q.recentProgress[-1]["durationMs"] if k != "triggerExecution"}
            print("  median ms by phase: " + ", ".join(f"{k} {v:.0f}" for k, v in parts.items()))
            spark.stop()
        finally:
            b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
