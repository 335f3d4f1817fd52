"""A log dir whose disk fails (real EIO, tests/failing_disk.py): Kafka's log-dir failure
handling on one broker. The dir goes offline, its partitions answer KAFKA_STORAGE_ERROR, the
broker stays up and says so plainly, and partitions in other log dirs carry on."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import batch, create_topic, latest_offset, produce
from tests.brokerproc import BrokerProcess
from tests.failing_disk import FailingDisk, failing_disk
from tests.rawclient import RawClient


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[FailingDisk]:
    with failing_disk(tmp_path / "failing") as d:
        yield d


def metadata_partition(c: RawClient, topic: str, index: int = 0) -> Any:
    meta = c.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return next(p for p in meta.topics[0].partitions if p.partition_index == index)


def produce_until_error(c: RawClient, topic: str, partition: int = 0) -> int:
    """Produce until the broker answers an error (the failure is found by the next write)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        code = produce(c, topic, batch(n=1), partition).error_code
        if code:
            return int(code)
    raise AssertionError("produce never failed")


def test_the_only_log_dir_failing_answers_kafka_storage_error_and_says_so(tmp_path: Path, disk: FailingDisk,
                                                                          topic_name: str) -> None:
    b = BrokerProcess(tmp_path / "broker", {"log.dirs": str(disk.path / "data")})
    b.start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c, topic_name)
            assert produce(c, topic_name, batch(n=5)).error_code == 0
            disk.fail()
            assert produce_until_error(c, topic_name) == ErrorCode.KAFKA_STORAGE_ERROR
            deadline = time.monotonic() + 10
            while metadata_partition(c, topic_name).leader_id != -1 and time.monotonic() < deadline:
                time.sleep(0.05)  # the dir is taken offline on the loop's next turn
            part = metadata_partition(c, topic_name)
            assert part.leader_id == -1 and part.error_code == ErrorCode.LEADER_NOT_AVAILABLE
            assert list(part.offline_replicas) == [0]
            assert produce(c, topic_name, batch()).error_code == ErrorCode.KAFKA_STORAGE_ERROR
            list_offsets = c.request(2, 7, {"replica_id": -1, "topics": [
                {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
            assert list_offsets.topics[0].partitions[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
            # the broker itself is up: other requests are answered
            assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
        assert b.stop() == 0  # and it stops cleanly
        text = b.log_text()
        # (EIO from the produce's write, or whatever the file system answers first: the new
        # partition's partition.metadata is written in the background and may meet the failure)
        assert re.search(rf"Log dir {re.escape(str(disk.path / 'data'))} failed: .+ \(errno \d+\)", text), text[-3000:]
        assert text.count("The log dir of this broker") == 1 and "is offline: every partition answers" in text
        assert "Traceback" not in text
    finally:
        b.close()


def test_a_failed_dir_takes_only_its_partitions_offline(tmp_path: Path, disk: FailingDisk) -> None:
    good = tmp_path / "good"
    # (the first log dir holds the embedded metadata store: the healthy one here)
    b = BrokerProcess(tmp_path / "broker", {"log.dirs": f"{good},{disk.path / 'data'}"})
    b.start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c, "two", partitions=2)  # one partition in each dir (the least loaded)
            on_disk = 0 if (disk.path / "data" / "two-0").exists() else 1
            healthy = 1 - on_disk
            assert (good / f"two-{healthy}").exists()
            for p in (0, 1):
                assert produce(c, "two", batch(n=3), p).error_code == 0
            disk.fail()
            assert produce_until_error(c, "two", on_disk) == ErrorCode.KAFKA_STORAGE_ERROR
            deadline = time.monotonic() + 10
            while metadata_partition(c, "two", on_disk).leader_id != -1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert metadata_partition(c, "two", on_disk).leader_id == -1
            assert metadata_partition(c, "two", healthy).leader_id == 0
            assert produce(c, "two", batch(n=2), healthy).error_code == 0
            assert latest_offset(c, "two", healthy) == 5
            create_topic(c, "after")  # new logs go to the dir still online
            assert produce(c, "after", batch(n=1)).error_code == 0
            assert (good / "after-0").exists()
            # DescribeLogDirs (kafka-log-dirs): the failed dir with KAFKA_STORAGE_ERROR and nothing
            # in it, the healthy one with its replicas
            dirs = {r.log_dir: r for r in c.request(35, 4, {"topics": None}).results}
            failed = dirs[str(disk.path / "data")]
            assert (failed.error_code, list(failed.topics)) == (ErrorCode.KAFKA_STORAGE_ERROR, [])
            assert dirs[str(good)].error_code == 0
            assert sorted((t.name, p.partition_index) for t in dirs[str(good)].topics for p in t.partitions
                          if not t.name.startswith("__")) == [("after", 0), ("two", healthy)]
        text = b.log_text()
        assert "The log dir of this broker" not in text and "Traceback" not in text
    finally:
        b.close()
