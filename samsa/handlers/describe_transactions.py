"""DescribeTransactions (65, KIP-664): the state of transactional ids this broker coordinates.

Each id: its state (Kafka's names: Empty, Ongoing, PrepareCommit, ...), producer id and epoch,
timeout, start time and partitions; NOT_COORDINATOR for an id coordinated elsewhere,
TRANSACTIONAL_ID_NOT_FOUND for one unknown. Authorization as Kafka's: DESCRIBE on each
transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); only the topics the principal may
describe are listed.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    states = []
    for tid in req.transactional_ids:
        if not ctx.authorize(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            states.append({"error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                           "transactional_id": tid, "transaction_state": "", "transaction_timeout": 0,
                           "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        entry = ctx.transactions.describe(tid)
        if ctx.authorizer is not None:
            entry["topics"] = [t for t in entry["topics"]
                               if ctx.authorize(Op.DESCRIBE, ResourceType.TOPIC, t["topic"], log_denied=False)]
        states.append(entry)
    return {"throttle_time": 0, "transaction_states": states}
