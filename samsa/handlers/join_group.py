"""JoinGroup (11)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import (
    GROUP_AUTHORIZATION_FAILED,
    NOT_COORDINATOR,
    client_host,
    execute,
    group_denied,
    shard_or_none,
)
from samsa.server.context import Op, RequestContext

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9


def handle(ctx: RequestContext, req: Any) -> Any:
    if group_denied(ctx, Op.READ, req.group_id):
        return {"error_code": GROUP_AUTHORIZATION_FAILED, "generation_id": -1, "protocol_name": None, "leader": "",
                "member_id": req.member_id, "members": []}
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR, "generation_id": -1, "protocol_name": None, "leader": "",
                "member_id": req.member_id, "members": []}
    return execute(ctx, shard, lambda respond: shard.join_group(
        req, ctx.version, ctx.client_id, client_host(ctx), respond))
