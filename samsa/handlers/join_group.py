"""JoinGroup (11)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, client_host, execute, shard_or_none
from samsa.server.context import RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx: RequestContext, req: Any) -> Any:
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR, "generation_id": -1, "protocol_name": None, "leader": "",
                "member_id": req.member_id, "members": []}
    return execute(ctx, shard, lambda respond: shard.join_group(
        req, ctx.version, ctx.client_id, client_host(ctx), respond))
