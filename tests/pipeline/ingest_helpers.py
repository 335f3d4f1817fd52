"""Topics and a reader for the ingest tests: create with AdminClient, read with a group-less Consumer."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

DEADLINE_S = 20.0

_QUIET = logging.getLogger("tests.pipeline.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})  # type: ignore[dict-item]
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(DEADLINE_S)


class Reader:
    """Reads every partition of a topic from the beginning, keeping what it has seen in `records`
    as (partition, offset, key, value, record timestamp in ms)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.topic = topic
        self.partitions = partitions
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"ingest-test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
        })
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.records: list[tuple[int | None, int | None, bytes | None, bytes | None, int]] = []

    @property
    def values(self) -> list[bytes | None]:
        return [r[3] for r in self.records]

    def until(self, done: Callable[[Reader], bool], timeout: float = DEADLINE_S, what: str = "") -> Reader:
        """Read until `done(self)` holds; fail after `timeout` s."""
        deadline = time.monotonic() + timeout
        while not done(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or 'records'}; read {len(self.records)}: "
                                     f"{self.values[-5:]}")
            for m in self.consumer.consume(500, timeout=0.2):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    continue
                self.records.append((m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1]))
        return self

    def count(self, n: int, timeout: float = DEADLINE_S) -> Reader:
        return self.until(lambda r: len(r.records) >= n, timeout, f"{n} records")

    def high_watermarks(self) -> int:
        total = 0
        for p in range(self.partitions):
            _, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=DEADLINE_S)
            total += high
        return total

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
