"""DeleteRecords (21): move a partition's log start offset forward (-1 = the high watermark)."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import RequestContext

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            partition = ctx.replicas.get(t.name, p.partition_index)
            if partition is None:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)})
                continue
            if not partition.is_leader:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": int(ErrorCode.NOT_LEADER_OR_FOLLOWER)})
                continue
            hw = partition.high_watermark
            offset = hw if p.offset == -1 else p.offset
            if offset < 0 or offset > hw:
                parts.append({"partition_index": p.partition_index, "low_watermark": -1,
                              "error_code": int(ErrorCode.OFFSET_OUT_OF_RANGE)})
                continue
            low = (partition.log.delete_records_before(offset) if offset > partition.log_start_offset
                   else partition.log_start_offset)
            parts.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": 0})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
