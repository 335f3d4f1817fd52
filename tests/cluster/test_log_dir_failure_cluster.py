"""A broker's disk fails for real (EIO, tests/failing_disk.py) in a 3-broker cluster on ZooKeeper:
Kafka's log-dir failure handling. The partitions of the failed dir fail over to other in-sync
replicas and nothing acknowledged is lost; the broker keeps serving the partitions of its other
dirs, and a broker whose every dir failed shuts down (as Kafka's does) so that others lead."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.cluster.cluster import Cluster, produce_sync
from tests.failing_disk import failing_disk

pytestmark = pytest.mark.slow


def _set_log_dirs(c: Cluster, i: int, dirs: str) -> None:
    path = c.broker(i).config_path
    path.write_text(re.sub(r"(?m)^log\.dirs=.*$", f"log.dirs={dirs}", path.read_text()))


def _read(bootstrap: str, topic: str, partition: int, n: int) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                     "enable.auto.commit": False, "topic.metadata.refresh.interval.ms": 1000})
    out: list[bytes] = []
    try:
        cons.assign([TopicPartition(topic, partition, 0)])
        import time

        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        cons.close()
    return out


def _delivered(reports: list[tuple[bytes, int, Any]]) -> list[bytes]:
    assert all(err is None for _, _, err in reports), [err for _, _, err in reports if err is not None][:3]
    return [v for v, _, _ in reports]


def test_a_failed_dir_fails_over_its_partitions_and_the_broker_keeps_the_others(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with failing_disk(tmp_path / "failing") as disk:
        c: Cluster = cluster(3, start=False)
        good = c.broker(1).workdir / "good"
        _set_log_dirs(c, 1, f"{good},{disk.path / 'data'}")
        c.start_all()
        topic = f"ld-{uuid.uuid4().hex[:6]}"
        c.create_topic(topic, assignment=[[1, 0, 2], [1, 2, 0]])  # broker 1 leads both, one in each dir
        on_disk = 0 if (disk.path / "data" / f"{topic}-0").exists() else 1
        healthy = 1 - on_disk
        assert (good / f"{topic}-{healthy}").exists()
        sent = {p: _delivered(produce_sync(c.bootstrap, topic, [b"a%d" % i for i in range(50)], partition=p))
                for p in (0, 1)}

        disk.fail()
        more = _delivered(produce_sync(c.bootstrap, topic, [b"b%d" % i for i in range(50)], partition=on_disk))
        new_leader = c.wait_leader_change(topic, on_disk, 1)
        assert new_leader in (0, 2) and 1 not in c.isr(topic, on_disk)
        assert c.alive(1) and c.leader_of(topic, healthy) == 1 and 1 in c.isr(topic, healthy)
        also = _delivered(produce_sync(c.bootstrap, topic, [b"c%d" % i for i in range(20)], partition=healthy))
        assert _read(c.bootstrap, topic, on_disk, 100) == sent[on_disk] + more
        assert _read(c.bootstrap, topic, healthy, 70) == sent[healthy] + also
        text = c.broker(1).log_text()
        assert f"Log dir {disk.path / 'data'} failed: Input/output error" in text and "Traceback" not in text
        c.close()


def test_a_broker_whose_only_dir_failed_shuts_down_and_others_lead(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with failing_disk(tmp_path / "failing") as disk:
        c: Cluster = cluster(3, start=False)
        _set_log_dirs(c, 2, str(disk.path / "data"))
        c.start_all()
        topic = f"ld-{uuid.uuid4().hex[:6]}"
        c.create_topic(topic, assignment=[[2, 0, 1]])
        sent = _delivered(produce_sync(c.bootstrap, topic, [b"a%d" % i for i in range(50)]))
        disk.fail()
        more = _delivered(produce_sync(c.bootstrap, topic, [b"b%d" % i for i in range(50)]))
        assert c.broker(2).proc is not None and c.broker(2).proc.wait(30) == 1
        assert c.leader_of(topic) in (0, 1)
        assert _read(c.bootstrap, topic, 0, 100) == sent + more
        text = c.broker(2).log_text()
        assert "Every log dir of broker 2 is offline" in text and "Traceback" not in text
        c.close()
