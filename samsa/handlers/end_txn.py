"""EndTxn (26): commit or abort the producer's transaction.

The coordinator writes PrepareCommit/PrepareAbort, answers, then writes the markers to every
partition of the transaction and CompleteCommit/CompleteAbort (`server/txn_manager.py`). A
retried EndTxn of a finished transaction is answered as a success; the wrong outcome is
INVALID_TXN_STATE; one still being written, CONCURRENT_TRANSACTIONS.

v5 (KIP-890 part 2, transaction version 2): every EndTxn bumps the producer's epoch, and the
response carries the producer id and epoch to use next. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2. Authorization: WRITE on the transactional id.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return {"throttle_time": 0, "error_code": int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                "producer_id": -1, "producer_epoch": -1}
    client_tv = 2 if ctx.version >= 5 else 1
    code, pid, epoch = await ctx.transactions.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                                      req.committed, client_tv)
    if code == ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return {"throttle_time": 0, "error_code": int(code), "producer_id": pid, "producer_epoch": epoch}
