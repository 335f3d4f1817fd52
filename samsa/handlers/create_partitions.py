"""CreatePartitions (37): grow a topic's partition count. The new assignment is written to the
metadata store (awaited); the answer waits in the purgatory until every new partition has a
leader in this broker's view (Kafka's DelayedCreatePartitions), or REQUEST_TIMED_OUT at the
request's timeout. ALTER on the topic is needed (TOPIC_AUTHORIZATION_FAILED), as in Kafka."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext, ResourceType
from samsa.server.purgatory import CLUSTER_METADATA, DelayedCondition

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, req: Any) -> Any:
    results = []
    for t in req.topics:
        if not ctx.authorize(Op.ALTER, ResourceType.TOPIC, t.name):
            results.append({"name": t.name, "error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                            "error_message": "The topic authorization is failed."})
            continue
        assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            await ctx.admin.create_partitions(t.name, t.count, assignment, req.validate_only)
        except KafkaError as e:
            results.append({"name": t.name, "error_code": int(e.code), "error_message": e.message})
            continue
        results.append({"name": t.name, "error_code": 0})
    grown = {t.name: t.count for t in req.topics}
    ok = [r["name"] for r in results if r["error_code"] == 0]
    if req.validate_only or not ok or req.timeout <= 0:
        return {"throttle_time": 0, "results": results}
    topic_ready, topics = ctx.topic_ready, ctx.topics

    def grown_ready(name: str) -> bool:
        topic = topics.get(name)
        return topic is not None and len(topic.partitions) >= grown[name] and topic_ready(name)

    def answer() -> dict[str, Any]:
        for r in results:
            if r["error_code"] == 0 and not grown_ready(r["name"]):
                r["error_code"] = int(ErrorCode.REQUEST_TIMED_OUT)
                r["error_message"] = "the partitions were added but do not all have a leader yet"
        return {"throttle_time": 0, "results": results}

    op = DelayedCondition(req.timeout, lambda: all(grown_ready(n) for n in ok), answer)
    ctx.purgatory.try_complete_else_watch(op, [CLUSTER_METADATA])
    return op.pending
