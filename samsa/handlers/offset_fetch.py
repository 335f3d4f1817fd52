"""OffsetFetch (9): one group (v0-v7) or a batch of groups (v8+), each from its own shard.

Authorization (as Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and the
offsets of a topic are shown only with DESCRIBE on it: asked for by name, an unauthorized
topic's partitions answer TOPIC_AUTHORIZATION_FAILED; asked for all, they are left out.

`require_stable` (v7+, sent by read_committed consumers) reaches the shard with the request: a
partition with a pending transactional offset (TxnOffsetCommit, not yet committed or aborted by
its marker) answers UNSTABLE_OFFSET_COMMIT, which clients retry; without it the pending offset
is simply not shown.
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
from samsa.server.responses import Pending

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9


def handle(ctx: RequestContext, req: Any) -> Any:
    if ctx.version < 8:
        if group_denied(ctx, Op.DESCRIBE, req.group_id):
            return {"throttle_time": 0, "topics": [], "error_code": GROUP_AUTHORIZATION_FAILED}
        shard = shard_or_none(ctx, req.group_id)
        if shard is None:
            return {"throttle_time": 0, "topics": [], "error_code": NOT_COORDINATOR}
        sub, denied = _authorized_topics(ctx, req)
        return call(ctx, shard, lambda: shard.offset_fetch(sub, ctx.version)).then(
            lambda r: _shown(ctx, r, denied, req.topics is None))
    parts = [_fetch_one(ctx, req, g) for g in req.groups]
    return Pending.gather(parts).then(lambda got: {
        "throttle_time": 0, "groups": [entry for answer in got for entry in answer["groups"]]})


def _fetch_one(ctx: RequestContext, req: Any, g: Any) -> Pending:
    """v8+: one group of the batch, from its own shard."""
    if group_denied(ctx, Op.DESCRIBE, g.group_id):
        return Pending.completed({"groups": [{"group_id": g.group_id, "topics": [],
                                              "error_code": GROUP_AUTHORIZATION_FAILED}]})
    shard = shard_or_none(ctx, g.group_id)
    if shard is None:
        return Pending.completed({"groups": [{"group_id": g.group_id, "topics": [], "error_code": NOT_COORDINATOR}]})
    g, denied = _authorized_topics(ctx, g)
    sub = Msg(**{**req.__dict__, "groups": [g]})
    return call(ctx, shard, lambda: shard.offset_fetch(sub, ctx.version)).then(
        lambda r: {**r, "groups": [_shown(ctx, entry, denied, g.topics is None) for entry in r["groups"]]})


def _authorized_topics(ctx: RequestContext, req: Any) -> tuple[Any, list[dict[str, Any]]]:
    """The request (or v8+ group) with only the named topics the principal may describe, and
    the answers of the others."""
    if ctx.authorizer is None or req.topics is None:
        return req, []
    allowed = [t for t in req.topics if t.name is None or topic_allowed(ctx, Op.DESCRIBE, t.name)]
    if len(allowed) == len(req.topics):
        return req, []
    denied = [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": TOPIC_AUTHORIZATION_FAILED} for p in t.partition_indexes]}
        for t in req.topics if all(t is not a for a in allowed)]
    return Msg(**{**req.__dict__, "topics": allowed}), denied


def _shown(ctx: RequestContext, answer: dict[str, Any], denied: list[dict[str, Any]],
           all_topics: bool) -> dict[str, Any]:
    if ctx.authorizer is None or answer.get("error_code"):
        return answer
    topics = answer["topics"]
    if all_topics:
        topics = [t for t in topics if topic_allowed(ctx, Op.DESCRIBE, t["name"], log_denied=False)]
    return {**answer, "topics": topics + denied}
