"""The Spark source against a real broker (started here): rows/s into Spark, and the fixed cost
of a micro-batch. Each figure is the median of --repeat runs after a warm-up run (Spark's JIT
and Python workers warm, as in a long-running job).

1. N records of B bytes in P partitions, read by `spark.read.format("samsa")` into a query that
   touches every value (sum of lengths), and into parquet.
2. `spark.readStream.format("samsa")` into parquet with Trigger.AvailableNow: one micro-batch,
   timed from the query's start to its end (Spark starts a Python process for the source of
   each query); then four micro-batches (maxOffsetsPerTrigger N/4), rows over the summed
   durations of the micro-batches: the rate of a running stream.
3. Trigger.AvailableNow with maxOffsetsPerTrigger small: the median trigger duration of a
   micro-batch that reads few rows (the source's planning + Spark's per-batch overhead).

Usage: .venv/bin/python bench/bench_spark.py [--records N] [--size B] [--partitions P] [--repeat R]
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


def timed(run, repeat: int) -> float:
    """Median seconds of `repeat` runs of `run()`, after one unmeasured warm-up run."""
    run()
    times = []
    for _ in range(repeat):
        t0 = time.monotonic()
        run()
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="measured runs per figure, after one warm-up run")
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from samsa.spark.home import use_installed_pyspark

    use_installed_pyspark("local[2]")  # workers import the installed pyspark, not a zip compiled each time
    with tempfile.TemporaryDirectory(prefix="samsa-bench-spark-") as tmp:
        b = BrokerProcess(Path(tmp) / "broker").start()
        try:
            fill(b.bootstrap, "bench", args.records, args.size, args.partitions)
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            reader = spark.read.format("samsa").option("kafka.bootstrap.servers", b.bootstrap).option(
                "subscribe", "bench")
            n = args.records

            def batch_sum() -> None:
                assert reader.load().selectExpr("sum(length(value)) AS s").collect()[0]["s"] == n * args.size

            def batch_parquet(out: Path) -> None:
                reader.load().write.mode("overwrite").parquet(str(out))

            def stream_parquet(out: Path, per_trigger: int | None = None) -> list[dict]:
                r = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", b.bootstrap)
                     .option("subscribe", "bench").option("startingOffsets", "earliest"))
                if per_trigger:
                    r = r.option("maxOffsetsPerTrigger", str(per_trigger))
                q = (r.load().writeStream.format("parquet").option("path", str(out))
                     .option("checkpointLocation", str(out) + "-ckpt").trigger(availableNow=True).start())
                q.awaitTermination()
                assert spark.read.parquet(str(out)).count() == n
                return [p for p in q.recentProgress if p["numInputRows"]]

            print(f"{n:,} records of {args.size} B in {args.partitions} partitions; each figure is the median "
                  f"of {args.repeat} runs after a warm-up run", flush=True)
            print(f"batch read (sum of value lengths): {n / timed(batch_sum, args.repeat):,.0f} rows/s", flush=True)
            runs = iter(range(1000))
            print(f"batch read into parquet: "
                  f"{n / timed(lambda: batch_parquet(Path(tmp) / f'b{next(runs)}'), args.repeat):,.0f} rows/s",
                  flush=True)
            print(f"stream (Trigger.AvailableNow, one micro-batch) into parquet, query start to end: "
                  f"{n / timed(lambda: stream_parquet(Path(tmp) / f's{next(runs)}'), args.repeat):,.0f} rows/s",
                  flush=True)
            per = max(1, n // 4)
            rates = []
            for _ in range(args.repeat + 1):
                progress = stream_parquet(Path(tmp) / f"s{next(runs)}", per)
                ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
                rates.append(sum(p["numInputRows"] for p in progress) / ms * 1000)
            print(f"stream into parquet, {per:,} rows per micro-batch, sum over the micro-batches "
                  f"(without the query's start): {statistics.median(rates[1:]):,.0f} rows/s", flush=True)

            fill(b.bootstrap, "small", 60_000, args.size, args.partitions)
            q = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", b.bootstrap)
                 .option("subscribe", "small").option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "2000").load()
                 .writeStream.format("noop").option("checkpointLocation", str(Path(tmp) / "ckpt"))
                 .trigger(availableNow=True).start())
            q.awaitTermination()
            progress = [p for p in q.recentProgress if p["numInputRows"]][5:]  # warm from the 6th on
            durations = [p["durationMs"]["triggerExecution"] for p in progress]
            print(f"micro-batches of <= 2000 rows: median {statistics.median(durations):.0f} ms per trigger "
                  f"over {len(durations)} batches")
            parts = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress)
                     for k in progress[-1]["durationMs"] if k != "triggerExecution"}
            print("  median ms by phase: " + ", ".join(f"{k} {v:.0f}" for k, v in parts.items()))
            spark.stop()
        finally:
            b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
