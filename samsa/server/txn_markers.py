"""Writing transaction markers: the body of WriteTxnMarkers (27), shared by its handler and by a
transaction coordinator that leads the partitions itself.

For each marker (a producer's transaction ending: COMMIT or ABORT, with the coordinator's epoch)
and each of its partitions, this broker must be the leader: the marker is appended there as a
control batch (`Partition.write_txn_marker`), then the answer waits until the high watermark has
passed every marker appended (as an acks=all produce does), at most `timeout_ms` (Kafka uses its
request.timeout.ms, 30 s by default). Errors are per partition, as Kafka's:

    UNKNOWN_TOPIC_OR_PARTITION     no such topic or partition
    NOT_LEADER_OR_FOLLOWER         not the leader here (or it moved while waiting)
    KAFKA_STORAGE_ERROR            its log dir failed here, or the append failed on the disk
    NOT_ENOUGH_REPLICAS            fewer in-sync replicas than min.insync.replicas: not appended
    NOT_ENOUGH_REPLICAS_AFTER_APPEND  appended, but the ISR shrank below the minimum meanwhile
    INVALID_PRODUCER_EPOCH         the marker's producer epoch is older than the partition's
    TRANSACTION_COORDINATOR_FENCED the coordinator epoch is older than the last marker's
    REQUEST_TIMED_OUT              appended, not replicated in time

A marker for `__consumer_offsets` is also handed to the group coordinator right after its append
(`GroupManager.on_txn_marker`): the transaction's offset commits become visible or are dropped.

The wait is a delayed operation in the purgatory, watched under the partitions (woken by their
high watermark moves), not a task polling them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from samsa.controller.decisions import WAIT, acks_all_satisfied
from samsa.protocol.errors import ErrorCode
from samsa.server.context import BrokerServices
from samsa.server.purgatory import DelayedOperation
from samsa.server.replica_manager import Partition

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_TIMEOUT_MS = 30_000

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TxnMarker:
    """One transaction's end, to be written to `partitions`."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: Sequence[TopicPartition]


# Per marker, in the order given: each of its partitions' error (NONE: written and replicated).
MarkerResult = dict[TopicPartition, ErrorCode]


async def write_markers(services: BrokerServices, markers: Sequence[TxnMarker], *,
                        timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[MarkerResult]:
    """Append each marker to each of its partitions (this broker leads them) and wait until
    they are replicated; the error of every (marker, partition). Never raises for bad input."""
    results: list[MarkerResult] = []
    waiting: list[_Waiting] = []
    for marker in markers:
        result: MarkerResult = {}
        results.append(result)
        for tp in marker.partitions:
            code, partition, required, min_isr = _append(services, marker, tp)
            result[tp] = code
            if code == ErrorCode.NONE and partition is not None:
                waiting.append(_Waiting(partition, required, min_isr, result, tp))
    if waiting:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        op = _DelayedMarkers(timeout_ms, waiting, done)
        if op.try_complete():
            op.force_complete()
        else:
            services.purgatory.watch(op, list({w.partition: None for w in waiting}))
        await done
    return results


def _append(services: BrokerServices, marker: TxnMarker, tp: TopicPartition
            ) -> tuple[ErrorCode, Partition | None, int, int]:
    """(error, the partition appended to, the offset the high watermark must reach, min ISR)."""
    topic_name, index = tp
    topic = services.topics.get(topic_name)
    partition = services.replicas.get(topic_name, index)
    if partition is None:
        known = topic is not None and index in topic.partitions
        return services.replicas.missing(topic_name, index, known), None, -1, 0
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None, -1, 0
    min_isr = topic.min_insync_replicas if topic is not None else 1
    if len(partition.isr) < min_isr:
        return ErrorCode.NOT_ENOUGH_REPLICAS, None, -1, 0
    out = partition.write_txn_marker(marker.producer_id, marker.producer_epoch, marker.committed,
                                     marker.coordinator_epoch)
    if out.error != ErrorCode.NONE:
        return out.error, None, -1, 0
    if topic_name == OFFSETS_TOPIC:
        services.groups.on_txn_marker(index, marker.producer_id, marker.producer_epoch, marker.committed)
    return ErrorCode.NONE, partition, out.base_offset + 1, min_isr


@dataclass
class _Waiting:
    partition: Partition
    required: int
    min_isr: int
    result: MarkerResult
    tp: TopicPartition

    def settled(self) -> bool:
        """True once this marker's answer is known (written into `result`)."""
        p = self.partition
        if not p.is_leader:
            self.result[self.tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return True
        verdict = acks_all_satisfied(self.required, p.hw, len(p.isr), self.min_isr)
        if verdict is WAIT:
            return False
        if isinstance(verdict, ErrorCode):
            self.result[self.tp] = verdict
        return True


class _DelayedMarkers(DelayedOperation):
    """Markers waiting for their partitions' high watermarks (Kafka answers WriteTxnMarkers
    through a DelayedProduce with acks=all)."""

    __slots__ = ("done", "waiting")

    def __init__(self, timeout_ms: int, waiting: list[_Waiting], done: asyncio.Future[None]) -> None:
        super().__init__(timeout_ms)
        self.waiting = waiting
        self.done = done

    def try_complete(self) -> bool:
        self.waiting = [w for w in self.waiting if not w.settled()]
        return not self.waiting

    def on_complete(self) -> None:
        if self.expired:
            self.try_complete()
        for w in self.waiting:
            w.result[w.tp] = ErrorCode.REQUEST_TIMED_OUT
        if not self.done.done():
            self.done.set_result(None)

    def on_failure(self, error: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(error)
