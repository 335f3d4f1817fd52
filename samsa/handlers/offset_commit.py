"""OffsetCommit (8): committed offsets become records in `__consumer_offsets`.

Authorization (as Kafka's): READ on the group (else GROUP_AUTHORIZATION_FAILED on every
partition), and READ on each topic (else TOPIC_AUTHORIZATION_FAILED on its partitions, the
other topics' offsets still committed).
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

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def _all(topics: list[Any], code: int) -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": code}
                                            for p in t.partitions]} for t in topics]


def handle(ctx: RequestContext, req: Any) -> Any:
    if group_denied(ctx, Op.READ, req.group_id):
        return {"throttle_time": 0, "topics": _all(req.topics, GROUP_AUTHORIZATION_FAILED)}
    denied: list[dict[str, Any]] = []
    if ctx.authorizer is not None:
        allowed = [t for t in req.topics if topic_allowed(ctx, Op.READ, t.name)]
        if len(allowed) < len(req.topics):
            denied = _all([t for t in req.topics if all(t is not a for a in allowed)], TOPIC_AUTHORIZATION_FAILED)
            if not allowed:
                return {"throttle_time": 0, "topics": denied}
            req = Msg(**{**req.__dict__, "topics": allowed})
    shard = shard_or_none(ctx, req.group_id)
    if shard is None:
        return {"throttle_time": 0, "topics": _all(req.topics, NOT_COORDINATOR) + denied}
    answer = call(ctx, shard, lambda: shard.offset_commit(req, ctx.version))
    return answer.then(lambda r: {**r, "topics": r["topics"] + denied}) if denied else answer
