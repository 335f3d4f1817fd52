"""DeleteTopics (20): by name (or, v6+, by topic id)."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6
_ZERO = bytes(16)


async def handle(ctx: Any, req: Any) -> Any:
    broker = ctx.broker
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, _ZERO) for n in req.topic_names]
    responses = []
    for name, topic_id in wanted:
        if name is None and topic_id != _ZERO:
            tid = uuid.UUID(bytes=topic_id)
            name = next((t.name for t in broker.topics.values() if t.topic_id == tid), None)
            if name is None:
                responses.append({"name": None, "topic_id": topic_id, "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID)})
                continue
        topic = broker.topics.get(name)
        tid_bytes = topic.topic_id.bytes if topic else _ZERO
        try:
            await broker.admin.delete_topic(name)
        except KafkaError as e:
            responses.append({"name": name, "topic_id": tid_bytes, "error_code": int(e.code), "error_message": e.message})
            continue
        responses.append({"name": name, "topic_id": tid_bytes, "error_code": 0})
    deleted = [r["name"] for r in responses if r["error_code"] == 0]
    if not deleted:
        return {"throttle_time": 0, "responses": responses}
    return await _when_gone(broker, deleted, responses, req.timeout)


async def _when_gone(broker: Any, names: list[str], responses: list[dict[str, Any]], timeout_ms: int) -> dict[str, Any]:
    """Answer once the controller has deleted the topics (this broker's view no longer has them)."""
    if timeout_ms <= 0:
        return {"throttle_time": 0, "responses": responses}
    await broker.cluster.wait_until(lambda: not any(n in broker.topics for n in names), max(timeout_ms, 0) / 1000)
    for r in responses:
        if r["error_code"] == 0 and r["name"] in broker.topics:
            r["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
            r["error_message"] = "deletion is queued but not finished yet"
    return {"throttle_time": 0, "responses": responses}
