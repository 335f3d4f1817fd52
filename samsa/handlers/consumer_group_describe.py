"""ConsumerGroupDescribe (69): members, assignments and epochs of KIP-848 consumer groups.
DESCRIBE on each group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR, group_denied, shard_or_none
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> Any:
    out = []
    for group_id in req.group_ids:
        if group_denied(ctx, Op.DESCRIBE, group_id):
            out.append({"error_code": GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_id": group_id,
                        "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                        "members": []})
            continue
        shard = shard_or_none(ctx, group_id)
        if shard is None:
            out.append({"error_code": NOT_COORDINATOR, "error_message": None, "group_id": group_id,
                        "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                        "members": []})
            continue
        described = shard.consumer_group_describe([group_id], req.include_authorized_operations)
        if req.include_authorized_operations and ctx.authorizer is not None:
            for g in described:
                g["authorized_operations"] = ctx.authorized_operations(ResourceType.GROUP, group_id)
        out.extend(described)
    return {"throttle_time": 0, "groups": out}
