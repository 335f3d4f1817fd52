"""DescribeCluster (60)."""

from __future__ import annotations

from typing import Any

from samsa.handlers.metadata import brokers_on
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if getattr(req, "endpoint_type", 1) not in (1,):
        return {"error_code": 114, "error_message": "only broker endpoints are served here",
                "endpoint_type": req.endpoint_type, "cluster_id": ctx.cluster_id, "controller_id": -1, "brokers": []}
    cluster_ops = -2147483648  # (not asked for)
    if getattr(req, "include_cluster_authorized_operations", False):
        cluster_ops = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster") \
            if ctx.authorize_cluster(Op.DESCRIBE) else 0
    return {
        "throttle_time": 0,
        "error_code": 0,
        "endpoint_type": 1,
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.controller_id,
        "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                    for b in brokers_on(ctx, ctx.listener)],
        "cluster_authorized_operations": cluster_ops,
    }
