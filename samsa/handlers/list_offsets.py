"""ListOffsets (2): earliest (-2), latest (-1), max timestamp (-3), earliest local (-4, the log
start: Samsa keeps no tiered storage), latest tiered (-5, KIP-1005) and earliest pending upload
(-6, KIP-1023, v11): no offset, as Kafka answers when remote storage is off), or the first
offset at or after a timestamp. v10's timeout (KIP-1075) bounds a wait for remote storage:
there is none, every answer is immediate. "Latest" is the end a
consumer can actually read to: the high watermark, or with `isolation_level` 1 (READ_COMMITTED,
v2+) the last stable offset. DESCRIBE on the topic is needed (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.batch import ATTR_TIMESTAMP_TYPE, HEADER_SIZE, parse_header
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import InvalidRecords, decode_records
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6


READ_COMMITTED = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for t in req.topics:
        parts = []
        if not ctx.authorize(Op.DESCRIBE, ResourceType.TOPIC, t.name):
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                 "timestamp": -1, "offset": -1, "leader_epoch": -1} for p in t.partitions]})
            continue
        for p in t.partitions:
            parts.append(_one(ctx, t.name, p.partition_index, p.timestamp, getattr(p, "current_leader_epoch", -1),
                              committed))
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _one(ctx: RequestContext, topic: str, index: int, ts: int, current_epoch: int = -1,
         committed: bool = False) -> dict[str, Any]:
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        known = topic in ctx.topics and index in ctx.topics[topic].partitions
        code = ctx.replicas.missing(topic, index, known)
        return {"partition_index": index, "error_code": int(code), "timestamp": -1, "offset": -1, "leader_epoch": -1}
    try:
        partition.check_leader(current_epoch)
    except KafkaError as e:
        return {"partition_index": index, "error_code": int(e.code), "timestamp": -1, "offset": -1, "leader_epoch": -1}
    log = partition.log
    epoch = partition.leader_epoch
    if ts not in (EARLIEST, EARLIEST_LOCAL) and partition.hw < partition.epoch_start_offset:
        # KIP-207: a new leader's high watermark has not caught up yet; answering would show
        # consumers an end offset that goes back.
        return {"partition_index": index, "error_code": int(ErrorCode.OFFSET_NOT_AVAILABLE),
                "timestamp": -1, "offset": -1, "leader_epoch": -1}
    if ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        # The highest offset copied to remote storage, the first not copied yet: none (Kafka
        # without remote storage answers so: no error, offset and timestamp -1, which its tools
        # print as nothing).
        return {"partition_index": index, "error_code": 0, "timestamp": -1, "offset": -1, "leader_epoch": -1}
    if ts == LATEST:
        offset, found_ts = partition.last_stable_offset if committed else partition.high_watermark, -1
    elif ts in (EARLIEST, EARLIEST_LOCAL):
        offset, found_ts = log.log_start_offset, -1
    elif ts == MAX_TIMESTAMP:
        found = log.offset_for_max_timestamp()
        offset, found_ts = _first_with_max(log, *found) if found is not None else (-1, -1)
    elif ts < 0:
        return {"partition_index": index, "error_code": int(ErrorCode.INVALID_REQUEST),
                "timestamp": -1, "offset": -1, "leader_epoch": -1}
    else:
        found = log.offset_for_timestamp(ts)
        offset, found_ts = _exact(log, found[0], ts) if found else (-1, -1)
    return {"partition_index": index, "error_code": 0, "timestamp": found_ts, "offset": offset,
            "leader_epoch": epoch if offset >= 0 else -1}


def _exact(log: Any, offset: int, ts: int) -> tuple[int, int]:
    """The first record at or after `ts` inside the batch the index found (Kafka decompresses
    compressed batches for this too; only ListOffsets pays for it, never the fetch path)."""
    sl = log.read(offset, 1, min_one_batch=True)
    if sl is None or sl.size < HEADER_SIZE:
        return offset, ts
    data = log.read_bytes(sl)
    h = parse_header(data)
    try:
        records = decode_records(data[: h.size], h)
    except InvalidRecords:
        return offset, h.max_timestamp
    for r in records:
        if r.offset >= offset and r.timestamp >= ts:
            return r.offset, r.timestamp
    return offset, h.max_timestamp


def _first_with_max(log: Any, offset: int, ts: int) -> tuple[int, int]:
    """The first record carrying the log's largest timestamp `ts`, in the batch holding
    `offset` (the first batch that reached it), as Kafka answers MAX_TIMESTAMP since 3.8
    (KIP-734, KAFKA-16310): its records are walked, decompressed if need be; in a LogAppendTime
    batch every record has the batch's time, so the first."""
    sl = log.read(offset, 1, min_one_batch=True)
    if sl is None or sl.size < HEADER_SIZE:
        return offset, ts
    data = log.read_bytes(sl)
    h = parse_header(data)
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        return h.base_offset, ts
    try:
        records = decode_records(data[: h.size], h)
    except InvalidRecords:
        return offset, ts
    return next(((r.offset, ts) for r in records if r.timestamp == ts), (offset, ts))
