"""OffsetCommit (8): committed offsets become records in `__consumer_offsets`."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, call, shard_or_none
from samsa.server.context import RequestContext

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def handle(ctx: RequestContext, req: Any) -> Any:
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"throttle_time": 0, "topics": [
            {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": NOT_COORDINATOR}
                                            for p in t.partitions]} for t in req.topics]}
    return call(ctx, shard, lambda: shard.offset_commit(req, ctx.version))
