"""A known cluster state for the broker console's tests: two topics (one compacted) with known
record counts per partition, and a consumer group whose live member committed part of one.

    plain      3 partitions: 10, 7 and 5 records
    compacted  2 partitions (cleanup.policy=compact): 6 and 4 records
    group      one member (client.id console-test-client) subscribed to plain, which committed
               offset 4 on partition 0 and 2 on partition 1, nothing on partition 2:
               lag 6 and 5 (11 in all), none on partition 2
"""

from __future__ import annotations

import logging
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

_QUIET = logging.getLogger("tests.pipeline.console.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False

PLAIN_COUNTS = (10, 7, 5)
COMPACTED_COUNTS = (6, 4)
COMMITTED = {0: 4, 1: 2}
CLIENT_ID = "console-test-client"


class Scenario:
    def __init__(self, bootstrap: str, replication_factor: int = 1) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.bootstrap = bootstrap
        self.plain = f"console-plain-{suffix}"
        self.compacted = f"console-compacted-{suffix}"
        self.group = f"console-group-{suffix}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "logger": _QUIET})
        futures = admin.create_topics([
            NewTopic(self.plain, num_partitions=len(PLAIN_COUNTS), replication_factor=replication_factor),
            NewTopic(self.compacted, num_partitions=len(COMPACTED_COUNTS), replication_factor=replication_factor,
                     config={"cleanup.policy": "compact"}),
        ])
        for f in futures.values():
            f.result(30)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", "logger": _QUIET})
        for p, n in enumerate(PLAIN_COUNTS):
            self.produce(self.plain, p, n)
        for p, n in enumerate(COMPACTED_COUNTS):
            for i in range(n):
                self.producer.produce(self.compacted, key=f"k{i % 3}", value=f"v{i}", partition=p)
        assert self.producer.flush(30) == 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": self.group, "client.id": CLIENT_ID,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "logger": _QUIET})
        self.consumer.subscribe([self.plain])
        deadline = time.monotonic() + 30
        while len(self.consumer.assignment()) < len(PLAIN_COUNTS):
            assert time.monotonic() < deadline, "the group's only member got no assignment in 30 s"
            self.consumer.poll(0.2)  # joins the group; what it fetches is not committed
        self.consumer.commit(offsets=[TopicPartition(self.plain, p, o) for p, o in COMMITTED.items()],
                             asynchronous=False)

    def produce(self, topic: str, partition: int, n: int) -> None:
        for i in range(n):
            self.producer.produce(topic, value=f"record {i}", partition=partition)
        assert self.producer.flush(30) == 0

    def close(self) -> None:
        self.consumer.close()
