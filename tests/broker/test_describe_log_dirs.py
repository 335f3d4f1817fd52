"""DescribeLogDirs (35): the broker's log dirs, the replicas in each with their sizes, and each
dir's total and usable bytes (v4). Kafka's tools need it: kafka-log-dirs, and
kafka-reassign-partitions before it generates or executes a plan (tests/compat/test_kafka_tools.py,
tests/cluster/test_kafka_tools_cluster.py). A failed dir: tests/broker/test_log_dir_failure.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.broker.test_bad_input import batch, create_topic, produce
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


def describe_log_dirs(c: RawClient, version: int, topics: list[tuple[str, list[int]]] | None) -> Any:
    body = {"topics": None if topics is None else [{"topic": t, "partitions": ps} for t, ps in topics]}
    return c.request(35, version, body)


def listing(resp: Any) -> dict[str, dict[str, dict[int, int]]]:
    """{log dir: {topic: {partition: size}}}, checking each entry's error code, lag and future key."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for r in resp.results:
        assert r.error_code == 0, r
        for t in r.topics:
            for p in t.partitions:
                assert p.offset_lag == 0 and p.is_future_key is False
                out.setdefault(r.log_dir, {}).setdefault(t.name, {})[p.partition_index] = p.partition_size
    return out


def on_disk(d: Path) -> int:
    return sum(f.stat().st_size for f in d.glob("*.log"))


def test_describe_log_dirs_lists_dirs_replicas_and_sizes(tmp_path: Path) -> None:
    a, b_dir = tmp_path / "a", tmp_path / "b"
    b = BrokerProcess(tmp_path / "broker", {"log.dirs": f"{a},{b_dir}"})
    b.start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c, "two", partitions=2)  # one partition in each dir (the least loaded)
            create_topic(c, "other")
            for p, n in ((0, 3), (1, 5)):
                assert produce(c, "two", batch(n=n), p).error_code == 0
            where = {p: (a if (a / f"two-{p}").exists() else b_dir) for p in (0, 1)}
            assert where[0] != where[1]

            resp = describe_log_dirs(c, 4, None)
            assert resp.error_code == 0
            assert [r.log_dir for r in resp.results] == [str(a), str(b_dir)]  # absolute, in config order
            assert all(r.total_bytes > 0 and 0 <= r.usable_bytes <= r.total_bytes for r in resp.results)
            got = listing(resp)
            for p in (0, 1):
                size = got[str(where[p])]["two"][p]
                assert size == on_disk(where[p] / f"two-{p}") and size > 0
            assert sum("other" in topics for topics in got.values()) == 1

            # some partitions (an unknown one is left out, as Kafka does); v1 (no sizes of dirs)
            resp = describe_log_dirs(c, 1, [("two", [1]), ("nope", [0])])
            assert {d: ts for d, ts in listing(resp).items()} == {str(where[1]): {"two": {1: got[str(where[1])]["two"][1]}}}
            assert len(resp.results) == 2
    finally:
        b.close()
