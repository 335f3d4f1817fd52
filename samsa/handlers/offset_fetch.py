"""OffsetFetch (9): one group (v0-v7) or a batch of groups (v8+), each from its own shard."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, run, shard_or_none
from samsa.protocol.schema import Msg

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def handle(ctx: Any, req: Any) -> Any:
    if ctx.version < 8:
        shard = shard_or_none(ctx, req.group_id)
        if shard is None:
            return {"throttle_time": 0, "topics": [], "error_code": NOT_COORDINATOR}
        return run(ctx, shard, lambda: shard.offset_fetch(req, ctx.version))
    groups = []
    for g in req.groups:
        shard = shard_or_none(ctx, g.group_id)
        if shard is None:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": NOT_COORDINATOR})
            continue
        sub = Msg(**{**req.__dict__, "groups": [g]})
        groups.extend(run(ctx, shard, lambda: shard.offset_fetch(sub, ctx.version))["groups"])
    return {"throttle_time": 0, "groups": groups}
