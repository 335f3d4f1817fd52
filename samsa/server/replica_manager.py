"""The partitions this broker hosts: append, read, and waking long-poll fetches.

A `Partition` owns its `Log` and the producer-state window used for idempotence. Appends come
in as the Produce request's own bytes (a bytearray we may rewrite in place): the header of
every batch was validated by the handler, the log assigns offsets, and every fetch waiting on
this partition is woken. Single-node today: this broker leads every partition it hosts, so the
high watermark is the log end offset. Replication (followers, ISR, leader epochs) arrives with
the cluster issue and slots in here.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from samsa.protocol.batch import BatchHeader
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.producer_state import Duplicate, ProducerStateManager, SequenceError
from samsa.storage.errors import StorageError
from samsa.storage.log import Log


@dataclass
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: Log) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader_epoch = 0
        self.producers = ProducerStateManager()
        self.waiters: list[Callable[[], None]] = []

    def load_producer_state(self, tail_bytes: int = 4 << 20) -> int:
        """Rebuild the idempotence window from the batch headers at the tail of the log.

        Kafka keeps producer-state snapshots; the last few MB of the active segment hold every
        batch a retrying producer can still resend (its window is five batches), so reading
        their headers after a restart is enough. Returns the number of batches read.
        """
        seg = self.log.segments[-1]
        if seg.size == 0:
            return 0
        target = max(0, seg.size - tail_bytes)
        start = 0
        for _, position in seg.offset_index.entries():
            if position > target:
                break
            start = position
        n = 0
        for b in seg.iter_batches(start):
            h = seg.read_header(b.position)
            if h.producer_id >= 0:
                self.producers.record(h, h.base_offset)
            n += 1
        return n

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def append(self, buf: bytearray | memoryview, headers: list[tuple[int, BatchHeader]], log_append_time: bool) -> AppendOutcome:
        # Idempotence is decided per batch; a request's batches from one producer are a run.
        for _, h in headers:
            try:
                self.producers.check(h)
            except Duplicate as d:
                if len(headers) == 1:
                    return AppendOutcome(ErrorCode.NONE, d.first_offset, -1, self.log_start_offset)
                return AppendOutcome(ErrorCode.DUPLICATE_SEQUENCE_NUMBER, message="duplicate batch in a multi-batch request")
            except SequenceError as e:
                return AppendOutcome(e.code, message=str(e))
        now_ms = int(time.time() * 1000)
        try:
            result = self.log.append(buf, headers, now_ms=now_ms, log_append_time=log_append_time)
        except StorageError as e:
            code = ErrorCode[e.kafka_error] if e.kafka_error else ErrorCode.KAFKA_STORAGE_ERROR
            return AppendOutcome(code, message=str(e))
        offset = result.first_offset
        for _, h in headers:
            if h.producer_id >= 0:
                self.producers.record(h, offset)
            offset += h.last_offset_delta + 1
        self.wake()
        return AppendOutcome(ErrorCode.NONE, result.first_offset, result.log_append_time_ms, self.log_start_offset)

    def wake(self) -> None:
        if self.waiters:
            waiters, self.waiters = self.waiters, []
            for w in waiters:
                w()


class ReplicaManager:
    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def require(self, topic: str, partition: int) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return p

    def add(self, p: Partition) -> None:
        self.partitions[(p.topic, p.index)] = p

    def remove_topic(self, topic: str) -> list[Partition]:
        gone = [p for (t, _), p in self.partitions.items() if t == topic]
        for p in gone:
            del self.partitions[(p.topic, p.index)]
            p.wake()
        return gone


def wait_for_any(loop: asyncio.AbstractEventLoop, partitions: list[Partition], timeout_s: float) -> "asyncio.Future[bool]":
    """A future that becomes True when any of `partitions` is appended to, False at timeout."""
    fut: asyncio.Future[bool] = loop.create_future()

    def fire(value: bool) -> None:
        if not fut.done():
            fut.set_result(value)

    def on_append() -> None:
        fire(True)

    for p in partitions:
        p.waiters.append(on_append)
    handle = loop.call_later(timeout_s, fire, False)

    def cleanup(_: object) -> None:
        handle.cancel()
        for p in partitions:
            try:
                p.waiters.remove(on_append)
            except ValueError:
                pass

    fut.add_done_callback(cleanup)
    return fut
