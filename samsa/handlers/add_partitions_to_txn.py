"""AddPartitionsToTxn (24): a transactional producer names the partitions it will write.

v0-v3 carry one transaction from a client. v4+ (KIP-890) carry a batch of transactions and
come from brokers: with `verify_only` a partition leader asks whether a partition is already
in the transaction (TRANSACTION_ABORTABLE if not), without it (transaction version 2) the
coordinator adds it; a client may not send v4+ (Kafka: CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED for the whole request).

Errors per partition, as Kafka's: the coordinator's answer for all of them, or, when some
partitions are refused up front (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION),
those and OPERATION_NOT_ATTEMPTED for the rest, nothing added. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2.

Authorization (v0-v3): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for
every partition) and WRITE on each topic.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 24
MIN_VERSION = 0
MAX_VERSION = 5
MAX_BATCHED_TRANSACTIONS = 1000


def _results(parts: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), code in parts.items():
        topics.setdefault(t, []).append({"partition_index": p, "partition_error_code": int(code)})
    return [{"name": t, "results_by_partition": ps} for t, ps in topics.items()]


async def _one(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: Any, verify_only: bool,
               from_broker: bool) -> dict[tuple[str, int], ErrorCode]:
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    if not from_broker and not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
    refused: dict[tuple[str, int], ErrorCode] = {}
    for t in topics:
        if not from_broker and not ctx.authorize(Op.WRITE, ResourceType.TOPIC, t.name):
            refused.update({(t.name, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED for p in t.partitions})
            continue
        topic = ctx.topics.get(t.name)
        for p in t.partitions:
            if topic is None or p not in topic.partitions:
                refused[(t.name, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    if verify_only:
        return ctx.transactions.verify_local(tid, pid, epoch, wanted)
    code = await ctx.transactions.add_partitions(tid, pid, epoch, wanted, client_tv=2 if from_broker else None)
    return {tp: code for tp in wanted}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.version >= 4:
        if not ctx.authorize_cluster(Op.CLUSTER_ACTION):
            return {"throttle_time": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                    "results_by_transaction": []}
        if len(req.transactions) > MAX_BATCHED_TRANSACTIONS:
            return {"throttle_time": 0, "error_code": int(ErrorCode.INVALID_REQUEST), "results_by_transaction": []}
        results = []
        for txn in req.transactions:
            parts = await _one(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                               txn.verify_only, True)
            results.append({"transactional_id": txn.transactional_id, "topic_results": _results(parts)})
        return {"throttle_time": 0, "error_code": 0, "results_by_transaction": results}
    parts = await _one(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                       req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, False)
    if ctx.version < 2:
        parts = {tp: ErrorCode.INVALID_PRODUCER_EPOCH if c == ErrorCode.PRODUCER_FENCED else c
                 for tp, c in parts.items()}
    return {"throttle_time": 0, "results_by_topic_v3_and_below": _results(parts)}
