"""DeleteGroups (42)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import NOT_COORDINATOR, run, shard_or_none

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: Any, req: Any) -> Any:
    results = []
    for group_id in req.groups_names:
        shard = shard_or_none(ctx, group_id)
        if shard is None:
            results.append({"group_id": group_id, "error_code": NOT_COORDINATOR})
            continue
        results.append({"group_id": group_id, "error_code": run(ctx, shard, lambda: shard.delete_group(group_id))})
    return {"throttle_time": 0, "results": results}
