"""FindCoordinator (10): which broker coordinates a consumer group or a transactional id.

The coordinator of group G (key type 0) is the leader of `__consumer_offsets` partition
abs(hash(G)) % offsets.topic.num.partitions; of transactional id T (key type 1), the leader of
`__transaction_state` partition abs(hash(T)) % transaction.state.log.num.partitions. DESCRIBE
on the group (or transactional id) is needed, as in Kafka (GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Other key types are INVALID_REQUEST.
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
    if key_type not in (GROUP, TRANSACTION):
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(ErrorCode.INVALID_REQUEST),
                "error_message": f"unknown coordinator key type {key_type}"}
    if key_type == TRANSACTION and not key:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": int(ErrorCode.INVALID_REQUEST),
                "error_message": "empty transactional id"}
    if key_type == GROUP:
        node = await ctx.groups.coordinator_for(key, ctx.listener)
    else:
        node = await ctx.transactions.coordinator_for(key, ctx.listener)
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
