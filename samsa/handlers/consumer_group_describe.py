"""ConsumerGroupDescribe (69): members, assignments and epochs of KIP-848 consumer groups."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, shard_or_none
from samsa.server.context import RequestContext

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> Any:
    out = []
    for group_id in req.group_ids:
        shard = shard_or_none(ctx, group_id)
        if shard is None:
            out.append({"error_code": NOT_COORDINATOR, "error_message": None, "group_id": group_id,
                        "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "",
                        "members": []})
            continue
        out.extend(shard.consumer_group_describe([group_id], req.include_authorized_operations))
    return {"throttle_time": 0, "groups": out}
