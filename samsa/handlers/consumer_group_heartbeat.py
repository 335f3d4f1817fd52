"""ConsumerGroupHeartbeat (68): the consumer group protocol of KIP-848 (`group.protocol=consumer`)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import (
    GROUP_AUTHORIZATION_FAILED,
    NOT_COORDINATOR,
    call,
    client_host,
    group_denied,
    shard_or_none,
)
from samsa.server.context import Op, RequestContext

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> Any:
    if group_denied(ctx, Op.READ, req.group_id):
        return {"error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "member_id": None,
                "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR, "member_id": None, "member_epoch": 0, "heartbeat_interval": 0,
                "assignment": None}
    return call(ctx, shard, lambda: shard.consumer_group_heartbeat(req, ctx.version, ctx.client_id,
                                                                  client_host(ctx)))
