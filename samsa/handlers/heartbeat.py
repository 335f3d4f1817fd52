"""Heartbeat (12)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, call, shard_or_none
from samsa.server.context import RequestContext

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, req: Any) -> Any:
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR}
    return call(ctx, shard, lambda: shard.heartbeat(req, ctx.version))
