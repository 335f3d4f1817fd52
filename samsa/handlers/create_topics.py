"""CreateTopics (19)."""

from __future__ import annotations

from typing import Any

from samsa.config import describe_topic_config
from samsa.protocol.errors import ErrorCode, KafkaError

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def handle(ctx: Any, req: Any) -> Any:
    broker = ctx.broker
    results = []
    seen: set[str] = set()
    for t in req.topics:
        if t.name in seen:
            results.append({"name": t.name, "error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": "Duplicate topic name in the request", "num_partitions": -1,
                            "replication_factor": -1})
            continue
        seen.add(t.name)
        configs = {c.name: c.value for c in (t.configs or [])}
        assignment = {a.partition_index: list(a.broker_ids) for a in (t.assignments or [])} or None
        if assignment and (t.num_partitions != -1 or t.replication_factor != -1):
            results.append({"name": t.name, "error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": "Give either assignments or partitions/replication factor, not both",
                            "num_partitions": -1, "replication_factor": -1})
            continue
        try:
            topic = await broker.admin.create_topic(t.name, t.num_partitions, t.replication_factor, configs,
                                              assignment, req.validate_only)
        except KafkaError as e:
            results.append({"name": t.name, "error_code": int(e.code), "error_message": e.message,
                            "num_partitions": -1, "replication_factor": -1})
            continue
        entries = describe_topic_config(broker.config, topic.configs)
        results.append({
            "name": t.name,
            "topic_id": topic.topic_id.bytes,
            "error_code": 0,
            "num_partitions": len(topic.partitions),
            "replication_factor": topic.replication_factor,
            "configs": [{"name": e.name, "value": e.value, "read_only": e.read_only,
                         "config_source": e.source, "is_sensitive": e.sensitive} for e in entries],
        })
    created = [r["name"] for r in results if r["error_code"] == 0]
    if req.validate_only or not created:
        return {"throttle_time": 0, "topics": results}
    return await _when_ready(broker, created, results, req.timeout)


async def _when_ready(broker: Any, names: list[str], results: list[dict[str, Any]], timeout_ms: int) -> dict[str, Any]:
    """Answer once the controller has given every new partition a leader (as Kafka waits
    for the topics' metadata), or at the request's timeout with REQUEST_TIMED_OUT."""
    view = broker.cluster
    ready = broker.topic_ready
    if timeout_ms <= 0:  # Kafka: a zero timeout answers at once, the creation under way
        return {"throttle_time": 0, "topics": results}
    await view.wait_until(lambda: all(ready(n) for n in names), max(timeout_ms, 0) / 1000)
    for r in results:
        if r["error_code"] == 0 and not ready(r["name"]):
            r["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
            r["error_message"] = "the topic was created but its partitions have no leader yet"
    return {"throttle_time": 0, "topics": results}
