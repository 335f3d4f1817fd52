"""ListGroups (16): every group of every shard on this broker (v4+ filters by state).

As Kafka's: with DESCRIBE on the cluster every group is listed, otherwise only the groups the
principal may DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: RequestContext, req: Any) -> Any:
    states = list(getattr(req, "states_filter", None) or []) or None
    types = set(getattr(req, "types_filter", None) or [])
    groups = []
    for shard in ctx.groups.shards.values():
        groups += shard.list_groups_typed(states, types or None)
    if ctx.authorizer is not None and not ctx.authorize_cluster(Op.DESCRIBE, log_denied=False):
        groups = [g for g in groups if ctx.authorize(Op.DESCRIBE, ResourceType.GROUP, g["group_id"], log_denied=False)]
    return {"throttle_time": 0, "error_code": 0, "groups": groups}
