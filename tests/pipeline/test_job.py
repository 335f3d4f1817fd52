"""The pipeline's Spark job against a real broker in a real local Spark: validation into the
dead-letter topic, windows checked against a Python recomputation, stored parquet queried with
DuckDB, and a restart that neither loses nor doubles a window."""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.cli.pipeline import views
from samsa.pipeline import aqi
from samsa.pipeline.job import (
    ConnectorJarsMissing,
    JobConfig,
    PipelineJob,
    add_arguments,
    config_from,
    session_jars,
)
from tests.brokerproc import BrokerProcess

CITIES = {"Oslo": 4.0, "Lima": 20.0, "Delhi": 95.0}  # baseline PM2.5: Delhi's windows raise alerts
BAD = [b"not json at all", b'{"sensor_id": "x-1", "city": "Oslo", "ts": 1}',  # missing pm25, pm10
       b'{"sensor_id": "x-2", "city": "Oslo", "ts": %d, "pm25": -4, "pm10": 3}',
       b'{"sensor_id": "x-3", "city": "Oslo", "ts": %d, "pm25": 4, "pm10": 3}']  # the last: from the future
REASONS = ["malformed JSON", "missing field pm25", "negative pm25", "timestamp in the future"]


def readings(n: int, start_ms: int, span_ms: int, seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        city = rnd.choice(list(CITIES))
        base = CITIES[city]
        out.append({"sensor_id": f"{city.lower()}-{rnd.randint(1, 2)}", "city": city, "lat": 1.0, "lon": 2.0,
                    "ts": start_ms + rnd.randrange(span_ms), "pm25": round(base * rnd.uniform(0.8, 1.2), 1),
                    "pm10": round(base * 1.5 * rnd.uniform(0.8, 1.2), 1), "no2": 20.0, "o3": 30.0,
                    "temperature": 10.0})
    return out


def produce(bootstrap: str, topic: str, values: list[bytes], keys: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for k, v in zip(keys, values):
        p.produce(topic, key=k.encode(), value=v)
    assert p.flush(15) == 0


def end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe-" + uuid.uuid4().hex})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), 5)[1] for p in (0, 1))
    finally:
        c.close()


def read_all(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-" + uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    out, idle = [], time.monotonic() + 5
    try:
        while time.monotonic() < idle:
            m = c.poll(0.5)
            if m is not None and not m.error():
                out.append(json.loads(m.value()))
                idle = time.monotonic() + 2
    finally:
        c.close()
    return out


def run_until(job: PipelineJob, done: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert job.failed() is None, job.failed()
        assert time.monotonic() < deadline, f"the job did not get there in {timeout} s: {job.last_status}"
        time.sleep(0.5)


def expected_windows(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], tuple[int, float, float]]:
    groups: dict[tuple[str, str, int], list[float]] = {}
    for r in rows:
        minute = r["ts"] - r["ts"] % 60_000
        groups.setdefault(("city_1m", r["city"], minute), []).append(r["pm25"])
        groups.setdefault(("sensor_1m", r["sensor_id"], minute), []).append(r["pm25"])
        for k in range(5):
            groups.setdefault(("city_5m", r["city"], minute - k * 60_000), []).append(r["pm25"])
            groups.setdefault(("sensor_5m", r["sensor_id"], minute - k * 60_000), []).append(r["pm25"])
    return {k: (len(v), sum(v) / len(v), max(v)) for k, v in groups.items()}


def test_job_validates_aggregates_stores_and_resumes(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("readings", "dlq", "aggregates", "alerts", "status")}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
        fut.result(10)
    cfg = JobConfig(bootstrap=broker.bootstrap, data_dir=tmp_path / "data", trigger="1 second",
                    storage_trigger="1 second",
                    watermark="10 minutes", topics=topics)
    now = int(time.time() * 1000)
    first = readings(600, now - 240_000, 180_000, seed=1)
    bad = [BAD[0], BAD[1], BAD[2] % now, BAD[3] % (now + 3_600_000)]
    produce(broker.bootstrap, topics["readings"], [json.dumps(r).encode() for r in first] + bad,
            [r["sensor_id"] for r in first] + ["bad"] * len(bad))
    total = end_offset(broker.bootstrap, topics["readings"])

    def caught_up() -> bool:
        return all(n == total for n in job.consumed().values())

    job = PipelineJob(spark, cfg).start()
    try:
        run_until(job, caught_up)
    finally:
        job.stop()

    dead = read_all(broker.bootstrap, topics["dlq"])
    assert sorted(d["reason"] for d in dead) == sorted(REASONS)
    assert all(d["topic"] == topics["readings"] and d["raw"] for d in dead)

    # a restart resumes from the checkpoints: more readings, some into windows already emitted
    second = readings(400, now - 120_000, 110_000, seed=2)
    produce(broker.bootstrap, topics["readings"], [json.dumps(r).encode() for r in second],
            [r["sensor_id"] for r in second])
    total = end_offset(broker.bootstrap, topics["readings"])
    job = PipelineJob(spark, cfg).start()
    try:
        run_until(job, caught_up)
    finally:
        job.stop()

    con = duckdb.connect()
    for name, body in views(cfg.data_dir).items():
        con.execute(f"CREATE VIEW {name} AS {body}")
    assert con.execute("SELECT count(*) FROM readings").fetchone()[0] == len(first) + len(second)
    got = {(k, key, ws): (n, avg, mx) for k, key, ws, n, avg, mx in con.execute(
        "SELECT kind, key, window_start, count, pm25_avg, pm25_max FROM windows").fetchall()}
    want = expected_windows(first + second)
    assert set(got) == set(want)  # no window lost, none doubled
    for k, (n, avg, mx) in want.items():
        assert got[k][0] == n and got[k][2] == mx and abs(got[k][1] - avg) < 1e-6, k

    alerts = read_all(broker.bootstrap, topics["alerts"])
    assert alerts and {a["city"] for a in alerts} == {"Delhi"}
    assert all(a["aqi"] >= aqi.ALERT_THRESHOLD for a in alerts)
    latest = {(a["kind"], a["sensor_id"] or a["city"], a["window_start"]): a
              for a in read_all(broker.bootstrap, topics["aggregates"])}
    assert set(latest) == set(want)  # the topic's last update of each window is the final one
    for k, a in latest.items():
        assert a["count"] == want[k][0] and a["category"] == aqi.category(a["aqi"])


def produce_in_transaction(bootstrap: str, topic: str, rows: list[dict[str, Any]], commit: bool) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "readings-" + uuid.uuid4().hex})
    p.init_transactions(30)
    p.begin_transaction()
    for r in rows:
        p.produce(topic, key=r["sensor_id"].encode(), value=json.dumps(r).encode())
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)
        p.abort_transaction(30)


def rewind_checkpoint(query_dir: Path, batch: int) -> None:
    """What a crash of the driver after the sink's commit and before Spark's commit log leaves
    behind: micro-batch `batch` planned (its offsets logged) but not marked done, nothing later."""
    for kind, first in (("commits", batch), ("offsets", batch + 1)):
        for f in (query_dir / kind).iterdir():
            n = f.name.removeprefix(".").removesuffix(".crc")
            if n.isdigit() and int(n) >= first:
                f.unlink()


def test_exactly_once_job_does_not_resend_a_replayed_batch(spark: Any, broker: BrokerProcess, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("readings", "dlq", "aggregates", "alerts", "status")}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
        fut.result(10)
    cfg = JobConfig(bootstrap=broker.bootstrap, data_dir=tmp_path / "data", trigger="1 second",
                    storage_trigger="1 second", watermark="10 minutes", topics=topics, exactly_once=True,
                    isolation_level="read_committed")
    now = int(time.time() * 1000)
    first = readings(500, now - 240_000, 180_000, seed=3)
    aborted = [dict(r, sensor_id="aborted-" + r["sensor_id"]) for r in readings(80, now - 240_000, 180_000, seed=4)]
    produce_in_transaction(broker.bootstrap, topics["readings"], first[:250], commit=True)
    produce_in_transaction(broker.bootstrap, topics["readings"], aborted, commit=False)
    produce_in_transaction(broker.bootstrap, topics["readings"], first[250:], commit=True)
    total = end_offset(broker.bootstrap, topics["readings"])

    def caught_up() -> bool:
        return all(n == total for n in job.consumed().values())

    job = PipelineJob(spark, cfg).start()
    try:
        run_until(job, caught_up)
    finally:
        job.stop()
    sent_first = job.writer.windows_written
    assert sent_first > 0

    # the driver "crashes" after committing the last micro-batch that sent windows, before Spark
    # records it done: the restarted job runs that micro-batch again
    stored = sorted((cfg.data_dir / "aggregates").glob("date=*/batch-*.parquet"))
    last = max(int(f.stem.removeprefix("batch-")) for f in stored)
    rewind_checkpoint(cfg.checkpoints / "aggregates", last)

    second = readings(300, now - 120_000, 110_000, seed=5)
    produce_in_transaction(broker.bootstrap, topics["readings"], second, commit=True)
    total = end_offset(broker.bootstrap, topics["readings"])
    job = PipelineJob(spark, cfg).start()
    try:
        run_until(job, caught_up)
    finally:
        job.stop()
    assert job.writer.batches_skipped == 1  # the replayed micro-batch found its transaction committed

    con = duckdb.connect()
    for name, body in views(cfg.data_dir).items():
        con.execute(f"CREATE VIEW {name} AS {body}")
    # read_committed: the aborted readings never reached the job
    assert con.execute("SELECT count(*) FROM readings").fetchone()[0] == len(first) + len(second)
    assert con.execute("SELECT count(*) FROM readings WHERE sensor_id LIKE 'aborted-%'").fetchone()[0] == 0
    updates = con.execute("SELECT count(*) FROM aggregates").fetchone()[0]
    # the topic holds every stored window update once: the replayed micro-batch was not sent twice
    sent = read_all(broker.bootstrap, topics["aggregates"])  # librdkafka reads read_committed
    assert len(sent) == updates == sent_first + job.writer.windows_written
    want = expected_windows(first + second)
    latest = {(a["kind"], a["sensor_id"] or a["city"], a["window_start"]): a for a in sent}
    assert set(latest) == set(want)
    for k, a in latest.items():
        assert a["count"] == want[k][0], k
    ledger = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": cfg.transactional_id})
    try:
        mark = ledger.committed([TopicPartition(topics["aggregates"], 0)], timeout=10)[0].offset
    finally:
        ledger.close()
    newest = max(int(f.stem.removeprefix("batch-")) for f in (cfg.data_dir / "aggregates").glob("date=*/batch-*.parquet"))
    assert mark == newest + 1


def test_job_with_sparks_kafka_connector_gives_the_same_results(kafka_connector: Any, broker: BrokerProcess,
                                                                tmp_path: Path) -> None:
    """`--connector kafka`: the readings read and the dead letters written by Spark's own Kafka
    connector (format("kafka")) instead of Samsa's source; the same checks, on fewer readings."""
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("readings", "dlq", "aggregates", "alerts", "status")}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics([NewTopic(t, 2, 1) for t in topics.values()]).values():
        fut.result(10)
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args(["--bootstrap-server", broker.bootstrap, "--data-dir", str(tmp_path / "data"),
                          "--trigger", "1 second", "--storage-trigger", "1 second", "--watermark", "10 minutes",
                          "--connector", "kafka"])
    cfg = config_from(args)
    cfg.topics = topics
    assert cfg.connector == "kafka" and session_jars(cfg)  # build/jars/spark-kafka, as the fixture's session has
    now = int(time.time() * 1000)
    rows = readings(300, now - 240_000, 180_000, seed=5)
    bad = [BAD[0], BAD[1], BAD[2] % now, BAD[3] % (now + 3_600_000)]
    produce(broker.bootstrap, topics["readings"], [json.dumps(r).encode() for r in rows] + bad,
            [r["sensor_id"] for r in rows] + ["bad"] * len(bad))
    total = end_offset(broker.bootstrap, topics["readings"])
    job = PipelineJob(kafka_connector, cfg).start()
    try:
        run_until(job, lambda: all(n == total for n in job.consumed().values()))
    finally:
        job.stop()

    dead = read_all(broker.bootstrap, topics["dlq"])
    assert sorted(d["reason"] for d in dead) == sorted(REASONS)
    con = duckdb.connect()
    for name, body in views(cfg.data_dir).items():
        con.execute(f"CREATE VIEW {name} AS {body}")
    assert con.execute("SELECT count(*) FROM readings").fetchone()[0] == len(rows)
    got = {(k, key, ws): (n, avg, mx) for k, key, ws, n, avg, mx in con.execute(
        "SELECT kind, key, window_start, count, pm25_avg, pm25_max FROM windows").fetchall()}
    want = expected_windows(rows)
    assert set(got) == set(want)
    for k, (n, avg, mx) in want.items():
        assert got[k][0] == n and got[k][2] == mx and abs(got[k][1] - avg) < 1e-6, k


def test_kafka_connector_without_its_jars_is_one_clear_line(tmp_path: Path) -> None:
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    cfg = config_from(ap.parse_args(["--connector", "kafka", "--connector-jars", str(tmp_path)]))
    with pytest.raises(ConnectorJarsMissing, match=r"^Spark's Kafka connector .* is not in .*: fetch it with "
                                                   r"`bash scripts/kafka-jars.sh spark-kafka`"):
        session_jars(cfg)
    assert session_jars(config_from(ap.parse_args([]))) == []  # samsa: jar-less
    (tmp_path / "spark-sql-kafka-0-10_2.13-3.5.1.jar").write_bytes(b"")
    with pytest.raises(ConnectorJarsMissing, match="is for Spark 3.5.1, PySpark is 4.2.0"):
        session_jars(cfg)
