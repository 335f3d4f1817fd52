"""DeleteTopics (20): by name (or, v6+, by topic id). The deletions are written to the metadata
store (awaited); the answer waits in the purgatory until this broker's view has lost the
topics (the controller has deleted them), or the request's timeout.

Authorization (as Kafka's): DELETE on each topic (TOPIC_AUTHORIZATION_FAILED); a topic named
by id without DESCRIBE on it answers without its name."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext, ResourceType
from samsa.server.purgatory import CLUSTER_METADATA, DelayedCondition
from samsa.server.responses import Pending

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
_ZERO = bytes(16)


async def handle(ctx: RequestContext, req: Any) -> Any:
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, _ZERO) for n in req.topic_names]
    responses = []
    for name, topic_id in wanted:
        by_id = name is None and topic_id != _ZERO
        if by_id:
            tid = uuid.UUID(bytes=topic_id)
            name = next((t.name for t in ctx.topics.values() if t.topic_id == tid), None)
            if name is None:
                responses.append({"name": None, "topic_id": topic_id, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID)})
                continue
        topic = ctx.topics.get(name)
        tid_bytes = topic.topic_id.bytes if topic else _ZERO
        denied = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if by_id and not ctx.authorize(Op.DESCRIBE, ResourceType.TOPIC, name or ""):
            responses.append({"name": None, "topic_id": topic_id, "error_code": denied})
            continue
        if not ctx.authorize(Op.DELETE, ResourceType.TOPIC, name or ""):
            responses.append({"name": name, "topic_id": topic_id if by_id else _ZERO,
                              "error_code": denied})
            continue
        try:
            await ctx.admin.delete_topic(name)
        except KafkaError as e:
            responses.append({"name": name, "topic_id": tid_bytes, "error_code": int(e.code),
                              "error_message": e.message})
            continue
        responses.append({"name": name, "topic_id": tid_bytes, "error_code": 0})
    deleted = [r["name"] for r in responses if r["error_code"] == 0]
    if not deleted:
        return {"throttle_time": 0, "responses": responses}
    return _when_gone(ctx.purgatory, ctx.topics, deleted, responses, req.timeout)


def _when_gone(purgatory: Any, topics: Any, names: list[str], responses: list[dict[str, Any]],
               timeout_ms: int) -> Pending | dict[str, Any]:
    """Answer once the controller has deleted the topics (this broker's view no longer has them)."""
    if timeout_ms <= 0:
        return {"throttle_time": 0, "responses": responses}

    def answer() -> dict[str, Any]:
        for r in responses:
            if r["error_code"] == 0 and r["name"] in topics:
                r["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
                r["error_message"] = "deletion is queued but not finished yet"
        return {"throttle_time": 0, "responses": responses}

    op = DelayedCondition(timeout_ms, lambda: not any(n in topics for n in names), answer)
    purgatory.try_complete_else_watch(op, [CLUSTER_METADATA])
    return op.pending
