"""The Spark sink against a real broker (started here): rows/s from a Spark DataFrame into a topic.

N values of B bytes (`spark.range` -> lpad), written with `df.write.format("samsa")` into a
topic of P partitions: keyless (one partition per Arrow batch, in turn), then keyed (murmur2
of a string key), then keyless with lz4. Each is timed on its second run (executor Python
workers warm) and checked by the topic's end offsets.

Usage: .venv/bin/python bench/bench_spark_sink.py [--records N] [--size B] [--partitions P]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from samsa.spark.client import LATEST_TIMESTAMP, SamsaClient  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from samsa.spark.home import use_installed_pyspark

    use_installed_pyspark("local[2]")  # workers import the installed pyspark, not a zip compiled each time
    with tempfile.TemporaryDirectory(prefix="samsa-bench-sink-") as tmp:
        b = BrokerProcess(Path(tmp) / "broker").start()
        try:
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            value = f"CAST(lpad(CAST(id AS STRING), {args.size}, 'x') AS BINARY) AS value"
            cases = [("keyless", [value], {}), ("keyed (murmur2)", ["CAST(id AS STRING) AS key", value], {}),
                     ("keyless, lz4", [value], {"kafka.compression.type": "lz4"})]
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            client = SamsaClient(b.bootstrap)
            for i, (name, columns, options) in enumerate(cases):
                topic = f"bench-{i}"
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                df = spark.range(args.records, numPartitions=2).selectExpr(*columns)
                w = df.write.format("samsa").mode("append").option("kafka.bootstrap.servers", b.bootstrap).option(
                    "topic", topic)
                for k, v in options.items():
                    w = w.option(k, v)
                for _ in range(2):
                    t0 = time.monotonic()
                    w.save()
                    dt = time.monotonic() - t0
                tps = [(topic, p) for p in range(args.partitions)]
                ends = client.list_offsets(tps, LATEST_TIMESTAMP)
                assert sum(ends.values()) == 2 * args.records, ends
                print(f"batch write, {name}, {args.records:,} x {args.size} B into {args.partitions} partitions: "
                      f"{args.records / dt:,.0f} rows/s ({dt:.2f} s; per partition {sorted(ends.values())})")
            client.close()
            spark.stop()
        finally:
            b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
