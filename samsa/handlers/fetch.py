"""Fetch (1): file slices of the log, long-polled until `min_bytes` arrive or `max_wait` passes.

A partition's data is a byte range of one segment, sent with sendfile. Limits are Kafka's:
`partition_max_bytes` per partition and `max_bytes` for the response, except that the first
partition with data returns at least its first whole batch so a consumer can always make
progress (KIP-74). Consumers read up to the high watermark only. Fetch sessions (KIP-227) are
not kept: every response has session id 0, which clients treat as a full (sessionless) fetch.

A fetch with `replica_id` >= 0 comes from a follower: its fetch offset tells the leader what
it has (ISR and high watermark move, see `Partition.update_follower`), and it reads up to the
log end offset. Only the leader serves either kind (NOT_LEADER_OR_FOLLOWER); a
`current_leader_epoch` older than the leader's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.schema import Out
from samsa.protocol.wire import I32, write_uvarint
from samsa.server.network import Pending
from samsa.storage.errors import OffsetOutOfRange

log = logging.getLogger("samsa.requests")

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12


def handle(ctx: Any, req: Any) -> Any:
    broker = ctx.broker
    responses, nbytes, waitable, errors = _read(broker, req)
    if nbytes >= req.min_bytes or req.max_wait <= 0 or errors or not waitable:
        return _response(responses)
    # Watch the partitions now, before returning: an append handled before anything else runs
    # must still wake it (Kafka's tryCompleteElseWatch).
    return _LongPoll(broker, req, waitable, _TailAnswer.for_request(ctx.header, req)).pending


class _LongPoll:
    """A fetch waiting for data: answered from inside the append (or high watermark move) that
    brings enough, before that produce's own response, or at `max_wait` with what there is."""

    def __init__(self, broker: Any, req: Any, waitable: list[Any], tail: "_TailAnswer | None" = None) -> None:
        self.broker = broker
        self.req = req
        self.tail = tail
        self.pending = Pending()
        self.pending.on_cancel(self._stop)
        self.deadline = time.monotonic() + req.max_wait / 1000
        # A follower also returns when a high watermark moves, so it learns the new one at once
        # (a leader elected later starts from it).
        self.hws = ({(p.topic, p.index): p.hw for p in waitable}
                    if getattr(req, "replica_id", -1) >= 0 else None)
        self.watched: list[Any] = []
        self._watch(waitable)
        self.timer = broker.loop.call_later(req.max_wait / 1000, self._check, True)

    def _watch(self, partitions: list[Any]) -> None:
        for p in partitions:
            p.waiters.append(self._woken)
        self.watched = partitions

    def _unwatch(self) -> None:
        for p in self.watched:
            try:
                p.waiters.remove(self._woken)
            except ValueError:
                pass  # the partition woke us: its list was handed over and emptied
        self.watched = []

    def _stop(self) -> None:
        self._unwatch()
        self.timer.cancel()

    def _woken(self, data: bool) -> None:
        if data:
            if self.tail is not None and self._answer_from_append():
                return
            self._check(False)
        else:  # a role change in progress: look once it is done
            self.broker.loop.call_soon(self._check, False)

    def _answer_from_append(self) -> bool:
        """Answer with the batch the waking append just wrote, when that is exactly what `_read`
        would return: the fetch waits on one partition at the append's first offset, the high
        watermark is now the append's end and the batch fits the byte limits. The bytes come
        from memory, already in the log: no read back, no general encoder."""
        tail = self.tail
        assert tail is not None
        partition = self.watched[0]
        appended = partition.just_appended
        if (self.pending.done or appended is None or appended[0] != tail.fetch_offset
                or appended[1] != partition.hw or len(appended[2]) > tail.max_bytes
                or len(appended[2]) < self.req.min_bytes):
            return False
        try:
            partition.check_leader(tail.leader_epoch)
        except KafkaError:  # fenced meanwhile: the general path answers with the error
            return False
        self.watched = []  # the waking partition handed its waiters over
        self.timer.cancel()
        try:
            answer: Any = tail.encode(partition.hw, partition.log.log_start_offset, appended[2])
        except Exception as e:  # as in _check: this fetch's connection closes (logged there)
            answer = e
        try:
            if isinstance(answer, Exception):
                self.pending.fail(answer)
            else:
                self.pending.complete(answer)
        except Exception:
            log.exception("could not answer a fetch")
        return True

    def _check(self, timed_out: bool) -> None:
        # Runs inside whatever woke it (a produce's append): nothing may escape into that.
        if self.pending.done:
            return
        try:
            self._unwatch()
            responses, nbytes, waitable, errors = _read(self.broker, self.req, first=False)
            remaining = self.deadline - time.monotonic()
            done = timed_out or nbytes >= self.req.min_bytes or errors or not waitable or remaining <= 0
            if not done and self.hws is not None:
                done = any(p.hw != self.hws.get((p.topic, p.index), p.hw) for p in waitable)
            if not done:
                self._watch(waitable)
                return
            self.timer.cancel()
            answer: Any = _response(responses)
        except Exception as e:  # this fetch's connection closes (logged there); the append goes on
            self._stop()
            answer = e
        try:
            if isinstance(answer, Exception):
                self.pending.fail(answer)
            else:
                self.pending.complete(answer)
        except Exception:
            log.exception("could not answer a fetch")


class _TailAnswer:
    """A consumer's fetch of one partition, waiting at the end of the log, answered with the
    next append's bytes: the response frame up to the partition's fields is laid out once when
    the fetch starts to wait, the rest is packed when the batch arrives. Byte for byte what
    `encode_response` makes of `_read`'s answer (tested for every version)."""

    __slots__ = ("fetch_offset", "leader_epoch", "max_bytes", "prefix", "fields", "flexible", "has_log_start",
                 "replica")

    @classmethod
    def for_request(cls, header: Any, req: Any) -> "_TailAnswer | None":
        if (header.api_version > 12 or getattr(req, "replica_id", -1) >= 0 or len(req.topics) != 1
                or len(req.topics[0].partitions) != 1):  # (v13+ names topics by id)
            return None
        return cls(header.api_version, header.correlation_id, req)

    def __init__(self, version: int, correlation_id: int, req: Any) -> None:
        topic = req.topics[0]
        fp = topic.partitions[0]
        self.fetch_offset = fp.fetch_offset
        self.leader_epoch = getattr(fp, "current_leader_epoch", -1)
        self.max_bytes = min(fp.partition_max_bytes, req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF)
        self.flexible = flexible = version >= 12
        name = topic.topic.encode()
        head = bytearray(I32.pack(correlation_id))
        if flexible:
            head.append(0)  # no header tagged fields
        head += I32.pack(0)  # throttle_time
        if version >= 7:
            head += struct.pack(">hi", 0, 0)  # error_code, session_id
        if flexible:
            head.append(2)  # one topic
            write_uvarint(head, len(name) + 1)
            head += name
            head.append(2)  # one partition
        else:
            head += struct.pack(">ih", 1, len(name)) + name + I32.pack(1)
        head += struct.pack(">ih", fp.partition, 0)  # partition_index, error_code
        self.prefix = bytes(head)
        # high_watermark, last_stable_offset (v4+), log_start_offset (v5+)
        self.has_log_start = version >= 5
        self.fields = struct.Struct(">qqq" if self.has_log_start else ">qq")
        # aborted_transactions: null; preferred_read_replica (v11+): -1
        self.replica = (b"\0" if flexible else I32.pack(-1)) + (I32.pack(-1) if version >= 11 else b"")

    def encode(self, hw: int, log_start: int, records: bytes | bytearray | memoryview) -> Out:
        out = Out()
        out += b"\0\0\0\0"
        out += self.prefix
        out += self.fields.pack(hw, hw, log_start) if self.has_log_start else self.fields.pack(hw, hw)
        out += self.replica
        if self.flexible:
            write_uvarint(out, len(records) + 1)
            out += records
            out += b"\0\0\0"  # partition, topic and response tagged fields
        else:
            out += I32.pack(len(records))
            out += records
        I32.pack_into(out, 0, len(out) - 4)
        return out


def _response(responses: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}


def _read(broker: Any, req: Any, first: bool = True) -> tuple[list[dict[str, Any]], int, list[Any], bool]:
    budget = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    replica_id = getattr(req, "replica_id", -1)
    follower = replica_id >= 0
    live = broker.cluster.brokers.__contains__
    total = 0
    errors = False
    waitable = []
    responses = []
    for t in req.topics:
        parts = []
        for fp in t.partitions:
            partition = broker.replicas.get(t.topic, fp.partition)
            if partition is None:
                errors = True
                known = t.topic in broker.topics and fp.partition in broker.topics[t.topic].partitions
                parts.append(_part(fp.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER if known
                                   else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                partition.check_leader(getattr(fp, "current_leader_epoch", -1))
            except KafkaError as e:
                errors = True
                parts.append(_part(fp.partition, e.code))
                continue
            if follower and first:
                partition.update_follower(replica_id, fp.fetch_offset, live)
            hw = partition.high_watermark
            log = partition.log
            entry = _part(fp.partition, ErrorCode.NONE, hw, log.log_start_offset)
            limit = min(fp.partition_max_bytes, budget - total)
            if limit <= 0 and total > 0:
                parts.append(entry)
                continue
            try:
                sl = log.read(fp.fetch_offset, max(limit, 0), max_offset=None if follower else hw,
                              min_one_batch=(total == 0))
            except OffsetOutOfRange:
                errors = True
                parts.append(_part(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE, hw, log.log_start_offset))
                continue
            if sl is not None and sl.size > 0:
                entry["records"] = sl
                total += sl.size
            else:
                waitable.append(partition)
            parts.append(entry)
        responses.append({"topic": t.topic, "partitions": parts})
    return responses, total, waitable, errors


def _part(index: int, code: ErrorCode, hw: int = -1, log_start: int = -1) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": int(code),
        "high_watermark": hw,
        "last_stable_offset": hw,
        "log_start_offset": log_start,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
