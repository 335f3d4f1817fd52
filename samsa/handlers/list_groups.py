"""ListGroups (16): every group of every shard on this broker (v4+ filters by state)."""

from __future__ import annotations

from typing import Any

from samsa.server.context import RequestContext

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, req: Any) -> Any:
    states = list(getattr(req, "states_filter", None) or []) or None
    types = set(getattr(req, "types_filter", None) or [])
    groups = []
    for shard in ctx.groups.shards.values():
        groups += shard.list_groups_typed(states, types or None)
    return {"throttle_time": 0, "error_code": 0, "groups": groups}
