"""Samsa's jar-less Python source against Spark's own Kafka connector, on the same topic of a
Samsa broker (started here): N records of B bytes (lz4, P partitions) read into parquet by
`format("samsa")` and by `format("kafka")` (spark-sql-kafka-0-10 at PySpark's version, its jars
from scripts/kafka-jars.sh spark-kafka), alternately, so both see the machine at the same moment.

Figures, each the median of --rounds rounds after one warm-up round of each:
1. batch: `spark.read.format(F)...load().write.parquet(...)`, the whole job timed;
2. stream: `spark.readStream.format(F)` into parquet with Trigger.AvailableNow (one
   micro-batch), from the query's start to its end.
The ratio is samsa's rows/s over kafka's (above 1.0: Samsa's source is the faster). Beside the
wall time, the CPU seconds of Spark (its JVM and every process under it: Python workers, the
streaming source's process) and of the broker, read from /proc: on a shared machine the wall
time varies with the load, the CPU much less.

Usage: .venv/bin/python bench/bench_spark_connector.py [--records N] [--size B] [--partitions P] [--rounds R]
       [--only batch|stream] [--kafka-option NAME=VALUE ...]   (options for format("kafka") only,
       e.g. kafka.max.poll.records=10000)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_spark import fill  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402

FORMATS = ("samsa", "kafka")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(root: int) -> float:
    """CPU seconds of process `root` and all its descendants, with their waited-for children."""
    parents: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(d))
        times[int(d)] = sum(int(x) for x in fields[11:15]) / TICK  # utime stime cutime cstime
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo += parents.get(pid, [])
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds, after one warm-up round")
    ap.add_argument("--only", choices=("batch", "stream"), default=None)
    ap.add_argument("--kafka-option", action="append", default=[], metavar="NAME=VALUE",
                    help="an option for format(\"kafka\") only (repeatable)")
    args = ap.parse_args()
    subprocess.run(["bash", str(ROOT / "scripts" / "kafka-jars.sh"), "spark-kafka"], check=True,
                   stdout=subprocess.DEVNULL)
    from samsa.spark.kafka_jars import connector_jars

    jars = connector_jars()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from samsa.spark.home import use_installed_pyspark

    use_installed_pyspark("local[2]")
    n = args.records
    kafka_options = dict(o.split("=", 1) for o in args.kafka_option)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-connector-") as tmp:
        b = BrokerProcess(Path(tmp) / "broker").start()
        try:
            t0 = time.monotonic()
            fill(b.bootstrap, "bench", n, args.size, args.partitions)
            print(f"{n:,} records of {args.size} B (lz4) in {args.partitions} partitions, produced in "
                  f"{time.monotonic() - t0:.1f} s", flush=True)
            from pyspark.sql import SparkSession

            spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                     .config("spark.ui.showConsoleProgress", "false").config("spark.jars", ",".join(jars))
                     .config("spark.sql.shuffle.partitions", "2").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
            assert b.proc is not None
            broker = b.proc.pid
            runs = iter(range(10_000))

            def options(fmt: str) -> dict[str, str]:
                return {"kafka.bootstrap.servers": b.bootstrap, "subscribe": "bench", "startingOffsets": "earliest",
                        **(kafka_options if fmt == "kafka" else {})}

            def batch(fmt: str) -> Path:
                out = Path(tmp) / f"{fmt}-{next(runs)}"
                spark.read.format(fmt).options(**options(fmt)).load().write.parquet(str(out))
                return out

            def stream(fmt: str) -> Path:
                out = Path(tmp) / f"{fmt}-{next(runs)}"
                q = (spark.readStream.format(fmt).options(**options(fmt)).load().writeStream.format("parquet")
                     .option("path", str(out)).option("checkpointLocation", str(out) + "-ckpt")
                     .trigger(availableNow=True).start())
                q.awaitTermination()
                assert q.exception() is None, q.exception()
                return out

            figures = {"batch": batch, "stream": stream}
            for name, run in figures.items():
                if args.only not in (None, name):
                    continue
                times: dict[str, list[float]] = {f: [] for f in FORMATS}
                cpus: dict[str, list[tuple[float, float]]] = {f: [] for f in FORMATS}
                for r in range(args.rounds + 1):  # round 0 warms both up
                    order = FORMATS if r % 2 == 0 else FORMATS[::-1]
                    for fmt in order:
                        c0, b0, t0 = cpu_seconds(jvm), cpu_seconds(broker), time.monotonic()
                        out = run(fmt)
                        took = time.monotonic() - t0
                        cpu = (cpu_seconds(jvm) - c0, cpu_seconds(broker) - b0)
                        if r == 0:
                            assert spark.read.parquet(str(out)).count() == n, (fmt, name)
                        else:
                            times[fmt].append(took)
                            cpus[fmt].append(cpu)
                        print(f"  {name} round {r}{' (warm-up)' if r == 0 else ''}: {fmt} {took:.2f} s "
                              f"({n / took:,.0f} rows/s), CPU: Spark {cpu[0]:.1f} s, broker {cpu[1]:.1f} s, "
                              f"load {os.getloadavg()[0]:.1f}", flush=True)
                med = {f: statistics.median(t) for f, t in times.items()}
                print(f"{name} into parquet: samsa {n / med['samsa']:,.0f} rows/s (median {med['samsa']:.2f} s), "
                      f"kafka {n / med['kafka']:,.0f} rows/s (median {med['kafka']:.2f} s); "
                      f"samsa/kafka {med['kafka'] / med['samsa']:.2f}", flush=True)
                for f in FORMATS:
                    print(f"  {f}: median CPU Spark {statistics.median(c[0] for c in cpus[f]):.1f} s, broker "
                          f"{statistics.median(c[1] for c in cpus[f]):.1f} s", flush=True)
            spark.stop()
        finally:
            b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
