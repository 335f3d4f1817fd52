"""OffsetFetch (9): one group (v0-v7) or a batch of groups (v8+), each from its own shard."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, call, shard_or_none
from samsa.protocol.schema import Msg
from samsa.server.context import RequestContext
from samsa.server.responses import Pending

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def handle(ctx: RequestContext, req: Any) -> Any:
    if ctx.version < 8:
        shard = shard_or_none(ctx, req.group_id)
        if shard is None:
            return {"throttle_time": 0, "topics": [], "error_code": NOT_COORDINATOR}
        return call(ctx, shard, lambda: shard.offset_fetch(req, ctx.version))
    parts = [_fetch_one(ctx, req, g) for g in req.groups]
    return Pending.gather(parts).then(lambda got: {
        "throttle_time": 0, "groups": [entry for answer in got for entry in answer["groups"]]})


def _fetch_one(ctx: RequestContext, req: Any, g: Any) -> Pending:
    """v8+: one group of the batch, from its own shard."""
    shard = shard_or_none(ctx, g.group_id)
    if shard is None:
        return Pending.completed({"groups": [{"group_id": g.group_id, "topics": [], "error_code": NOT_COORDINATOR}]})
    sub = Msg(**{**req.__dict__, "groups": [g]})
    return call(ctx, shard, lambda: shard.offset_fetch(sub, ctx.version))
