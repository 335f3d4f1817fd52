"""CreatePartitions (37): grow a topic's partition count."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import KafkaError

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx: Any, req: Any) -> dict[str, Any]:
    results = []
    for t in req.topics:
        assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            ctx.broker.admin.create_partitions(t.name, t.count, assignment, req.validate_only)
        except KafkaError as e:
            results.append({"name": t.name, "error_code": int(e.code), "error_message": e.message})
            continue
        results.append({"name": t.name, "error_code": 0})
    return {"throttle_time": 0, "results": results}
