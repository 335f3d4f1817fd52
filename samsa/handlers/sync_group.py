"""SyncGroup (14)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR, execute, group_denied, shard_or_none
from samsa.server.context import Op, RequestContext

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, req: Any) -> Any:
    if group_denied(ctx, Op.READ, req.group_id):
        return {"error_code": GROUP_AUTHORIZATION_FAILED, "assignment": b""}
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR, "assignment": b""}
    return execute(ctx, shard, lambda respond: shard.sync_group(req, ctx.version, respond))
