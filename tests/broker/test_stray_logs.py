"""Logs on disk that are not this broker's: Kafka's stray logs, moved aside at start-up and
never served, and partition.metadata naming the topic each log belongs to."""

from __future__ import annotations

import shutil
import time
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.storage.log_manager import PARTITION_METADATA, read_topic_id
from tests.broker.test_bad_input import batch, create_topic, latest_offset, produce
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


def _topic_id(c: RawClient, topic: str) -> Any:
    meta = c.request(3, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return meta.topics[0]


def _strays(b: BrokerProcess) -> list[str]:
    return sorted(p.name for p in b.log_dir.iterdir() if p.name.endswith("-stray"))


def _written_topic_id(directory: Any) -> str:
    """The topic id in `directory`'s partition.metadata, which a worker thread writes soon after
    the log is created."""
    deadline = time.monotonic() + 30
    while (topic_id := read_topic_id(directory)) is None:
        assert time.monotonic() < deadline, f"no partition.metadata in {directory} after 30 s"
        time.sleep(0.05)
    return topic_id


def test_a_log_of_a_topic_that_does_not_exist_is_moved_aside_not_deleted(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory(**{"auto.create.topics.enable": "false"})
    with RawClient(b.bootstrap) as c:
        create_topic(c, "real")
        assert produce(c, "real", batch(n=4)).error_code == 0
    b.stop()
    shutil.copytree(b.log_dir / "real-0", b.log_dir / "ghost-0")  # e.g. deleted while this broker was down
    b.start()
    with RawClient(b.bootstrap) as c:
        assert latest_offset(c, "real") == 4
        assert _topic_id(c, "ghost").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (stray,) = _strays(b)
    assert stray.startswith("ghost-0.") and not (b.log_dir / "ghost-0").exists()
    assert any(f.suffix == ".log" and f.stat().st_size > 0 for f in (b.log_dir / stray).iterdir())  # data kept
    text = b.log_text()
    assert "ghost-0 is stray (topic ghost does not exist): moved aside to" in text
    b.stop()
    b.start()  # not loaded again, said so
    assert "Not loading 1 stray log(s)" in b.log_text()
    assert _strays(b) == [stray]


def test_a_topic_created_again_does_not_inherit_the_old_topics_log(broker_factory: Any) -> None:
    """A topic deleted while a broker was down and created again under the same name: the
    broker's old log has the old topic id in partition.metadata and must not be served."""
    b: BrokerProcess = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, "again")
        assert produce(c, "again", batch(n=5)).error_code == 0
    old_id = _written_topic_id(b.log_dir / "again-0")
    b.stop()
    shutil.copytree(b.log_dir / "again-0", b.workdir / "old-again-0")
    b.start()
    with RawClient(b.bootstrap) as c:
        assert c.request(20, 6, {"topics": [{"name": "again"}], "timeout_ms": 5000}).responses[0].error_code == 0
        deadline = time.monotonic() + 10
        while (b.log_dir / "again-0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the directory goes once the deletion has run
        create_topic(c, "again")
        assert produce(c, "again", batch(n=1)).error_code == 0
    new_id = _written_topic_id(b.log_dir / "again-0")
    assert new_id != old_id
    b.stop()
    shutil.rmtree(b.log_dir / "again-0")
    shutil.copytree(b.workdir / "old-again-0", b.log_dir / "again-0")  # the old topic's log is back
    b.start()
    with RawClient(b.bootstrap) as c:
        assert latest_offset(c, "again") == 0  # not the old topic's five records
    (stray,) = _strays(b)
    assert stray.startswith("again-0.") and read_topic_id(b.log_dir / stray) == old_id
    assert _written_topic_id(b.log_dir / "again-0") == new_id
    assert f"it belongs to topic id {old_id}, again is now {new_id}" in b.log_text()


def test_a_log_without_partition_metadata_is_adopted(broker_factory: Any) -> None:
    """Logs written before partition.metadata existed keep their data and get the file."""
    b: BrokerProcess = broker_factory()
    with RawClient(b.bootstrap) as c:
        create_topic(c, "legacy")
        assert produce(c, "legacy", batch(n=3)).error_code == 0
    b.stop()
    (b.log_dir / "legacy-0" / PARTITION_METADATA).unlink()
    b.start()
    with RawClient(b.bootstrap) as c:
        assert latest_offset(c, "legacy") == 3
    assert read_topic_id(b.log_dir / "legacy-0") is not None and not _strays(b)
