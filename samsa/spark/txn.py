"""The sink's exactly-once mode: a transactional producer per task, committed with the micro-batch.

With `.option("transactional.id.prefix", P)` each task of a write is a transactional
producer with the id `P-<Spark partition id>` (Kafka's protocol, spoken with Samsa's codecs
as the rest of the Spark client):

1. InitProducerId: fences any earlier attempt of the same task (a retried task, a restarted
   query), whose open transaction the coordinator aborts;
2. for a streaming micro-batch, the task reads its ledger first: the committed offset of group
   `P-<partition id>` on the sink topic's partition 0, fetched with `require_stable` (an
   undecided transaction is waited out). An offset above the batch id means this task's share
   of the micro-batch was committed before a crash: it writes nothing again;
3. otherwise it writes its rows inside the transaction (AddPartitionsToTxn, then batches with
   the producer id, epoch and sequences), and records `batch id + 1` in its ledger in the same
   transaction (AddOffsetsToTxn + TxnOffsetCommit);
4. the driver commits every task's transaction in the stream writer's `commit`, or aborts them
   in `abort`. read_committed consumers see a micro-batch's records all at once, exactly once.

A query restarted from its checkpoint re-runs the last micro-batch: tasks whose transactions
were committed skip it (their ledger says so), the others are fenced and write again. This
needs the query to be deterministic (a re-run micro-batch gives each task the same rows), as
Spark's own exactly-once sinks do. A transaction left open by a crashed driver is aborted by
the next attempt's fencing or at `kafka.transaction.timeout.ms`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from samsa.protocol.batch import parse_header, set_producer
from samsa.protocol.errors import ErrorCode
from samsa.spark.client import ClientError, SamsaClient, TopicPartition

GROUP, TRANSACTION = 0, 1
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                       ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.REQUEST_TIMED_OUT})
Handle = tuple[str, int, int]  # (transactional id, producer id, epoch): what the driver commits


class TransactionError(ClientError):
    def __init__(self, what: str, code: ErrorCode) -> None:
        hint = ""
        if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            hint = (" (another writer with the same transactional.id.prefix fenced this one, or the transaction"
                    " outlived kafka.transaction.timeout.ms: give each query its own prefix, or raise the timeout)")
        super().__init__(f"{what}: {code.name}{hint}")
        self.code = code


def _coordinator_call(client: SamsaClient, key: str, key_type: int, api_key: int, version: int, body: dict[str, Any],
                      error_of: Callable[[Any], int], what: str) -> Any:
    """A request to the coordinator of `key`, found with FindCoordinator and retried (with a
    fresh lookup) while it answers a retriable coordinator error, up to the client's timeout."""
    deadline = time.monotonic() + client.timeout
    delay = 0.05
    while True:
        found = client._any(10, 4, {"key_type": key_type, "coordinator_keys": [key]}).coordinators[0]
        code = ErrorCode(found.error_code)
        resp = None
        if code == ErrorCode.NONE:
            try:
                resp = client._call((found.host, found.port), api_key, version, body)
            except ClientError:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                code = ErrorCode(error_of(resp))
        if code not in RETRIABLE:
            if code != ErrorCode.NONE:
                raise TransactionError(what, code)
            return resp
        if time.monotonic() > deadline:
            raise TransactionError(f"{what} (still failing after {client.timeout:.0f} s)", code)
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def _first_error(codes: Iterable[int]) -> int:
    return next((c for c in codes if c), 0)


class TransactionalProducer:
    """One task's transaction: producer id and epoch, the partitions added, the sequences."""

    def __init__(self, client: SamsaClient, transactional_id: str, timeout_ms: int) -> None:
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.epoch = -1
        self.added: set[TopicPartition] = set()
        self.sequences: dict[TopicPartition, int] = {}

    @property
    def handle(self) -> Handle:
        return self.transactional_id, self.producer_id, self.epoch

    def init(self) -> None:
        body = {"transactional_id": self.transactional_id, "transaction_timeout": self.timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        resp = _coordinator_call(self.client, self.transactional_id, TRANSACTION, 22, 4, body,
                                 lambda r: r.error_code, f"InitProducerId for {self.transactional_id}")
        self.producer_id, self.epoch = resp.producer_id, resp.producer_epoch

    def _add(self, tps: Iterable[TopicPartition]) -> None:
        new = sorted(set(tps) - self.added)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for t, p in new:
            topics.setdefault(t, []).append(p)
        body = {"v3_and_below_transactional_id": self.transactional_id, "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        _coordinator_call(self.client, self.transactional_id, TRANSACTION, 24, 3, body,
                          lambda r: _first_error(p.partition_error_code for t in r.results_by_topic_v3_and_below
                                                 for p in t.results_by_partition),
                          f"AddPartitionsToTxn for {self.transactional_id}")
        self.added.update(new)

    def produce(self, request: Mapping[TopicPartition, bytes], **kwargs: Any) -> None:
        """Send sealed batches (one per partition) inside the transaction."""
        self._add(request)
        stamped: dict[TopicPartition, bytes] = {}
        for tp, raw in request.items():
            buf = bytearray(raw)
            seq = self.sequences.get(tp, 0)
            set_producer(buf, 0, len(buf), self.producer_id, self.epoch, seq, True)
            self.sequences[tp] = (seq + parse_header(buf).last_offset_delta + 1) % (1 << 31)
            stamped[tp] = bytes(buf)
        self.client.produce(stamped, transactional_id=self.transactional_id, **kwargs)

    def commit_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` of `group` inside the transaction (AddOffsetsToTxn + TxnOffsetCommit)."""
        body = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "group_id": group}
        _coordinator_call(self.client, self.transactional_id, TRANSACTION, 25, 3, body, lambda r: r.error_code,
                          f"AddOffsetsToTxn for {self.transactional_id}")
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": -1, "committed_metadata": None})
        commit = {"transactional_id": self.transactional_id, "group_id": group, "producer_id": self.producer_id,
                  "producer_epoch": self.epoch, "generation_id": -1, "member_id": "", "group_instance_id": None,
                  "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        _coordinator_call(self.client, group, GROUP, 28, 3, commit,
                          lambda r: _first_error(p.error_code for t in r.topics for p in t.partitions),
                          f"TxnOffsetCommit for {self.transactional_id}")


def end_transaction(client: SamsaClient, handle: Handle, commit: bool) -> None:
    tid, pid, epoch = handle
    body = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    _coordinator_call(client, tid, TRANSACTION, 26, 3, body, lambda r: r.error_code,
                      f"{'committing' if commit else 'aborting'} the transaction of {tid}")


def committed_offset(client: SamsaClient, group: str, tp: TopicPartition) -> int:
    """The group's committed offset of `tp` (-1: none), waiting out undecided transactions."""
    body = {"groups": [{"group_id": group, "topics": [{"name": tp[0], "partition_indexes": [tp[1]]}]}],
            "require_stable": True}

    def error_of(r: Any) -> int:
        g = r.groups[0]
        return g.error_code or _first_error(p.error_code for t in g.topics for p in t.partitions)

    resp = _coordinator_call(client, group, GROUP, 9, 8, body, error_of, f"reading the sink's ledger {group}")
    for t in resp.groups[0].topics:
        for p in t.partitions:
            return int(p.committed_offset)
    return -1
