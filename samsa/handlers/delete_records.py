"""DeleteRecords (21): move a partition's log start offset forward (-1 = the high watermark).

As Kafka's: only the leader serves it (NOT_LEADER_OR_FOLLOWER), only for a topic whose
cleanup.policy includes delete (POLICY_VIOLATION: a compacted topic's records go only by
compaction), and the offset must lie between the log start offset and the high watermark
(OFFSET_OUT_OF_RANGE). The leader moves its own
log start offset at once -- its leader-epoch checkpoint is written first, so a failed write
(KAFKA_STORAGE_ERROR) changes nothing and a retry does it all again -- and then the answer
waits (Kafka's DelayedDeleteRecords, in the purgatory) until

- the log-start-offset checkpoint holding the new offset is on disk (a worker thread writes
  it), so an answered deletion survives a crash of this broker, and
- every follower on a live broker has moved its own log start offset there too (it learns
  the leader's from its fetches and says its own in the next one): the low watermark, the
  smallest of them, is what the answer reports.

At the request's timeout a partition still waiting answers REQUEST_TIMED_OUT. DELETE on the
topic is needed (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.ratelimit import RateLimitedLog
from samsa.server.context import Op, Partition, RequestContext, ResourceType
from samsa.server.purgatory import DelayedResponse
from samsa.storage.errors import StorageError

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

log = logging.getLogger("samsa.broker")
_failures = RateLimitedLog(log, 10.0)


def handle(ctx: RequestContext, req: Any) -> Any:
    topics = []
    waiting: list[tuple[Partition, int, dict[str, Any]]] = []
    for t in req.topics:
        parts = []
        allowed = ctx.authorize(Op.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            parts.append(entry)
            if not allowed:
                entry["error_code"] = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            partition = ctx.replicas.get(t.name, p.partition_index)
            if partition is None:
                known = t.name in ctx.topics and p.partition_index in ctx.topics[t.name].partitions
                entry["error_code"] = int(ctx.replicas.missing(t.name, p.partition_index, known))
                continue
            if not partition.is_leader:
                entry["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            if not partition.log.config.delete_enabled:
                entry["error_code"] = int(ErrorCode.POLICY_VIOLATION)
                continue
            hw = partition.high_watermark
            offset = hw if p.offset == -1 else p.offset
            if offset < 0 or offset > hw:
                entry["error_code"] = int(ErrorCode.OFFSET_OUT_OF_RANGE)
                continue
            if offset > partition.log_start_offset:
                try:
                    partition.log.delete_records_before(offset)
                except (OSError, StorageError) as e:
                    _failures.warning("delete-records", "Cannot delete records of %s before offset %d: %s",
                                      partition, offset, e)
                    entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
                    continue
            waiting.append((partition, offset, entry))
        topics.append({"name": t.name, "partitions": parts})
    body = {"throttle_time": 0, "topics": topics}
    if not waiting:
        return body
    persisted = ctx.persist_log_start_offsets()
    op = DelayedDeleteRecords(req.timeout, body, waiting, persisted, ctx.cluster.brokers.__contains__)
    watched = [w[0] for w in waiting]

    def written(_: asyncio.Future[None]) -> None:
        for p in watched:
            ctx.purgatory.check_soon(p)

    persisted.add_done_callback(written)
    if op.try_complete():  # (a single broker whose checkpoint was written already: not yet, in practice)
        return body
    ctx.purgatory.watch(op, watched)
    return op.pending


class DelayedDeleteRecords(DelayedResponse):
    """DeleteRecords waiting for its log-start-offset checkpoint and its partitions' low
    watermarks; `waiting` holds (partition, offset, response entry) of the unsettled ones."""

    __slots__ = ("body", "live", "persisted", "waiting")

    def __init__(self, timeout_ms: int, body: dict[str, Any], waiting: list[tuple[Partition, int, dict[str, Any]]],
                 persisted: asyncio.Future[None], live: Any) -> None:
        super().__init__(timeout_ms)
        self.body = body
        self.waiting = waiting
        self.persisted = persisted
        self.live = live

    def try_complete(self) -> bool:
        if not self.persisted.done():
            return False
        failed = self.persisted.cancelled() or self.persisted.exception() is not None
        still = []
        for partition, offset, entry in self.waiting:
            if failed:
                entry["error_code"] = int(ErrorCode.KAFKA_STORAGE_ERROR)
            elif not partition.is_leader:
                entry["error_code"] = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                low = partition.low_watermark(self.live)
                if low >= offset:
                    entry["low_watermark"] = low
                else:
                    still.append((partition, offset, entry))
        self.waiting = still
        return not still

    def on_complete(self) -> None:
        if self.expired:
            self.try_complete()
        for _, _, entry in self.waiting:
            entry["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
        self.waiting = []
        self.pending.complete(self.body)
