"""AddOffsetsToTxn (25): a transactional producer will commit a group's offsets in its transaction.

The coordinator adds the group's `__consumer_offsets` partition to the transaction (its
TxnOffsetCommit records then wait for the transaction's marker there). Authorization as
Kafka's: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the
group (GROUP_AUTHORIZATION_FAILED). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4

OFFSETS_TOPIC = "__consumer_offsets"


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(Op.READ, ResourceType.GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        partition = ctx.groups.partition_of(req.group_id)
        code = await ctx.transactions.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                                     [(OFFSETS_TOPIC, partition)])
        if code == ErrorCode.PRODUCER_FENCED and ctx.version < 2:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time": 0, "error_code": int(code)}
