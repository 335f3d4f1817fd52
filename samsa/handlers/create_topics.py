"""CreateTopics (19): the topics are written to the metadata store (awaited), then the answer
waits in the purgatory until the controller has given every new partition a leader.

Authorization (as Kafka's): CREATE on the cluster, or on each topic (TOPIC_AUTHORIZATION_FAILED);
without DESCRIBE_CONFIGS on a topic its configs are not shown (topic_config_error_code)."""

from __future__ import annotations

from typing import Any

from samsa.config import describe_topic_config
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext, ResourceType
from samsa.server.purgatory import CLUSTER_METADATA, DelayedCondition
from samsa.server.responses import Pending

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def handle(ctx: RequestContext, req: Any) -> Any:
    results = []
    seen: set[str] = set()
    may_create_any = ctx.authorize_cluster(Op.CREATE, log_denied=False)
    for t in req.topics:
        if t.name in seen:
            results.append({"name": t.name, "error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": "Duplicate topic name in the request", "num_partitions": -1,
                            "replication_factor": -1})
            continue
        seen.add(t.name)
        if not may_create_any and not ctx.authorize(Op.CREATE, ResourceType.TOPIC, t.name):
            results.append({"name": t.name, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                            "error_message": "Authorization failed.", "num_partitions": -1, "replication_factor": -1,
                            "topic_config_error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)})
            continue
        configs = {c.name: c.value for c in (t.configs or [])}
        assignment = {a.partition_index: list(a.broker_ids) for a in (t.assignments or [])} or None
        if assignment and (t.num_partitions != -1 or t.replication_factor != -1):
            results.append({"name": t.name, "error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": "Give either assignments or partitions/replication factor, not both",
                            "num_partitions": -1, "replication_factor": -1})
            continue
        try:
            topic = await ctx.admin.create_topic(t.name, t.num_partitions, t.replication_factor, configs,
                                                 assignment, req.validate_only)
        except KafkaError as e:
            results.append({"name": t.name, "error_code": int(e.code), "error_message": e.message,
                            "num_partitions": -1, "replication_factor": -1})
            continue
        if not ctx.authorize(Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name, log_denied=False):
            results.append({"name": t.name, "topic_id": topic.topic_id.bytes, "error_code": 0,
                            "num_partitions": len(topic.partitions), "replication_factor": topic.replication_factor,
                            "topic_config_error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "configs": []})
            continue
        entries = describe_topic_config(ctx.config, topic.configs)
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
    return _when_ready(ctx.purgatory, ctx.topic_ready, created, results, req.timeout)


def _when_ready(purgatory: Any, ready: Any, names: list[str], results: list[dict[str, Any]],
                timeout_ms: int) -> Pending | dict[str, Any]:
    """Answer once the controller has given every new partition a leader (as Kafka waits
    for the topics' metadata), or at the request's timeout with REQUEST_TIMED_OUT."""
    if timeout_ms <= 0:  # Kafka: a zero timeout answers at once, the creation under way
        return {"throttle_time": 0, "topics": results}

    def answer() -> dict[str, Any]:
        for r in results:
            if r["error_code"] == 0 and not ready(r["name"]):
                r["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
                r["error_message"] = "the topic was created but its partitions have no leader yet"
        return {"throttle_time": 0, "topics": results}

    op = DelayedCondition(timeout_ms, lambda: all(ready(n) for n in names), answer)
    purgatory.try_complete_else_watch(op, [CLUSTER_METADATA])
    return op.pending
