"""The pipeline's Spark job against a 3-broker cluster on a real ZooKeeper, through the kill -9
of a partition leader: every window comes out, none lost or doubled."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from samsa.cli.pipeline import views
from samsa.pipeline.job import JobConfig, PipelineJob
from tests.cluster.cluster import Cluster
from tests.pipeline.test_job import expected_windows, produce, readings, run_until

pytestmark = pytest.mark.slow


def test_pipeline_job_on_three_brokers_survives_a_leader_kill(spark: Any, cluster: Callable[..., Cluster],
                                                             tmp_path: Path) -> None:
    c = cluster(3)
    suffix = uuid.uuid4().hex[:8]
    topics = {name: f"{name}-{suffix}" for name in ("readings", "dlq", "aggregates", "alerts", "status")}
    for t in topics.values():
        c.create_topic(t, partitions=2, rf=3, configs={"min.insync.replicas": "2"})
    cfg = JobConfig(bootstrap=c.bootstrap, data_dir=tmp_path / "data", trigger="1 second",
                    storage_trigger="1 second", watermark="10 minutes",
                    topics=topics)
    now = int(time.time() * 1000)
    first = readings(400, now - 240_000, 180_000, seed=3)
    produce(c.bootstrap, topics["readings"], [json.dumps(r).encode() for r in first], [r["sensor_id"] for r in first])

    job = PipelineJob(spark, cfg).start()
    try:
        run_until(job, lambda: all(n == len(first) for n in job.consumed().values()))
        victim = c.leader_of(topics["readings"], 0)
        assert victim is not None
        c.kill9(victim)
        c.wait_leader_change(topics["readings"], 0, victim)
        second = readings(300, now - 120_000, 110_000, seed=4)
        produce(c.live_bootstrap(), topics["readings"], [json.dumps(r).encode() for r in second],
                [r["sensor_id"] for r in second])
        total = len(first) + len(second)
        run_until(job, lambda: all(n == total for n in job.consumed().values()), timeout=180)
    finally:
        job.stop()

    con = duckdb.connect()
    for name, body in views(cfg.data_dir).items():
        con.execute(f"CREATE VIEW {name} AS {body}")
    assert con.execute("SELECT count(*) FROM readings").fetchone()[0] == total
    got = {(k, key, ws): n for k, key, ws, n in con.execute("SELECT kind, key, window_start, count FROM windows").fetchall()}
    want = {k: v[0] for k, v in expected_windows(first + second).items()}
    assert got == want
