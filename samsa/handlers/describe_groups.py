"""DescribeGroups (15). DESCRIBE on each group is needed (GROUP_AUTHORIZATION_FAILED).

v6 (KIP-1043) adds an error message per group, and answers a group that does not exist or is
not a classic group with GROUP_ID_NOT_FOUND (v0-v5: described as Dead, no error)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR, group_denied, shard_or_none
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6


def handle(ctx: RequestContext, req: Any) -> Any:
    out = []
    for group_id in req.groups:
        if group_denied(ctx, Op.DESCRIBE, group_id):
            out.append({"error_code": GROUP_AUTHORIZATION_FAILED, "group_id": group_id, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        shard = shard_or_none(ctx, group_id)
        if shard is None:
            out.append({"error_code": NOT_COORDINATOR, "group_id": group_id, "group_state": "",
                        "protocol_type": "", "protocol_data": "", "members": []})
            continue
        described = shard.describe_group(group_id, ctx.version)
        if getattr(req, "include_authorized_operations", False) and described.get("error_code") == 0:
            described["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.append(described)
    return {"throttle_time": 0, "groups": out}
