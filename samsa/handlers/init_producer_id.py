"""InitProducerId (22): hands producers a producer id and epoch.

Idempotent producers (no transactional id) get a fresh id from a block reserved in the
metadata store (`/latest_producer_id_block`, as Kafka keeps it), so ids never repeat across
restarts; always a fresh one, at epoch 0, even when the request names an id and epoch (Kafka
ignores them there: an idempotent producer bumps its epoch itself, KIP-360, and asks for a new id
when that is exhausted).

A transactional producer is answered by the transaction coordinator of its id
(`server/txn_manager.py`): the first call creates the id; each later call bumps the epoch,
fencing the previous producer, whose open transaction is aborted first (the new producer is
told CONCURRENT_TRANSACTIONS and retries). `transaction_timeout` above
`transaction.max.timeout.ms` is INVALID_TRANSACTION_TIMEOUT. PRODUCER_FENCED is answered from
v4 on; older versions get INVALID_PRODUCER_EPOCH, as in Kafka (KIP-588).

Authorization (as Kafka's): a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); otherwise IDEMPOTENT_WRITE on the cluster, or WRITE on
some topic (an ALLOW that no DENY covers), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


def _answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": int(code), "producer_id": producer_id, "producer_epoch": epoch}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    tid = req.transactional_id
    if tid is not None:
        if not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return _answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        pid = getattr(req, "producer_id", -1)
        expected = (pid, getattr(req, "producer_epoch", -1)) if pid >= 0 else None
        code, pid, epoch = await ctx.transactions.init_producer_id(tid, req.transaction_timeout, expected)
        if code == ErrorCode.PRODUCER_FENCED and ctx.version < 4:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return _answer(code, pid, epoch)
    if not ctx.authorize_cluster(Op.IDEMPOTENT_WRITE, log_denied=False) and \
            not ctx.authorize_any(Op.WRITE, ResourceType.TOPIC):
        return _answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return _answer(ErrorCode.NONE, await ctx.producer_ids.next(), 0)
