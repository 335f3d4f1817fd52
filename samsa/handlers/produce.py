"""Produce (0): validate each partition's RecordBatch (storage/validator.py), then append it whole.

Kafka 4.0 accepts Produce v3+ only, where a partition's data is exactly one RecordBatch v2.
Nothing is appended for a partition whose data fails any check; the others still go in.
Only the partition's leader appends (else NOT_LEADER_OR_FOLLOWER, and the client refreshes
its metadata). acks=all: refused up front with NOT_ENOUGH_REPLICAS when the ISR is smaller
than min.insync.replicas; otherwise answered once the high watermark passes the batch (every
ISR member has it), NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum
meanwhile, REQUEST_TIMED_OUT at the request's timeout. The wait is a `DelayedProduce` in the
purgatory, watched under its partitions' `hw_key`s and kept in each partition's heap of
high-watermark waiters: a move of the high watermark checks the operations it reached, in offset
order, and no other (a producer with hundreds of requests in flight made every append and every
follower fetch look at all of them: a fifth of the leader's event loop).

Authorization (as Kafka's): WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions (before anything else is checked: an unauthorized client learns nothing of the
topic); a transactional producer also needs WRITE on its transactional id.

Transactions (KIP-890 part 1): before the first transactional batch of a producer (at its
epoch) goes into a partition, the leader asks the transaction coordinator whether the
partition is in the producer's transaction (`ctx.transactions.verify`); a late or stray
write of an ended transaction is refused, not left open forever. With Produce v12
(transaction version 2) the coordinator adds the partition instead (the client sends no
AddPartitionsToTxn). The coordinator's answers become Kafka's produce errors: not in the
transaction, INVALID_TXN_STATE (TRANSACTION_ABORTABLE from v11); fenced,
INVALID_PRODUCER_EPOCH; coordinator unavailable or busy, NOT_ENOUGH_REPLICAS (retriable for
every client, and no metadata refresh).
A yes counts only if no marker of the producer ended its transaction in the partition while
the question was out (Kafka's VerificationGuard, kept in the partition's producer state).

Metrics (server/metrics.py): each partition of an existing topic that reaches the append counts
in its topic's produce requests, and as a failure when its error is one Kafka counts
(`NOT_A_PRODUCE_FAILURE` are not); the records and bytes appended count in the append itself
(`Partition._appended`), per batch.

Produce v13 (KIP-516, Kafka 4.1) names topics by id, in the request and the answer: a topic id
no topic has is UNKNOWN_TOPIC_ID for its partitions (before anything else is checked, as in
Kafka). Inside this module each topic's `name` is then the name its id resolves to (None for
none), set on the request in place.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from samsa.controller.decisions import WAIT, acks_all_satisfied
from samsa.protocol.batch import HEADER_SIZE, parse_header
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import (
    NOT_A_PRODUCE_FAILURE,
    Op,
    Partition,
    RequestContext,
    ResourceType,
    validate_topic_name,
)
from samsa.server.purgatory import DelayedResponse, Purgatory
from samsa.server.responses import NO_RESPONSE
from samsa.storage.validator import InvalidBatch, validate_produce_records

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
FIRST_TOPIC_ID_VERSION = 13


def handle(ctx: RequestContext, req: Any) -> Any:
    if ctx.version >= FIRST_TOPIC_ID_VERSION:
        for t in req.topic_data:
            t.name = ctx.topic_name(t.topic_id)
    if req.transactional_id is not None:
        checks = _unverified(ctx, req)
        if checks:
            return _verify_then_append(ctx, req, checks)
    return _append_all(ctx, req, None)


def _unverified(ctx: RequestContext, req: Any) -> list[tuple[str, int, int, int, object]]:
    """(topic, partition, producer id, epoch, verification guard) of the transactional batches
    that start their producer's transaction in a partition led here (the coordinator is asked
    first)."""
    if ctx.version < 12 and not ctx.config.get("transaction.partition.verification.enable"):
        return []
    out = []
    for t in req.topic_data:
        if t.name is None:  # (v13: an unknown topic id)
            continue
        for pd in t.partition_data:
            records = pd.records
            if not records or len(records) < HEADER_SIZE:
                continue
            try:
                h = parse_header(records)
            except Exception:  # (malformed: validation answers it)
                continue
            if not h.is_transactional or h.is_control or h.producer_id < 0:
                continue
            partition = ctx.replicas.get(t.name, pd.index)
            if partition is None or not partition.is_leader:
                continue
            producers = partition.producers
            ongoing = producers.ongoing_txn(h.producer_id)
            if ongoing is None or ongoing[0] != h.producer_epoch:
                guard = producers.start_verification(h.producer_id)
                out.append((t.name, pd.index, h.producer_id, h.producer_epoch, guard))
    return out


async def _verify_then_append(ctx: RequestContext, req: Any, checks: list[tuple[str, int, int, int, object]]) -> Any:
    add = ctx.version >= 12
    codes = await asyncio.gather(*(ctx.transactions.verify(req.transactional_id, pid, epoch, topic, index, add=add)
                                   for topic, index, pid, epoch, _ in checks))
    refused: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    for (topic, index, pid, epoch, guard), code in zip(checks, codes, strict=True):
        partition = ctx.replicas.get(topic, index)
        if code == ErrorCode.NONE:
            # (KIP-890's VerificationGuard) the coordinator's yes holds only if no marker of this
            # producer ended its transaction here while the question was out; otherwise the batch
            # would open a transaction nobody ends
            if partition is None or partition.producers.verified(pid, epoch, guard):
                continue  # (a partition gone: the append answers for it)
            refused[(topic, index)] = (_verification_error(ErrorCode.TRANSACTION_ABORTABLE, ctx.version)[0],
                                       "the transaction ended while the partition was being verified")
            continue
        if partition is not None:
            partition.producers.end_verification(pid, guard)
        refused[(topic, index)] = _verification_error(code, ctx.version)
    return _append_all(ctx, req, refused)


def _verification_error(code: ErrorCode, version: int) -> tuple[ErrorCode, str]:
    if code in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
        return ErrorCode.NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to the transaction. "
                                               f"Underlying error: {code.name}")
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, "the producer has been fenced by a newer epoch"
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        code = ErrorCode.INVALID_TXN_STATE
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return code, "Partition was not added to the transaction"
    return code, f"the transaction coordinator answered {code.name}"


def _append_all(ctx: RequestContext, req: Any, refused: dict[tuple[str, int], tuple[ErrorCode, str]] | None) -> Any:
    acks = req.acks
    responses = []
    pending: list[tuple[Partition, int, dict[str, Any], int, int]] = []
    secured = ctx.authorizer is not None
    denied_txn = secured and req.transactional_id is not None and \
        not ctx.authorize(Op.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    topics = ctx.topics
    topic_stats = ctx.replicas.topic_stats
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    for t in req.topic_data:
        parts: list[dict[str, Any]] = []
        responses.append({"name": t.name, "topic_id": t.topic_id, "partition_responses": parts} if by_id
                         else {"name": t.name, "partition_responses": parts})
        if t.name is None:  # (v13) an id no topic has
            parts += [_error(pd.index, ErrorCode.UNKNOWN_TOPIC_ID) for pd in t.partition_data]
            continue
        if secured and (denied_txn or not ctx.authorize(Op.WRITE, ResourceType.TOPIC, t.name)):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if denied_txn:
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            parts += [_error(pd.index, code) for pd in t.partition_data]
            continue
        stats = topic_stats.topic(t.name) if t.name in topics else None
        for pd in t.partition_data:
            if acks not in (0, 1, -1):
                parts.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if refused and (t.name, pd.index) in refused:
                parts.append(_error(pd.index, *refused[(t.name, pd.index)]))
                continue
            entry = append_partition(ctx, t.name, pd.index, pd.records, acks)
            parts.append(entry)
            if stats is not None:
                stats.produce_requests += 1
                if entry["error_code"] and entry["error_code"] not in NOT_A_PRODUCE_FAILURE:
                    stats.failed_produce += 1
            if entry["error_code"] == 0 and acks != 0:
                required, flush = entry.pop("_required"), entry.pop("_flush")
                if acks == 1:
                    required = min_isr = -1
                else:
                    min_isr = ctx.topics[t.name].min_insync_replicas
                if required >= 0 or flush >= 0:
                    partition = ctx.replicas.get(t.name, pd.index)
                    assert partition is not None  # it has just appended
                    if _waits(partition, required, entry, min_isr, flush):
                        pending.append((partition, required, entry, min_isr, flush))
            else:
                entry.pop("_required", None)
                entry.pop("_flush", None)
    if acks == 0:
        return NO_RESPONSE
    body = {"responses": responses, "throttle_time": 0}
    if pending:
        op = DelayedProduce(req.timeout, body, pending)
        op.watch(ctx.purgatory)
        return op.pending
    return body


def _waits(partition: Partition, required: int, entry: dict[str, Any], min_isr: int, flush: int) -> bool:
    """Whether `entry` must wait still: for the log to be flushed to `flush` (flush.messages;
    -1: no), then for acks=all's high watermark to reach `required` (-1: acks=1). Settles
    `entry` with an error where one is the answer."""
    if flush >= 0 and partition.log.recovery_point < flush:
        if partition.flush_error is None:
            return True
        entry.update(_error(entry["index"], ErrorCode.KAFKA_STORAGE_ERROR,
                            f"the log could not be flushed: {partition.flush_error}"))
        return False
    return required >= 0 and _acks_all(partition, required, entry, min_isr) is WAIT


def _acks_all(partition: Partition, required: int, entry: dict[str, Any], min_isr: int) -> object:
    """Settle `entry` if acks=all can be answered now; WAIT if not yet."""
    if not partition.is_leader:
        entry.update(_error(entry["index"], ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            "leadership moved before the batch was replicated"))
        return None
    verdict = acks_all_satisfied(required, partition.hw, len(partition.isr), min_isr)
    if verdict is WAIT:
        return WAIT
    if isinstance(verdict, ErrorCode):
        entry.update(_error(entry["index"], verdict, f"only {len(partition.isr)} in-sync replicas have the batch"))
    return None


class DelayedProduce(DelayedResponse):
    """A produce waiting for its partitions' high watermarks (acks=all; Kafka's DelayedProduce)
    or for their logs' flush (flush.messages, done in a worker thread): `waiting` holds
    (partition, required offset or -1, response entry, min.insync.replicas, flush offset or -1)
    for each partition not settled yet; at the deadline those answer REQUEST_TIMED_OUT."""

    __slots__ = ("body", "waiting")

    def __init__(self, timeout_ms: int, body: dict[str, Any],
                 waiting: list[tuple[Partition, int, dict[str, Any], int, int]]) -> None:
        super().__init__(timeout_ms)
        self.body = body
        self.waiting = waiting

    def watch(self, purgatory: Purgatory) -> None:
        """Wait in `purgatory` under the partitions' `hw_key`s, checked when each partition's
        high watermark reaches this produce's offset there (Partition.wait_for_hw)."""
        purgatory.watch(self, [w[0].hw_key for w in self.waiting])
        if not self.completed:
            for p, required, _, _, _ in self.waiting:
                if required >= 0:
                    p.wait_for_hw(required, self)

    def try_complete(self) -> bool:
        self.waiting = [w for w in self.waiting if _waits(*w)]
        return not self.waiting

    def on_complete(self) -> None:
        if self.expired:
            self.try_complete()  # a last look: what is settled now is answered as such
        for _, _, entry, _, _ in self.waiting:
            entry.update(_error(entry["index"], ErrorCode.REQUEST_TIMED_OUT,
                                "the batch was not replicated to every in-sync replica, or flushed, in time"))
        self.pending.complete(self.body)


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # written by the coordinators only


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"index": index, "error_code": int(code), "base_offset": -1, "log_append_time": -1,
            "log_start_offset": -1, "error_message": message}


def append_partition(ctx: RequestContext, topic: str, index: int, records: Any, acks: int) -> dict[str, Any]:
    try:
        validate_topic_name(topic)
    except KafkaError as e:
        return _error(index, e.code, e.message)
    if topic in INTERNAL_TOPICS:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    partition = ctx.replicas.get(topic, index)
    topics = ctx.topics
    if partition is None:
        code = ctx.replicas.missing(topic, index, topic in topics and index in topics[topic].partitions)
        if code == ErrorCode.KAFKA_STORAGE_ERROR:
            return _error(index, code, f"the log dir of {topic}-{index} on broker {ctx.node_id} failed")
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            return _error(index, code, f"broker {ctx.node_id} does not host {topic}-{index}")
        return _error(index, code)
    if not partition.is_leader:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {ctx.node_id} does not lead {topic}-{index}")
    min_isr = topics[topic].min_insync_replicas
    if acks == -1 and len(partition.isr) < min_isr:
        return _error(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                      f"{len(partition.isr)} in-sync replicas, min.insync.replicas={min_isr}")
    try:
        batch = validate_produce_records(records, partition.log.config, topics[topic].compression_type,
                                         now_ms=int(time.time() * 1000))
    except InvalidBatch as e:
        entry = _error(index, e.code, str(e))
        if e.record_errors:
            entry["record_errors"] = [{"batch_index": i, "batch_index_error_message": m} for i, m in e.record_errors]
        return entry
    out = partition.append(batch.buf, batch.headers, batch.log_append_time)
    if out.error != ErrorCode.NONE:
        return _error(index, out.error, out.message)
    return {"index": index, "error_code": 0, "base_offset": out.base_offset,
            "log_append_time": out.log_append_time, "log_start_offset": out.log_start_offset,
            "_required": partition.log.log_end_offset, "_flush": out.flush_offset}
