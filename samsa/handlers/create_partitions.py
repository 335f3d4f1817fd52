"""CreatePartitions (37): grow a topic's partition count."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import KafkaError

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: Any, req: Any) -> Any:
    results = []
    for t in req.topics:
        assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
        try:
            await ctx.broker.admin.create_partitions(t.name, t.count, assignment, req.validate_only)
        except KafkaError as e:
            results.append({"name": t.name, "error_code": int(e.code), "error_message": e.message})
            continue
        results.append({"name": t.name, "error_code": 0})
    grown = {t.name: t.count for t in req.topics}
    ok = [r["name"] for r in results if r["error_code"] == 0]
    if req.validate_only or not ok:
        return {"throttle_time": 0, "results": results}
    view = ctx.broker.cluster

    def ready() -> bool:
        return all(ctx.broker.topic_ready(n) and len(ctx.broker.topics[n].partitions) >= grown[n] for n in ok)

    await view.wait_until(ready, max(req.timeout, 0) / 1000)
    return {"throttle_time": 0, "results": results}
