"""The whole pipeline under load: does the Spark job keep up, and how fresh are the windows?

One broker, the sensor simulator at --rate readings/s, the pipeline job (local[2], trigger
2 s) — all on this machine. For --seconds it samples the job's lag (readings end offsets minus
the offsets its last micro-batch ended at) and reads `aqi_aggregates` like the dashboard does,
timing each window update from the creation of the newest reading in it (`last_event_ts`, the
simulator stamps readings when it makes them) to its arrival: the event-to-dashboard latency,
less the dashboard's own push (at most one second).

Usage: .venv/bin/python bench/bench_pipeline.py [--rate 5000 20000] [--seconds 90]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from samsa.cli.demo import create_topics  # noqa: E402
from samsa.pipeline import contract  # noqa: E402
from samsa.pipeline.ingest.simulate import Simulator  # noqa: E402
from samsa.pipeline.job import JobConfig, PipelineJob, spark_session  # noqa: E402
from tests.brokerproc import BrokerProcess  # noqa: E402


def run(rate: int, seconds: float, spark: object, tmp: Path) -> None:
    b = BrokerProcess(tmp / f"broker-{rate}").start()
    try:
        create_topics(b.bootstrap)
        job = PipelineJob(spark, JobConfig(bootstrap=b.bootstrap, data_dir=tmp / f"data-{rate}",
                                           max_offsets_per_trigger=rate * 5)).start()
        reader = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"bench-{rate}", "log_level": 3,
                           "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        reader.assign([TopicPartition(contract.AGGREGATES, p, 0) for p in range(2)])
        probe = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"probe-{rate}", "log_level": 3})
        sim = Simulator(b.bootstrap, rate=rate, late_ratio=0.0, bad_ratio=0.005)
        stop = threading.Event()
        t = threading.Thread(target=sim.run, args=(stop,), daemon=True)
        t.start()
        t0 = time.monotonic()
        latencies: list[float] = []
        lags: list[tuple[float, int]] = []
        next_sample = t0
        while time.monotonic() - t0 < seconds:
            m = reader.poll(0.1)
            if m is not None and not m.error():
                v = json.loads(m.value())
                if time.monotonic() - t0 > 20:  # past the start-up
                    latencies.append(time.time() * 1000 - v["last_event_ts"])
            if time.monotonic() >= next_sample:
                next_sample += 2
                end = sum(probe.get_watermark_offsets(TopicPartition(contract.READINGS, p), 2)[1] for p in range(2))
                s = job.last_status
                done = sum(s["end_offsets"].get(contract.READINGS, {}).values()) if s else 0
                lags.append((time.monotonic() - t0, end - done))
        stop.set()
        t.join(30)
        stats = sim.stats()
        job.stop()
        reader.close()
        probe.close()
        steady = [lag for at, lag in lags if at > seconds / 3]
        third = max(1, len(steady) // 3)
        print(f"rate {rate:,}/s for {seconds:.0f} s: simulator acked {stats['rate']:,.0f}/s "
              f"(skipped {stats['skipped']:,}); job lag after start-up: first third median "
              f"{statistics.median(steady[:third]):,.0f}, last third median {statistics.median(steady[-third:]):,.0f} "
              f"records (max {max(steady):,})")
        if latencies:
            q = statistics.quantiles(latencies, n=100)
            print(f"  reading created -> window update on aqi_aggregates: median {statistics.median(latencies) / 1000:.2f} s, "
                  f"p99 {q[98] / 1000:.2f} s over {len(latencies):,} updates")
        if job.last_status:
            print(f"  last micro-batch: {job.last_status['input_rows']:,} rows in {job.last_status['duration_ms']} ms")
    finally:
        b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, nargs="+", default=[5000, 20000])
    ap.add_argument("--seconds", type=float, default=90)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-bench-pipeline-") as tmp:
        spark = spark_session(None, log_file=Path(tmp) / "spark.log")
        for rate in args.rate:
            run(rate, args.seconds, spark, Path(tmp))
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
