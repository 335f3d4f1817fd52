"""OffsetDelete (47).

Authorization (as Kafka's): DELETE on the group (else GROUP_AUTHORIZATION_FAILED) and READ on
each topic (else TOPIC_AUTHORIZATION_FAILED on its partitions).
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import (
    GROUP_AUTHORIZATION_FAILED,
    NOT_COORDINATOR,
    TOPIC_AUTHORIZATION_FAILED,
    call,
    group_denied,
    shard_or_none,
    topic_allowed,
)
from samsa.protocol.schema import Msg
from samsa.server.context import Op, RequestContext

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, req: Any) -> Any:
    if group_denied(ctx, Op.DELETE, req.group_id):
        return {"error_code": GROUP_AUTHORIZATION_FAILED, "throttle_time": 0, "topics": []}
    denied: list[dict[str, Any]] = []
    if ctx.authorizer is not None:
        allowed = [t for t in req.topics if topic_allowed(ctx, Op.READ, t.name)]
        denied = [{"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                                   "error_code": TOPIC_AUTHORIZATION_FAILED} for p in t.partitions]}
                  for t in req.topics if all(t is not a for a in allowed)]
        if denied:
            req = Msg(**{**req.__dict__, "topics": allowed})
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"error_code": NOT_COORDINATOR, "throttle_time": 0, "topics": []}
    answer = call(ctx, shard, lambda: shard.offset_delete(req, ctx.version))
    if not denied:
        return answer
    return answer.then(lambda r: r if r["error_code"] else {**r, "topics": r["topics"] + denied})
