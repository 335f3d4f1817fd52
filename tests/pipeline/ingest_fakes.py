"""Stand-ins for the ingest sources' collaborators: a `Sender` whose acknowledgements the test
drives, and a librdkafka-level Producer for `IngestProducer`'s own tests."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any, ClassVar

from confluent_kafka import KafkaError


class FakeMessage:
    def __init__(self, topic: str, key: Any, value: Any, partition: int = 0, offset: int = 0) -> None:
        self._topic, self._key, self._value = topic, key, value
        self._partition, self._offset = partition, offset

    def topic(self) -> str:
        return self._topic

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class FakeSender:
    """Records what a source sends. With `auto_ack`, poll/flush acknowledge everything sent;
    otherwise the test calls `ack(i)`."""

    def __init__(self, auto_ack: bool = True) -> None:
        self.auto_ack = auto_ack
        self.sent: list[tuple[str, Any, Any]] = []
        self.resend_flags: list[bool] = []
        self._on_ack: dict[int, Callable[[Any], None] | None] = {}

    def send(self, topic: str, value: Any, key: Any = None, *, on_ack: Any = None, resend: bool = False) -> None:
        self._on_ack[len(self.sent)] = on_ack
        self.sent.append((topic, value, key))
        self.resend_flags.append(resend)

    @property
    def values(self) -> list[Any]:
        return [v for _, v, _ in self.sent]

    @property
    def unacked(self) -> list[int]:
        return sorted(self._on_ack)

    def ack(self, i: int) -> None:
        cb = self._on_ack.pop(i)
        topic, value, key = self.sent[i]
        if cb is not None:
            cb(FakeMessage(topic, key, value, offset=i))

    def ack_all(self) -> None:
        for i in self.unacked:
            self.ack(i)

    def poll(self, timeout: float = 0.0) -> None:
        if self.auto_ack:
            self.ack_all()

    def flush(self, timeout: float) -> int:
        self.poll()
        return len(self._on_ack)

    def outstanding(self) -> int:
        return len(self._on_ack)


class FakeKafkaProducer:
    """A confluent_kafka.Producer look-alike: `produce` queues, `poll` delivers each queued record
    with the next scripted error (None: success) from `outcomes`."""

    made: ClassVar[list[FakeKafkaProducer]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.queue: list[tuple[str, Any, Any, Callable[..., None]]] = []
        self.produced: list[tuple[str, Any, Any]] = []
        self.outcomes: collections.deque[KafkaError | None] = collections.deque()
        self.buffer_full = 0  # the next this-many produce() calls raise BufferError
        self.offset = 0
        self.purged = False
        self.stalled = False  # poll() delivers nothing (a broker that does not answer) until purge()
        FakeKafkaProducer.made.append(self)

    def produce(self, topic: str, value: Any, key: Any = None, on_delivery: Any = None) -> None:
        if self.buffer_full:
            self.buffer_full -= 1
            raise BufferError("Local: Queue full")
        self.queue.append((topic, value, key, on_delivery))
        self.produced.append((topic, value, key))

    def poll(self, timeout: float = 0.0) -> int:
        served = 0
        while self.queue and not (self.stalled and not self.purged):
            topic, value, key, cb = self.queue.pop(0)
            err = self.outcomes.popleft() if self.outcomes else None
            if err is not None:
                msg: FakeMessage = FakeFailedMessage(topic, key, value)
            else:
                msg = FakeMessage(topic, key, value, offset=self.offset)
                self.offset += 1
            cb(err, msg)
            served += 1
        return served

    def flush(self, timeout: float = 0.0) -> int:
        self.poll()
        return len(self.queue)

    def list_topics(self, topic: str | None = None, timeout: float = 0.0) -> Any:
        return object()

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.purged = True
        for _ in self.queue:
            self.outcomes.appendleft(KafkaError(KafkaError._PURGE_QUEUE))

    def __len__(self) -> int:
        return len(self.queue)


class FakeFailedMessage(FakeMessage):
    def partition(self) -> int:
        return -1

    def offset(self) -> int:
        return -1001
