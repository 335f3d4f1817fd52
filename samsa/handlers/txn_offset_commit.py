"""TxnOffsetCommit (28): a transactional producer commits consumed offsets within its transaction.

The offsets are written to the group's `__consumer_offsets` partition as a transactional batch
of the producer and stay pending -- OffsetFetch does not show them -- until the transaction's
marker reaches that partition (samsa/coordinator/txn_offsets.py).

Order of checks, as Kafka's KafkaApis.handleTxnOffsetCommitRequest and GroupCoordinatorService:

1. WRITE on the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition;
   READ on the group, else GROUP_AUTHORIZATION_FAILED on every partition;
2. per topic: READ on it, else TOPIC_AUTHORIZATION_FAILED on its partitions; a topic or
   partition the broker does not have gets UNKNOWN_TOPIC_OR_PARTITION (the rest go on);
3. an empty group id gets INVALID_GROUP_ID; a group this broker does not coordinate,
   NOT_COORDINATOR;
4. the producer is verified with the transaction coordinator (KIP-890 part 1: its transaction
   must hold the group's `__consumer_offsets` partition; v5, transaction version 2, adds it
   instead of AddOffsetsToTxn). A refusal is answered on every partition, the way Kafka's
   verification answers: TRANSACTION_ABORTABLE only from v4 (older clients get
   INVALID_TXN_STATE), PRODUCER_FENCED as INVALID_PRODUCER_EPOCH;
5. the shard validates the group and member (v3+) and writes.

Errors of the write itself are mapped as Kafka's CoordinatorOperationExceptionHelper does
(NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR, REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE, ...),
and v0-v1 get COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS (KAFKA-7296).
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.groups import call, group_denied, shard_or_none, topic_allowed
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.schema import Msg
from samsa.server.context import Op, RequestContext, ResourceType
from samsa.server.responses import Pending

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5

OFFSETS_TOPIC = "__consumer_offsets"
E = ErrorCode

# Kafka's CoordinatorOperationExceptionHelper.handleOperationException
_OPERATION_ERRORS = {
    E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
    E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
    E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
    E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
    E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
    E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
}


def operation_error(code: ErrorCode, version: int) -> ErrorCode:
    """The error a TxnOffsetCommit of `version` answers for `code` met verifying or writing."""
    code = _OPERATION_ERRORS.get(code, code)
    if code is E.COORDINATOR_LOAD_IN_PROGRESS and version < 2:
        return E.COORDINATOR_NOT_AVAILABLE
    return code


def verification_error(code: ErrorCode, version: int) -> ErrorCode:
    """What a refused verification answers (Kafka's AddPartitionsToTxnManager, then the above)."""
    if code is E.PRODUCER_FENCED:
        code = E.INVALID_PRODUCER_EPOCH
    elif code is E.TRANSACTION_ABORTABLE and version < 4:
        code = E.INVALID_TXN_STATE
    return operation_error(code, version)


def _response(req: Any, codes: dict[tuple[str, int], int], default: int) -> dict[str, Any]:
    """Every requested partition in request order, with its code from `codes` (else `default`)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for t in req.topics or []:
        parts = topics.setdefault(t.name, [])
        parts.extend({"partition_index": p.partition_index,
                      "error_code": codes.get((t.name, p.partition_index), default)} for p in t.partitions or [])
    return {"throttle_time": 0, "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}


async def handle(ctx: RequestContext, req: Any) -> Any:
    version = ctx.version
    if not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return _response(req, {}, int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if group_denied(ctx, Op.READ, req.group_id):
        return _response(req, {}, int(E.GROUP_AUTHORIZATION_FAILED))
    rejected: dict[tuple[str, int], int] = {}
    valid: list[Any] = []
    for t in req.topics or []:
        topic = ctx.topics.get(t.name)
        if not topic_allowed(ctx, Op.READ, t.name):
            rejected.update({(t.name, p.partition_index): int(E.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions})
            continue
        ok = []
        for p in t.partitions or []:
            if topic is None or p.partition_index not in topic.partitions:
                rejected[(t.name, p.partition_index)] = int(E.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                ok.append(p)
        if ok:
            valid.append(Msg(**{**t.__dict__, "partitions": ok}))
    if not valid:
        return _response(req, rejected, 0)

    def refused(code: ErrorCode) -> dict[str, Any]:
        return _response(req, rejected, int(code))

    if not req.group_id:
        return refused(E.INVALID_GROUP_ID)
    if shard_or_none(ctx, req.group_id) is None:
        return refused(E.NOT_COORDINATOR)
    verified = await ctx.transactions.verify(req.transactional_id, req.producer_id, req.producer_epoch, OFFSETS_TOPIC,
                                             ctx.groups.partition_of(req.group_id), add=version >= 5)
    if verified != E.NONE:
        return refused(verification_error(E(verified), version))
    shard = shard_or_none(ctx, req.group_id)  # (again: leadership may have moved during the wait)
    if shard is None:
        return refused(E.NOT_COORDINATOR)
    sub = Msg(**{**req.__dict__, "topics": valid})
    written = call(ctx, shard, lambda: shard.txn_offset_commit(sub, version))
    out = Pending()

    def done(body: Any, error: BaseException | None) -> None:
        if error is None:
            codes = dict(rejected)
            for t in body["topics"]:
                for p in t["partitions"]:
                    codes[(t["name"], p["partition_index"])] = p["error_code"]
            out.complete(_response(req, codes, 0))
        elif isinstance(error, KafkaError):
            out.complete(refused(operation_error(error.code, version)))
        else:
            out.fail(error)

    written.on_done(done)
    out.on_cancel(written.cancel)
    return out
