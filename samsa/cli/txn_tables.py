"""The pure half of `samsa transactions`: Kafka's tables, the hanging-transaction decision and the
texts of Kafka's errors. No client, no I/O: table-tested in tests/cli/test_transactions_tool.py.

Tables are printed as Kafka's `ToolsUtils.prettyPrintTable` prints them: every cell padded to its
column's width and followed by a tab, the header row first (so a script can split on tabs or
on runs of blanks alike).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")

# Kafka's names of the APIs (ApiKeys), for "The node does not support ..." and its error texts.
API_NAMES = {3: "METADATA", 10: "FIND_COORDINATOR", 27: "WRITE_TXN_MARKERS", 61: "DESCRIBE_PRODUCERS",
             65: "DESCRIBE_TRANSACTIONS", 66: "LIST_TRANSACTIONS"}

_E = ErrorCode
# The messages of Kafka's exceptions (Errors.java) for the errors these commands meet.
_KAFKA_MESSAGES: dict[int, str] = {
    _E.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    _E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    _E.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a leadership "
    "election.",
    _E.REQUEST_TIMED_OUT: "The request timed out.",
    _E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    _E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    _E.NOT_COORDINATOR: "This is not the correct coordinator.",
    _E.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Messages are written to the log, but to fewer in-sync replicas than "
    "required.",
    _E.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    _E.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    _E.UNSUPPORTED_VERSION: "The version of API is not supported.",
    _E.INVALID_TXN_STATE: "The producer attempted a transactional operation in an invalid state.",
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    _E.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
}


def kafka_message(code: int) -> str:
    """Kafka's default message for an error code (its name when we have no text for it)."""
    if code in _KAFKA_MESSAGES:
        return _KAFKA_MESSAGES[code]
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else f"error code {code}"


def pretty_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Kafka's prettyPrintTable: cells left-aligned to the widest of their column, each followed by a tab."""
    body = [list(r) for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in body)]) for i, h in enumerate(headers)]
    lines = ["".join(cell.ljust(widths[i]) + "\t" for i, cell in enumerate(row)) for row in [list(headers), *body]]
    return "\n".join(lines) + "\n"


def tp_text(tp: TopicPartition) -> str:
    """A partition as Kafka's TopicPartition.toString spells it: `topic-partition`."""
    return f"{tp[0]}-{tp[1]}"


@dataclass(frozen=True)
class ProducerState:
    """One producer of a partition, from DescribeProducers (Kafka's admin ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker seen yet
    current_txn_start_offset: int  # -1: no open transaction


@dataclass(frozen=True)
class TxnDescription:
    """A transactional id's state, from DescribeTransactions (Kafka's TransactionDescription)."""

    coordinator_id: int
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction under way
    partitions: frozenset[TopicPartition]


def describe_row(d: TxnDescription, now_ms: int) -> list[str]:
    started = d.start_time_ms >= 0
    return [str(d.coordinator_id), d.transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
            str(d.timeout_ms), str(d.start_time_ms) if started else "None",
            str(now_ms - d.start_time_ms) if started else "None",
            ",".join(tp_text(tp) for tp in sorted(d.partitions))]


def producer_row(p: ProducerState) -> list[str]:
    return [str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
            str(p.last_timestamp), str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None"]


OpenTxn = tuple[TopicPartition, ProducerState]


def open_transactions(producers: Mapping[TopicPartition, Sequence[ProducerState]], now_ms: int,
                      max_timeout_ms: int) -> list[OpenTxn]:
    """The candidates of find-hanging: open transactions whose producer wrote nothing for longer
    than the largest transaction timeout allowed (Kafka's collectCandidateOpenTransactions)."""
    return [(tp, p) for tp, states in producers.items() for p in states
            if p.current_txn_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms]


def hanging_transactions(candidates: Sequence[OpenTxn], transactional_ids: Mapping[int, str],
                         descriptions: Mapping[str, TxnDescription | None]) -> list[OpenTxn]:
    """Kafka's filterHangingTransactions: an open transaction is hanging when no transactional id
    is listed with its producer id, when that id cannot be described, or when the id's current
    transaction does not hold the partition. (A coordinator lists every partition of an Ongoing
    transaction, and in PrepareCommit/PrepareAbort those whose marker is not written yet, so a
    transaction being completed is not hanging.)"""
    out = []
    for tp, p in candidates:
        tid = transactional_ids.get(p.producer_id)
        description = descriptions.get(tid) if tid is not None else None
        if description is None or tp not in description.partitions:
            out.append((tp, p))
    return out


def hanging_row(txn: OpenTxn, now_ms: int) -> list[str]:
    (topic, partition), p = txn
    minutes = (now_ms - p.last_timestamp) // 60_000
    return [topic, str(partition), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
            str(p.current_txn_start_offset), str(p.last_timestamp), str(minutes)]


def abort_spec_text(tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> str:
    """Kafka's AbortTransactionSpec.toString, as its error messages quote it."""
    return (f"AbortTransactionSpec(topicPartition={tp_text(tp)}, producerId={producer_id}, "
            f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")


def abort_error(code: int, spec: str, coordinator_epoch: int) -> str:
    """Kafka's AbortTransactionHandler text for a WriteTxnMarkers partition error."""
    if code == _E.CLUSTER_AUTHORIZATION_FAILED:
        return f"WriteTxnMarkers request with {spec} failed due to cluster authorization error"
    if code == _E.INVALID_PRODUCER_EPOCH:
        return f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
    if code == _E.TRANSACTION_COORDINATOR_FENCED:
        return (f"WriteTxnMarkers request with {spec} failed since the provided coordinator epoch "
                f"{coordinator_epoch} has been fenced by the active coordinator")
    return f"WriteTxnMarkers request with {spec} failed due to unexpected error: {kafka_message(code)}"


def describe_producers_error(code: int, tp: TopicPartition, message: str | None) -> str:
    """Kafka's DescribeProducersHandler text for a partition error (NOT_LEADER_OR_FOLLOWER from a
    broker the user named is the caller's)."""
    if code == _E.TOPIC_AUTHORIZATION_FAILED:
        return (f"Failed to describe active producers for partition {tp_text(tp)} due to authorization failure "
                f"on topic `{tp[0]}`")
    if code == _E.INVALID_TOPIC_EXCEPTION:
        return (f"Failed to fetch metadata for partition {tp_text(tp)} due to invalid topic error: "
                f"{message or 'The request attempted to perform an operation on an invalid topic.'}")
    if code == _E.UNKNOWN_TOPIC_OR_PARTITION:
        return kafka_message(code)
    return f"Failed to describe active producers for partition {tp_text(tp)} due to unexpected error"


def describe_txn_error(code: int, transactional_id: str) -> str:
    """Kafka's DescribeTransactionsHandler text for an error (the retried ones excepted)."""
    if code == _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return (f"DescribeTransactions request for transactionalId `{transactional_id}` failed due to authorization "
                "failure")
    if code == _E.TRANSACTIONAL_ID_NOT_FOUND:
        return (f"DescribeTransactions request for transactionalId `{transactional_id}` failed because the ID could "
                "not be found")
    return f"DescribeTransactions request for transactionalId `{transactional_id}` failed due to unexpected error"


def find_coordinator_error(code: int, transactional_id: str) -> str:
    if code == _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return f"FindCoordinator request for transactionalId `{transactional_id}` failed due to authorization failure"
    return f"FindCoordinator request for key `{transactional_id}` failed due to an unexpected error"


def list_txn_error(code: int, broker_id: int) -> str:
    if code == _E.COORDINATOR_NOT_AVAILABLE:
        return (f"ListTransactions request sent to broker {broker_id} failed because the coordinator is "
                "shutting down")
    return f"ListTransactions request sent to broker {broker_id} failed with an unexpected exception"
