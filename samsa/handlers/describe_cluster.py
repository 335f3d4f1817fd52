"""DescribeCluster (60)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.metadata import brokers_on
from samsa.server.context import RequestContext

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if getattr(req, "endpoint_type", 1) not in (1,):
        return {"error_code": 114, "error_message": "only broker endpoints are served here",
                "endpoint_type": req.endpoint_type, "cluster_id": ctx.cluster_id, "controller_id": -1, "brokers": []}
    return {
        "throttle_time": 0,
        "error_code": 0,
        "endpoint_type": 1,
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.controller_id,
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                    for b in brokers_on(ctx, ctx.listener)],
        "cluster_authorized_operations": -2147483648,
    }
