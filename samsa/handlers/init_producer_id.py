"""InitProducerId (22): hands idempotent producers a producer id and epoch.

Ids come from a block reserved in the metadata store (`/latest_producer_id_block`, as Kafka
keeps it), so they never repeat across restarts. Transactional ids are a later issue.

Authorization (as Kafka's): IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (an ALLOW
that no DENY covers), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if req.transactional_id:
        return {"throttle_time": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    if not ctx.authorize_cluster(Op.IDEMPOTENT_WRITE, log_denied=False) and \
            not ctx.authorize_any(Op.WRITE, ResourceType.TOPIC):
        return {"throttle_time": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    if req.producer_id >= 0:
        # A producer bumping its epoch after a fatal sequence error keeps its id.
        epoch = req.producer_epoch + 1
        if epoch >= 32767:
            return {"throttle_time": 0, "error_code": 0, "producer_id": await ctx.producer_ids.next(),
                    "producer_epoch": 0}
        return {"throttle_time": 0, "error_code": 0, "producer_id": req.producer_id, "producer_epoch": epoch}
    return {"throttle_time": 0, "error_code": 0, "producer_id": await ctx.producer_ids.next(), "producer_epoch": 0}
