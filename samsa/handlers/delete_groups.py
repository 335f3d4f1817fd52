"""DeleteGroups (42): each group's tombstones are written by its shard; the answer lists every
group's error code once the tombstones are replicated. DELETE on each group is needed
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import GROUP_AUTHORIZATION_FAILED, NOT_COORDINATOR, call, group_denied, shard_or_none
from samsa.server.context import Op, RequestContext
from samsa.server.responses import Pending

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


def handle(ctx: RequestContext, req: Any) -> Any:
    names = list(req.groups_names)
    codes = [_delete(ctx, group_id) for group_id in names]
    return Pending.gather(codes).then(lambda got: {
        "throttle_time": 0, "results": [{"group_id": g, "error_code": int(c)} for g, c in zip(names, got)]})


def _delete(ctx: RequestContext, group_id: str) -> Pending:
    if group_denied(ctx, Op.DELETE, group_id):
        return Pending.completed(GROUP_AUTHORIZATION_FAILED)
    shard = shard_or_none(ctx, group_id)
    if shard is None:
        return Pending.completed(NOT_COORDINATOR)
    return call(ctx, shard, lambda: shard.delete_group(group_id))
