"""The transaction coordinator's state machine: one transactional id's metadata and its moves.

Kafka's TransactionMetadata and the decisions of its TransactionCoordinator, sans-io: every
decision is a pure function from the current `TxnMetadata` (and the request) to either an
`ErrorCode` (the answer, nothing written) or a new `TxnMetadata` that the caller writes to
`__transaction_state` (txn_records.py) and only then installs (`TxnShard.apply`). The broker
side (`server/txn_manager.py`) does the I/O: appending, waiting for replication, sending the
transaction markers, timers.

States (Kafka's numbers, persisted):

    Empty -> Ongoing                    AddPartitionsToTxn / AddOffsetsToTxn (or, with
                                        transaction version 2, a first Produce / TxnOffsetCommit)
    Ongoing -> PrepareCommit|PrepareAbort   EndTxn (or a timeout: abort)
    Empty/Complete* -> PrepareAbort     EndTxn v5 (transaction version 2) abort, with no
                                        partitions: the client could not tell if it had begun
    Prepare* -> Complete*               every partition has its marker
    Complete*/Empty -> Empty            InitProducerId (epoch bump)
    Ongoing -> PrepareEpochFence        InitProducerId while a transaction is open: the old
                                        producer is fenced and its transaction aborted (the new
                                        one retries on CONCURRENT_TRANSACTIONS)
    any idle -> Dead                    transactional.id.expiration.ms without use (tombstone)

Epochs: an InitProducerId bumps the epoch (a new producer id once the epoch is exhausted).
Transaction version 2 (KIP-890 part 2, the client sent EndTxn v5+) also bumps it at every
EndTxn, so a late write of the ended transaction is fenced; the bumped epoch is returned in
EndTxn's response, and a retry of that EndTxn is recognised by it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from samsa.protocol.errors import ErrorCode

from .txn_records import TxnLogValue

MAX_EPOCH = 32767  # Short.MaxValue
NO_PRODUCER_ID = -1
NO_EPOCH = -1


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        return _NAMES[self]


_NAMES = {TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing", TxnState.PREPARE_COMMIT: "PrepareCommit",
          TxnState.PREPARE_ABORT: "PrepareAbort", TxnState.COMPLETE_COMMIT: "CompleteCommit",
          TxnState.COMPLETE_ABORT: "CompleteAbort", TxnState.DEAD: "Dead",
          TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}

IDLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

TopicPartition = tuple[str, int]


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID  # (TV2) the producer id the ending transaction rotates to
    last_producer_epoch: int = NO_EPOCH  # the epoch before the last bump (a retried InitProducerId / EndTxn)
    client_tv: int = 0  # the transaction version the client speaks (2: KIP-890 part 2)

    def copy(self, **changes: object) -> TxnMetadata:
        new = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        if "partitions" not in changes:
            new.partitions = set(self.partitions)
        return new

    @property
    def epoch_exhausted(self) -> bool:
        return self.producer_epoch >= MAX_EPOCH - 1

    # -- persistence ---------------------------------------------------------------------------

    def to_value(self) -> TxnLogValue:
        parts: dict[str, list[int]] = {}
        for topic, p in self.partitions:
            parts.setdefault(topic, []).append(p)
        for ps in parts.values():
            ps.sort()
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, int(self.state), parts,
                           self.last_update_ms, self.start_ms, self.previous_producer_id, self.next_producer_id,
                           self.client_tv)

    @classmethod
    def from_value(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        try:
            state = TxnState(v.status)
        except ValueError:
            state = TxnState.DEAD
        return cls(transactional_id, v.producer_id, v.producer_epoch, v.timeout_ms, state,
                   {(t, p) for t, ps in v.partitions.items() for p in ps}, v.last_update_ms, v.start_ms,
                   v.previous_producer_id, v.next_producer_id, NO_EPOCH, v.client_transaction_version)


# -- InitProducerId ------------------------------------------------------------------------------


def init_producer_id(meta: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None, now_ms: int,
                     new_producer_id: int | None) -> TxnMetadata | ErrorCode:
    """InitProducerId for an existing id. `expected` is the (producer id, epoch) the request
    names (KIP-360; None when it names none); `new_producer_id` a fresh id the caller reserved
    in case the epoch is exhausted. PREPARE_EPOCH_FENCE as the new state means: abort the open
    transaction first, then answer CONCURRENT_TRANSACTIONS."""
    if expected is not None:
        pid, epoch = expected
        valid = (meta.producer_epoch == NO_EPOCH or pid == meta.producer_id
                 or (pid == meta.previous_producer_id and epoch >= MAX_EPOCH - 1))
        if not valid:
            return ErrorCode.PRODUCER_FENCED
    if meta.state in PREPARING or meta.state == TxnState.PREPARE_EPOCH_FENCE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    if meta.state == TxnState.ONGOING:
        # Fence the producer: the epoch moves on (never answered), the transaction is aborted.
        epoch = meta.producer_epoch if meta.epoch_exhausted else meta.producer_epoch + 1
        return meta.copy(producer_epoch=epoch, last_producer_epoch=meta.producer_epoch,
                         state=TxnState.PREPARE_EPOCH_FENCE, last_update_ms=now_ms)
    if meta.state not in IDLE:
        return ErrorCode.INVALID_TXN_STATE  # (Dead: never kept)
    base = meta.copy(timeout_ms=timeout_ms, partitions=set(), start_ms=-1, last_update_ms=now_ms,
                     state=TxnState.EMPTY, next_producer_id=NO_PRODUCER_ID)
    if expected is not None and expected[0] == meta.producer_id and expected[1] != meta.producer_epoch:
        # A retry of a bump whose answer was lost: the epoch the client had is the one before.
        if expected[1] == meta.last_producer_epoch and meta.producer_epoch != NO_EPOCH:
            return base.copy(last_producer_epoch=meta.last_producer_epoch)
        return ErrorCode.PRODUCER_FENCED
    if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
        if new_producer_id is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE  # (the caller reserves one first)
        return base.copy(previous_producer_id=meta.producer_id if expected is not None else NO_PRODUCER_ID,
                         producer_id=new_producer_id, producer_epoch=0, last_producer_epoch=NO_EPOCH)
    return base.copy(producer_epoch=meta.producer_epoch + 1, last_producer_epoch=meta.producer_epoch)


def needs_new_producer_id(meta: TxnMetadata | None) -> bool:
    """Whether an InitProducerId for this id may need a fresh producer id (reserved beforehand,
    because reserving one waits for the metadata store)."""
    return meta is None or meta.epoch_exhausted


def new_transactional_id(transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int) -> TxnMetadata:
    """The first InitProducerId of an id: epoch 0, Empty."""
    return TxnMetadata(transactional_id, producer_id, 0, timeout_ms, TxnState.EMPTY, set(), now_ms, -1)


# -- AddPartitionsToTxn, verification --------------------------------------------------------------


def check_producer(meta: TxnMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    if meta is None or meta.state == TxnState.DEAD or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                   partitions: Iterable[TopicPartition], now_ms: int, client_tv: int | None = None
                   ) -> TxnMetadata | ErrorCode:
    """Add partitions to the producer's transaction (starting it if none is open). NONE when
    they are all in it already (nothing to write)."""
    error = check_producer(meta, producer_id, producer_epoch)
    if error != ErrorCode.NONE:
        return error
    assert meta is not None
    if meta.state in PREPARING or meta.state == TxnState.PREPARE_EPOCH_FENCE:
        return ErrorCode.CONCURRENT_TRANSACTIONS
    wanted = set(partitions)
    if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
        return ErrorCode.NONE
    if meta.state == TxnState.ONGOING:
        return meta.copy(partitions=meta.partitions | wanted, last_update_ms=now_ms)
    return meta.copy(partitions=wanted, state=TxnState.ONGOING, start_ms=now_ms, last_update_ms=now_ms,
                     client_tv=meta.client_tv if client_tv is None else client_tv)


def verify_partitions(meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn's VerifyOnly (KIP-890 part 1): is each partition in the open
    transaction? TRANSACTION_ABORTABLE for one that is not."""
    parts = list(partitions)
    error = check_producer(meta, producer_id, producer_epoch)
    if error == ErrorCode.NONE and meta is not None and meta.state in PREPARING:
        error = ErrorCode.CONCURRENT_TRANSACTIONS
    if error != ErrorCode.NONE:
        return {tp: error for tp in parts}
    assert meta is not None
    ongoing = meta.state == TxnState.ONGOING
    return {tp: ErrorCode.NONE if ongoing and tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in parts}


# -- EndTxn ----------------------------------------------------------------------------------------


def end_txn(meta: TxnMetadata | None, producer_id: int, producer_epoch: int, commit: bool, now_ms: int, *,
            client_tv: int = 0, from_client: bool = True, new_producer_id: int | None = None
            ) -> TxnMetadata | ErrorCode | tuple[ErrorCode, int, int]:
    """EndTxn: Ongoing -> PrepareCommit/PrepareAbort (the caller then writes the markers).

    `client_tv` is the transaction version of the request (2: EndTxn v5), which decides, as in
    Kafka 4.x, how the epoch is checked and whether it is bumped. With version 2 a client that
    cannot know whether its transaction began (a Produce adds its partition) may also abort when
    none is open -- in Empty, CompleteCommit or CompleteAbort, with the current epoch: an abort of
    no partitions, which bumps the epoch like any other end of a transaction.

    Returns the new metadata, an error, or (NONE, producer id, epoch) for a retry of an
    EndTxn that already completed (answered as a success, nothing written)."""
    if meta is None or meta.state == TxnState.DEAD:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    done = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    tv2 = client_tv >= 2 and meta.state != TxnState.PREPARE_EPOCH_FENCE
    retry_of_bump = tv2 and producer_epoch == meta.last_producer_epoch and meta.producer_id == producer_id \
        and meta.state in PREPARING + done
    retry_on_overflow = tv2 and meta.previous_producer_id == producer_id and producer_epoch >= MAX_EPOCH - 1 \
        and meta.producer_epoch == 0 and meta.state in done
    if meta.producer_id != producer_id and not retry_on_overflow:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if tv2:
        if meta.state in (TxnState.ONGOING, TxnState.EMPTY):
            valid = producer_epoch == meta.producer_epoch
        elif meta.state in done:
            valid = retry_of_bump or retry_on_overflow or producer_epoch == meta.producer_epoch
        else:
            valid = retry_of_bump
    else:
        valid = (not from_client or producer_epoch == meta.producer_epoch) and producer_epoch >= meta.producer_epoch
    if not valid:
        return ErrorCode.PRODUCER_FENCED
    state = meta.state
    empty_abort = tv2 and not commit and state in (TxnState.EMPTY, *done) and not (retry_of_bump or retry_on_overflow)
    if state == TxnState.ONGOING or state == TxnState.PREPARE_EPOCH_FENCE or empty_abort:
        if state == TxnState.PREPARE_EPOCH_FENCE and commit:
            return ErrorCode.INVALID_TXN_STATE
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        new = meta.copy(state=target, last_update_ms=now_ms)
        if empty_abort:  # (its start is now: DescribeTransactions shows one)
            new.partitions, new.start_ms = set(), now_ms
        if tv2:
            new.client_tv = client_tv
            # KIP-890 part 2: every transaction ends with an epoch bump.
            new.last_producer_epoch = meta.producer_epoch
            if meta.epoch_exhausted:
                if new_producer_id is None:
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                new.next_producer_id = new_producer_id
            else:
                new.producer_epoch = meta.producer_epoch + 1
        return new
    if state == TxnState.COMPLETE_COMMIT:
        return _answer_done(meta) if commit and (retry_of_bump or not tv2) else ErrorCode.INVALID_TXN_STATE
    if state == TxnState.COMPLETE_ABORT:
        return _answer_done(meta) if not commit and (retry_of_bump or not tv2) else ErrorCode.INVALID_TXN_STATE
    if state == TxnState.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
    if state == TxnState.PREPARE_ABORT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
    return ErrorCode.INVALID_TXN_STATE  # Empty: nothing to commit


def _answer_done(meta: TxnMetadata) -> tuple[ErrorCode, int, int]:
    return ErrorCode.NONE, meta.producer_id, meta.producer_epoch


def complete(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: Prepare* -> Complete*, the partitions cleared; a producer id
    rotation (TV2, epoch exhausted) takes effect."""
    target = TxnState.COMPLETE_COMMIT if meta.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    new = meta.copy(state=target, partitions=set(), last_update_ms=now_ms)
    if meta.next_producer_id != NO_PRODUCER_ID:
        new.previous_producer_id = meta.producer_id
        new.producer_id = meta.next_producer_id
        new.producer_epoch = 0
        new.next_producer_id = NO_PRODUCER_ID
    return new


def marker_epoch(meta: TxnMetadata) -> int:
    """The producer epoch the markers of a preparing transaction carry (after any bump, so they
    fence the ended epoch at every partition)."""
    if meta.next_producer_id != NO_PRODUCER_ID:
        return min(meta.producer_epoch + 1, MAX_EPOCH)
    return meta.producer_epoch


# -- timers ----------------------------------------------------------------------------------------


def timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    return meta.state == TxnState.ONGOING and meta.start_ms >= 0 and now_ms > meta.start_ms + meta.timeout_ms


def abort_for_timeout(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Kafka's abortTimedOutTransactions: fence the producer's epoch, then abort."""
    epoch = meta.producer_epoch if meta.epoch_exhausted else meta.producer_epoch + 1
    return meta.copy(producer_epoch=epoch, last_producer_epoch=NO_EPOCH, state=TxnState.PREPARE_ABORT,
                     last_update_ms=now_ms)


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    return meta.state in IDLE and now_ms > meta.last_update_ms + expiration_ms


# -- one partition of __transaction_state --------------------------------------------------------------


class TxnShard:
    """The transactional ids of one `__transaction_state` partition, as its log says (replayed
    at load, then changed only by `apply` / `remove` once a change is in the log)."""

    def __init__(self, partition: int, coordinator_epoch: int) -> None:
        self.partition = partition
        self.coordinator_epoch = coordinator_epoch  # the partition's leader epoch when loaded
        self.txns: dict[str, TxnMetadata] = {}
        self.skipped_records = 0
        self.unloaded = False

    def replay(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        from .txn_records import TxnRecordDecodeError, decode_key, decode_value

        for key, value in records:
            try:
                tid = decode_key(key)
                if value is None:
                    self.txns.pop(tid, None)
                    continue
                meta = TxnMetadata.from_value(tid, decode_value(value))
            except TxnRecordDecodeError:
                self.skipped_records += 1
                continue
            if meta.state == TxnState.DEAD:
                self.txns.pop(tid, None)
            else:
                self.txns[tid] = meta

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def apply(self, meta: TxnMetadata) -> None:
        self.txns[meta.transactional_id] = meta

    def remove(self, transactional_id: str) -> None:
        self.txns.pop(transactional_id, None)
