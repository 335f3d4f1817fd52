"""FindCoordinator (10): which broker coordinates a consumer group.

The coordinator of group G is the leader of `__consumer_offsets` partition
abs(hash(G)) % offsets.topic.num.partitions. Transaction coordinators are not served yet:
key type 1 gets COORDINATOR_NOT_AVAILABLE. DESCRIBE on the group (or transactional id) is
needed, as in Kafka (GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

GROUP = 0
TRANSACTION = 1


async def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    if key_type in (GROUP, TRANSACTION):
        rtype, code = ((ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED) if key_type == GROUP else
                       (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        if not ctx.authorize(Op.DESCRIBE, rtype, key):
            return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(code), "error_message": None}
    if key_type != GROUP:
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                "error_message": "transactions are not supported by this broker"}
    node = await ctx.groups.coordinator_for(key, ctx.listener)
    if node is None:
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": int(ErrorCode.COORDINATOR_NOT_AVAILABLE), "error_message": None}
    node_id, host, port = node
    return {"key": key, "node_id": node_id, "host": host, "port": port, "error_code": 0, "error_message": None}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 4:
        return {"throttle_time": 0,
                "coordinators": [await _lookup(ctx, k, req.key_type) for k in req.coordinator_keys]}
    found = await _lookup(ctx, req.key, getattr(req, "key_type", GROUP))
    return {"throttle_time": 0, "error_code": found["error_code"], "error_message": found["error_message"],
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}
