"""DescribeGroups (15)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, shard_or_none
from samsa.server.context import RequestContext

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, req: Any) -> Any:
    out = []
    for group_id in req.groups:
        shard = shard_or_none(ctx, group_id)
        if shard is None:
            out.append({"error_code": NOT_COORDINATOR, "group_id": group_id, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        out.append(shard.describe_group(group_id))
    return {"throttle_time": 0, "groups": out}
