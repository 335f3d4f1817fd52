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

Beside 1 and 2 (into parquet), the same query on a "ceiling" source, run alternately with
Samsa's so both see the same machine: a Python data source that yields ready-made Arrow
batches of the same rows (Spark's Kafka schema, same value size), with no broker and no
decoding. No Python data source can beat it here; the gap between the two is Samsa's own cost.

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
from typing import Any

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


def ceiling_source(rows: int, size: int, partitions: int, chunk: int = 65_536):
    """The data source class "ceiling": `rows` ready-made rows in Spark's Kafka schema, `partitions`
    ranges, batch and stream (AvailableNow). Defined in a function, so Spark pickles it by value."""
    import numpy as np
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

    from samsa.spark.arrow import KAFKA_SCHEMA
    from samsa.spark.source import SCHEMA

    def ranges(lo: int, hi: int) -> list:
        step = -(-(hi - lo) // partitions)
        return [InputPartition((p, a, min(hi, a + step))) for p, a in enumerate(range(lo, hi, step))]

    def read(partition: InputPartition):
        p, lo, hi = partition.value
        n = min(chunk, hi - lo)
        value = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * size),
                                                        pa.py_buffer(b"x" * (size * n))])
        topic = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 5),
                                                        pa.py_buffer(b"bench" * n)])
        fixed = [pa.nulls(n, pa.binary()), value, topic, pa.array(np.full(n, p, np.int32))]
        stamps = pa.array(np.full(n, 1_700_000_000_000_000, np.int64)).cast(KAFKA_SCHEMA.field("timestamp").type)
        zeros = pa.array(np.zeros(n, np.int32))
        for a in range(lo, hi, chunk):
            k = min(chunk, hi - a)
            cols = [c.slice(0, k) for c in fixed] + [pa.array(np.arange(a, a + k, dtype=np.int64)),
                                                     stamps.slice(0, k), zeros.slice(0, k)]
            yield pa.RecordBatch.from_arrays(cols, schema=KAFKA_SCHEMA)

    class Reader(DataSourceReader):
        def partitions(self):
            return ranges(0, rows)

        def read(self, partition):
            return read(partition)

    class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, per_trigger):
            self.per_trigger = per_trigger

        def getDefaultReadLimit(self):
            return ReadMaxRows(self.per_trigger) if self.per_trigger else ReadAllAvailable()

        def initialOffset(self):
            return {"offset": 0}

        def prepareForTriggerAvailableNow(self):
            pass

        def latestOffset(self, start, limit):
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else rows
            return {"offset": min(rows, start["offset"] + cap)}

        def partitions(self, start, end):
            return ranges(start["offset"], end["offset"])

        def read(self, partition):
            return read(partition)

    class Ceiling(DataSource):
        @classmethod
        def name(cls):
            return "ceiling"

        def schema(self):
            return SCHEMA

        def reader(self, schema):
            return Reader()

        def streamReader(self, schema):
            per = self.options.get("maxoffsetspertrigger") or self.options.get("maxOffsetsPerTrigger")
            return StreamReader(int(per) if per else None)

    return Ceiling


def timed(run, repeat: int) -> float:
    """Median seconds of `repeat` runs of `run()`, after one unmeasured warm-up run."""
    run()
    times = []
    for _ in range(repeat):
        t0 = time.monotonic()
        run()
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def timed_pair(run_a, run_b, repeat: int) -> tuple[float, float]:
    """Median seconds of a and of b, run alternately `repeat` times after one warm-up run of each."""
    run_a()
    run_b()
    a, b = [], []
    for _ in range(repeat):
        for run, times in ((run_a, a), (run_b, b)):
            t0 = time.monotonic()
            run()
            times.append(time.monotonic() - t0)
    return statistics.median(a), statistics.median(b)


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
            spark.dataSource.register(ceiling_source(args.records, args.size, args.partitions))
            n = args.records

            def load(fmt: str, stream: bool = False, **options: str) -> Any:
                r = (spark.readStream if stream else spark.read).format(fmt)
                if fmt == "samsa":
                    options = {"kafka.bootstrap.servers": b.bootstrap, "subscribe": "bench",
                               "startingOffsets": "earliest", **options}
                return r.options(**options).load()

            def batch_sum() -> None:
                assert load("samsa").selectExpr("sum(length(value)) AS s").collect()[0]["s"] == n * args.size

            def batch_parquet(fmt: str, out: Path) -> None:
                load(fmt).write.mode("overwrite").parquet(str(out))

            def stream_parquet(out: Path, per_trigger: int | None = None, fmt: str = "samsa") -> list[dict]:
                df = load(fmt, stream=True, **({"maxOffsetsPerTrigger": str(per_trigger)} if per_trigger else {}))
                q = (df.writeStream.format("parquet").option("path", str(out))
                     .option("checkpointLocation", str(out) + "-ckpt").trigger(availableNow=True).start())
                q.awaitTermination()
                assert spark.read.parquet(str(out)).count() == n
                return [p for p in q.recentProgress if p["numInputRows"]]

            def both(figure: str, run) -> None:
                """`run(fmt)` for samsa and for the ceiling source, alternately."""
                samsa, ceiling = timed_pair(lambda: run("samsa"), lambda: run("ceiling"), args.repeat)
                print(f"{figure}: {n / samsa:,.0f} rows/s (ceiling source: {n / ceiling:,.0f} rows/s; "
                      f"samsa at {ceiling / samsa:.0%} of it)", flush=True)

            print(f"{n:,} records of {args.size} B in {args.partitions} partitions; each figure is the median "
                  f"of {args.repeat} runs after a warm-up run", flush=True)
            print(f"batch read (sum of value lengths): {n / timed(batch_sum, args.repeat):,.0f} rows/s", flush=True)
            runs = iter(range(1000))
            both("batch read into parquet", lambda fmt: batch_parquet(fmt, Path(tmp) / f"b{next(runs)}"))
            both("stream (Trigger.AvailableNow, one micro-batch) into parquet, query start to end",
                 lambda fmt: stream_parquet(Path(tmp) / f"s{next(runs)}", fmt=fmt))
            per = max(1, n // 4)
            rates: dict[str, list[float]] = {"samsa": [], "ceiling": []}
            for _ in range(args.repeat + 1):  # the first of each is the warm-up
                for fmt, got in rates.items():
                    progress = stream_parquet(Path(tmp) / f"s{next(runs)}", per, fmt)
                    ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
                    got.append(sum(p["numInputRows"] for p in progress) / ms * 1000)
            samsa, ceiling = (statistics.median(rates[k][1:]) for k in ("samsa", "ceiling"))
            print(f"stream into parquet, {per:,} rows per micro-batch, sum over the micro-batches "
                  f"(without the query's start): {samsa:,.0f} rows/s (ceiling source: {ceiling:,.0f} rows/s; "
                  f"samsa at {samsa / ceiling:.0%} of it)", flush=True)

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
