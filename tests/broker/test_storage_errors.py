"""A full disk, for real: the broker's log dir on a size-capped tmpfs the test mounts. Produce
answers KAFKA_STORAGE_ERROR (not a closed connection and a traceback), nothing is half
appended, reads keep working, and once space is back the same produce succeeds."""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import batch, create_topic, latest_offset, produce
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True, text=True)
    assert r.returncode == 0, f"this test needs to mount a size-capped tmpfs (root): {r.stderr.strip()}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def read_all(bootstrap: str, topic: str, n: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                out.append(m.value())
        return out
    finally:
        c.close()


def delete_records(c: RawClient, topic: str, offset: int) -> tuple[int, int]:
    resp = c.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": offset}]}],
                             "timeout": 5000})
    part = resp.topics[0].partitions[0]
    return int(part.error_code), int(part.low_watermark)


def delete_topic(c: RawClient, topic: str) -> int:
    return int(c.request(20, 5, {"topic_names": [topic], "timeout": 5000}).responses[0].error_code)


def test_disk_full_answers_kafka_storage_error_and_loses_nothing(
        tmp_path: Path, small_disk: Path, topic_name: str) -> None:
    b = BrokerProcess(tmp_path / "broker", {"log.dirs": str(small_disk / "data")})
    b.start()
    try:
        with RawClient(b.bootstrap) as c:
            create_topic(c, topic_name)
            acked, errors = 0, []
            for _ in range(200):  # ~200 kB a request into 8 MB: full after a few dozen
                resp = produce(c, topic_name, batch(n=10, size=20_000))
                if resp.error_code == 0:
                    acked += 10
                else:
                    errors.append(resp.error_code)
                    if len(errors) >= 5:
                        break
            assert acked > 0 and errors == [ErrorCode.KAFKA_STORAGE_ERROR] * 5
            assert latest_offset(c, topic_name) == acked  # nothing half appended
        values = read_all(b.bootstrap, topic_name, acked)  # reads keep working
        assert len(values) == acked and all(v == b"v" * 20_000 for v in values)
        with RawClient(b.bootstrap) as c:
            # Deleting while the disk is full: an answer (an error or not), never a dead broker.
            delete_records(c, topic_name, 10)
            delete_topic(c, "no-such-topic-" + topic_name)

        r = subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with RawClient(b.bootstrap) as c:
            assert produce(c, topic_name, batch(n=10, size=20_000)).error_code == 0  # a retry really retries
            assert latest_offset(c, topic_name) == acked + 10
            assert delete_records(c, topic_name, acked // 2) == (0, acked // 2)
            assert delete_topic(c, topic_name) == 0
        log_text = b.log_text()
        assert "Traceback" not in log_text
        assert 1 <= log_text.count("Cannot append to") <= 2  # one line per interval, with a count
        assert str(small_disk / "data") in log_text
    finally:
        b.close()


def test_a_damaged_segment_answers_kafka_storage_error_not_later_records(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name, configs={"segment.bytes": "4096"})
        for _ in range(20):  # 20 batches of ~1 kB: several segments
            assert produce(c, topic_name, batch(n=1, size=1000)).error_code == 0
    b.stop()  # (cleanly: the restart rescans nothing, so only reads meet the damage)
    first = b.log_dir / f"{topic_name}-0" / f"{0:020d}.log"
    with open(first, "r+b") as f:  # the second batch's length, as a bad write would leave it
        f.seek(len(batch(n=1, size=1000)) + 8)
        f.write(struct.pack(">i", 50_000_000))
    b.start()
    with RawClient(b.bootstrap) as c:
        resp = fetch(c, topic_name, 1)
        assert resp.error_code == ErrorCode.KAFKA_STORAGE_ERROR and len(resp.records) == 0
        assert fetch(c, topic_name, 0).error_code == 0  # before the damage: served
    assert "no valid batch at position" in b.log_text() and "Traceback" not in b.log_text()


def fetch(c: RawClient, topic: str, offset: int) -> Any:
    resp = c.request(1, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return resp.responses[0].partitions[0]


def test_a_byte_flip_gives_readers_an_error_at_its_batch_never_a_gap(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    """A flipped bit is served as it is (as Kafka does: the broker does not re-check CRCs on
    reads); each client's CRC check stops at that batch with an error, after every record
    before it, and never delivers a record past it."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import CorruptRecordError

    b = broker_factory()
    one = len(batch(n=3, size=50))
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        for _ in range(10):
            assert produce(c, topic_name, batch(n=3, size=50)).error_code == 0
    b.stop()
    with open(b.log_dir / f"{topic_name}-0" / f"{0:020d}.log", "r+b") as f:
        f.seek(one * 4 + 100)  # inside the records of the fifth batch (offsets 12-14)
        x = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([x[0] ^ 0xFF]))
    b.start()

    cons = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic_name}", "check.crcs": True,
                     "enable.auto.commit": False})
    got, error = [], None
    try:
        cons.assign([TopicPartition(topic_name, 0, 0)])
        deadline = time.monotonic() + 30
        while error is None and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None:
                if m.error():
                    error = m.error()
                else:
                    got.append(m.offset())
    finally:
        cons.close()
    assert got == list(range(12)) and error is not None and "offset 12" in error.str()

    k = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, check_crcs=True, enable_auto_commit=False,
                      auto_offset_reset="none")
    got = []
    try:
        tp = KTopicPartition(topic_name, 0)
        k.assign([tp])
        k.seek(tp, 0)
        with pytest.raises(CorruptRecordError, match="offset 12"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                got += [m.offset for m in k.poll(timeout_ms=300).get(tp, [])]
    finally:
        k.close()
    assert got == list(range(12))
