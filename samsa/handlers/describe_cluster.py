"""DescribeCluster (60)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.metadata import brokers_on

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: Any, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    if getattr(req, "endpoint_type", 1) not in (1,):
        return {"error_code": 114, "error_message": "only broker endpoints are served here",
                "endpoint_type": req.endpoint_type, "cluster_id": broker.cluster_id, "controller_id": -1, "brokers": []}
    return {
        "throttle_time": 0,
        "error_code": 0,
        "endpoint_type": 1,
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                    for b in brokers_on(broker, ctx.conn.server.name)],
        "cluster_authorized_operations": -2147483648,
    }
