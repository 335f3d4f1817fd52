"""The partitions this broker hosts: roles, append, the high watermark, waking waiters.

A `Partition` owns its log (a `PartitionLog`, which holds the producer state: idempotence and
transactions) and its role, taken from the partition's state in the metadata store
(`apply_state`): leader, follower, or neither (offline, or fenced after this broker lost its
ZooKeeper session).

As leader it appends producer batches stamped with its leader epoch, tracks what each
follower has from their fetches (`update_follower`), moves the high watermark to the minimum
log end offset over the ISR, and proposes ISR changes (a follower that falls more than
`replica.lag.time.max.ms` behind leaves; one that catches up re-joins) through `isr_writer`,
which writes them to the store with compare-and-set, so a deposed leader cannot.

Transactions: as leader it appends the markers WriteTxnMarkers asks for
(`write_txn_marker`: a control batch, server/txn_markers.py); as follower it applies the
leader's markers as they come, so both hold the same open transactions and aborted-transaction
index. The last stable offset is min(first unstable offset, high watermark) on either.

As follower it appends what the replica fetcher brings (offsets and epochs as the leader
wrote them) and takes the leader's high watermark. Waiting fetches, acks=all produces and group
writes are delayed operations of the purgatory watched under the partition (the `Partition`
object is their key): `wake` checks them when the log grows, the high watermark moves or the
role changes.

Metrics (`metrics.py`): each partition holds its topic's `TopicStats` (`stats`, given by the
`ReplicaManager`, which keeps every topic's): an append as leader adds its offsets and bytes
there, one as follower its bytes; the produce and fetch handlers add theirs.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from samsa.controller.decisions import FollowerState, can_join_isr, new_high_watermark, out_of_sync_replicas
from samsa.metadata.zkdata import PartitionState
from samsa.protocol.batch import ATTR_CONTROL, BatchHeader, parse_header
from samsa.protocol.control import marker_batch
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.ratelimit import RateLimitedLog
from samsa.server.metrics import BrokerTopicStats, TopicStats
from samsa.server.purgatory import DelayedOperation, Purgatory
from samsa.storage.errors import StorageError
from samsa.storage.partition_log import PartitionLog
from samsa.storage.producer_state import CompletedTxn, Duplicate, ProducerStateManager, SequenceError, replay_batch
from samsa.storage.txn_index import AbortedTxn

# One line per log dir per interval, with a count: a full disk fails every produce.
_storage_log = RateLimitedLog(logging.getLogger("samsa.storage"), interval_s=10.0)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class FollowerInfo:
    """What the leader knows of one follower (Kafka's Replica state)."""

    leo: int = -1  # unknown until it fetches from this leader
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch said (-1: unknown)


@dataclass
class AppendOutcome:
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    # flush.messages: the answer waits until the log is flushed to here (-1: it does not wait)
    flush_offset: int = -1


_HW_SEQ = itertools.count()
_HW_PRUNE_MIN = 64


class Partition:
    def __init__(self, topic: str, index: int, topic_id: uuid.UUID, log: PartitionLog, node_id: int = 0,
                 purgatory: Purgatory | None = None) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.node_id = node_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.is_leader = False
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.state_version = -1  # the store version of the state this role came from
        self.controller_epoch = 0
        self.hw = 0
        self.epoch_start_offset = 0  # the log end offset when this broker became leader
        self.followers: dict[int, FollowerInfo] = {}
        self.removing: list[int] = []  # replicas a reassignment is removing: they never re-join
        self.isr_writer: Callable[[Partition, list[int]], None] | None = None
        # An ISR change written to the store but not acknowledged yet (isr_manager.py), and
        # the leader epoch it was proposed in.
        self.pending_isr: list[int] | None = None
        self.pending_isr_epoch = -1
        self.purgatory = purgatory  # where operations waiting on this partition are
        # acks=all produces waiting for the high watermark are watched under `hw_key` (not
        # under the partition: an append that does not move the high watermark does not look at
        # them) and kept here as a heap of (offset the high watermark must reach, sequence,
        # operation): a move completes those it reached and looks at no other.
        self.hw_key = (self, "high watermark")
        self._hw_waiters: list[tuple[int, int, DelayedOperation]] = []
        self._hw_prune_at = _HW_PRUNE_MIN
        # flush.messages, off the event loop: `flusher` (the broker's) has a worker thread sync
        # the log and calls `flush_done`; `_flush_to` is where the flush in flight, or the next
        # one, must reach; `flush_error` the error a flush met (answered to those waiting).
        self.flusher: Callable[[Partition], None] | None = None
        self.flushing = False
        self._flush_to = 0
        self.flush_error: OSError | StorageError | None = None
        # Told of an OSError met in this partition's log (the broker's log-dir failure handling).
        self.on_storage_error: Callable[[Path, OSError], None] | None = None
        # While an append wakes the waiting operations: (first offset, next offset, the bytes
        # just written), so a fetch waiting at exactly that offset can answer from memory
        # (fetch.py). None otherwise: the bytes are not kept past the append.
        self.just_appended: tuple[int, int, bytearray | memoryview] | None = None
        self.stats = TopicStats()  # its topic's, once added to a ReplicaManager
        # Its log is being replaced by a copy in another log dir (server/alter_log_dirs.py): as
        # follower it neither truncates nor appends until the swap is durable (a few ms).
        self.swapping_log = False

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def producers(self) -> ProducerStateManager:
        """The producer state (the log's: it is rebuilt and snapshotted with the log)."""
        return self.log.producers

    def load_producer_state(self) -> int:
        """Rebuild the producer state from the log (its newest snapshot, then the batch headers
        after it); returns the number of batches replayed. Runs off the event loop."""
        return self.log.load_producer_state()

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the first unstable offset (an open transaction, or a decided one whose
        marker is above the high watermark), at most the high watermark. A read_committed
        consumer reads up to it."""
        hw = self.hw
        producers = self.log.producers
        if not producers.has_unstable:
            return hw
        producers.on_high_watermark(hw)
        first = producers.first_unstable_offset()
        return hw if first is None or first > hw else first

    @property
    def high_watermark(self) -> int:
        return self.hw

    # -- roles -----------------------------------------------------------------------------------

    def apply_state(self, state: PartitionState, replicas: list[int]) -> str | None:
        """Take the role `state` gives this broker. Returns "leader"/"follower" when the role
        or leader epoch changed (the caller starts or stops fetching), else None."""
        if state.version < self.state_version and state.leader_epoch <= self.leader_epoch:
            return None
        changed = state.leader_epoch != self.leader_epoch or state.leader != self.leader_id
        self.state_version = state.version
        self.controller_epoch = state.controller_epoch
        self.replicas = list(replicas)
        self.isr = list(state.isr)
        if state.leader == self.node_id:
            if changed or not self.is_leader:
                self._become_leader(state)
                self.wake()
                return "leader"
            self.followers = {r: self.followers.get(r, FollowerInfo()) for r in self.replicas if r != self.node_id}
            strays = [r for r in self.isr if r not in self.replicas]
            if strays:  # a reassignment removed them: they leave the ISR
                self.propose_isr([r for r in self.isr if r in self.replicas])
            self.maybe_increment_hw()
            return None
        was_leader = self.is_leader
        self.is_leader = False
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.followers = {}
        if changed or was_leader:
            self.wake()
            return "follower"
        return None

    def _become_leader(self, state: PartitionState) -> None:
        self.is_leader = True
        self.leader_id = self.node_id
        self.leader_epoch = state.leader_epoch
        # Written before the first append of the epoch, not here: 10,000 partitions becoming
        # leaders at once would make 10,000 checkpoint writes with fsyncs on the loop.
        self.log.leader_epochs.assign(state.leader_epoch, self.log.log_end_offset, defer=True)
        self.epoch_start_offset = self.log.log_end_offset
        now = now_ms()
        self.followers = {r: FollowerInfo(last_caught_up_ms=now if r in self.isr else 0)
                          for r in self.replicas if r != self.node_id}
        self.maybe_increment_hw()

    def fence(self) -> None:
        """Stop acting as leader or follower (ZooKeeper session lost): nothing is served until
        the store says again what this broker's role is."""
        self.is_leader = False
        self.leader_id = -1
        self.state_version = -1
        self.followers = {}
        self.pending_isr = None
        self.wake()

    # -- leader: followers, ISR, high watermark -------------------------------------------------

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.node_id} does not lead {self}")
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)

    def update_follower(self, replica_id: int, fetch_offset: int, live: Callable[[int], bool],
                        log_start_offset: int = -1) -> None:
        """A follower fetched from `fetch_offset`: it has everything below it (Kafka's
        updateFollowerFetchState), so it may re-join the ISR and the HW may move; its log
        starts at `log_start_offset` (what a DeleteRecords waits for)."""
        f = self.followers.get(replica_id)
        if f is None:
            return
        if log_start_offset != f.log_start_offset:
            f.log_start_offset = log_start_offset
            self.wake()
        now = now_ms()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            f.last_caught_up_ms = now
        elif fetch_offset >= f.last_fetch_leader_leo:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_leo = leo
        f.last_fetch_ms = now
        f.leo = fetch_offset
        if replica_id not in self.isr and replica_id not in self.removing and live(replica_id):
            entry = self.log.leader_epochs.latest_entry()
            start = entry.start_offset if entry is not None and entry.epoch == self.leader_epoch else None
            if can_join_isr(fetch_offset, self.hw, start):
                self.propose_isr(self.isr + [replica_id])
        self.maybe_increment_hw()

    def low_watermark(self, live: Callable[[int], bool]) -> int:
        """Kafka's lowWatermarkIfLeader: the smallest log start offset of this leader and of
        each follower whose broker is alive (-1 while one has not said yet)."""
        low = self.log.log_start_offset
        for r, f in self.followers.items():
            if live(r) and f.log_start_offset < low:
                low = f.log_start_offset
        return low

    def out_of_sync(self, lag_ms: int) -> set[int]:
        if not self.is_leader:
            return set()
        follower_state = {r: FollowerState(f.leo, f.last_caught_up_ms) for r, f in self.followers.items()}
        return out_of_sync_replicas(self.node_id, self.isr, follower_state, self.log.log_end_offset,
                                    now_ms(), lag_ms)

    def propose_isr(self, isr: list[int]) -> None:
        """Ask for an ISR change; it is written to the store in the background (at most one
        in flight) and takes effect when the write succeeds."""
        if self.isr_writer is not None and self.pending_isr is None:
            self.isr_writer(self, isr)

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark waits for: the current one plus any follower an ISR
        change in flight adds (Kafka's maximal ISR: never ahead of either)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [r for r in self.pending_isr if r not in self.isr]

    def maybe_increment_hw(self) -> bool:
        if not self.is_leader:
            return False
        leo_of = {r: f.leo for r, f in self.followers.items() if f.leo >= 0}
        hw = new_high_watermark(self.hw, self.log.log_end_offset, self.maximal_isr, leo_of, leader=self.node_id)
        hw = min(hw, self.log.log_end_offset)
        if hw != self.hw:
            self.hw = hw
            self.log.producers.on_high_watermark(hw)
            self.wake(data=True)
            if self._hw_waiters:
                self._hw_reached(hw)
            return True
        return False

    def wait_for_hw(self, required: int, op: DelayedOperation) -> None:
        """`op`, watched under `hw_key`, is checked when the high watermark reaches `required`
        (and by the wakes that look at every operation: role changes)."""
        heap = self._hw_waiters
        heapq.heappush(heap, (required, next(_HW_SEQ), op))
        if len(heap) > self._hw_prune_at:  # (operations that ended otherwise: timed out, answered)
            live = [e for e in heap if not e[2].completed]
            heapq.heapify(live)
            self._hw_waiters = live
            self._hw_prune_at = max(_HW_PRUNE_MIN, 2 * len(live))

    def _hw_reached(self, hw: int) -> None:
        heap, purgatory, key = self._hw_waiters, self.purgatory, self.hw_key
        while heap and heap[0][0] <= hw:
            op = heapq.heappop(heap)[2]
            if purgatory is not None:
                purgatory.check_one(op, key)

    def set_follower_hw(self, leader_hw: int) -> None:
        hw = min(leader_hw, self.log.log_end_offset)
        if hw != self.hw:
            self.hw = hw
            self.log.producers.on_high_watermark(hw)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def append(self, buf: bytearray | memoryview, headers: list[tuple[int, BatchHeader]],
               log_append_time: bool) -> AppendOutcome:
        # Idempotence is decided per batch; a request's batches from one producer are a run.
        for _, h in headers:
            try:
                self.producers.check(h)
            except Duplicate as d:
                if len(headers) == 1:
                    return AppendOutcome(ErrorCode.NONE, d.first_offset, -1, self.log_start_offset)
                return AppendOutcome(ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                                     message="duplicate batch in a multi-batch request")
            except SequenceError as e:
                return AppendOutcome(e.code, message=str(e))
        lg = self.log
        if self.flusher is not None:
            lg.defer_flush = True
        try:
            result = lg.append(buf, headers, now_ms=now_ms(), log_append_time=log_append_time,
                               leader_epoch=max(self.leader_epoch, 0))
        except (StorageError, OSError) as e:
            return self._append_failed(e)
        offset = result.first_offset
        producers = lg.producers
        for _, h in headers:
            if h.producer_id >= 0:
                producers.record(h, offset)
            offset += h.last_offset_delta + 1
        self._appended(result.first_offset, offset, buf)
        return AppendOutcome(ErrorCode.NONE, result.first_offset, result.log_append_time_ms, self.log_start_offset,
                             flush_offset=self._flush_if_due(lg))

    def _flush_if_due(self, lg: PartitionLog) -> int:
        """After an append: if flush.messages is reached (counting from where the flush in
        flight will leave the recovery point, as if each flush had been done inline, as
        Kafka's), the log must be flushed to its end before the append is answered: that
        offset, and the flush is started (or follows the one in flight). -1 if not."""
        if not lg.defer_flush:
            return -1
        leo = lg.log_end_offset
        if self._flush_to > leo:  # (the log was truncated since)
            self._flush_to = lg.recovery_point
        if leo - max(lg.recovery_point, self._flush_to) < lg.config.flush_messages:
            return -1
        self._flush_to = leo
        if not self.flushing and self.flusher is not None:
            self.flushing = True
            self.flusher(self)
        return leo

    def flush_done(self, lg: PartitionLog, target: int, error: BaseException | None) -> None:
        """The worker's flush of `lg` to `target` ended (the broker's flusher calls this on the
        loop): the recovery point moves, the produces waiting for it are answered, and the next
        flush starts if appends made one due meanwhile."""
        self.flushing = False
        if lg is not self.log:  # replaced meanwhile (a move between log dirs): its own flushes
            return
        if error is None:
            try:
                lg.flushed_to(target)
            except (OSError, StorageError) as e:
                error = e
        if error is not None:
            if not isinstance(error, (OSError, StorageError)):
                raise error
            self.flush_error = error
            _storage_log.warning(f"flush {lg.dir.parent}", "Cannot flush %s: %s", lg.dir, error)
            if isinstance(error, OSError):
                self.storage_error(error)
        purgatory = self.purgatory
        if purgatory is not None and purgatory.watched(self.hw_key):
            purgatory.check_and_complete(self.hw_key)
        if error is None and self._flush_to > lg.recovery_point and self.flusher is not None:
            self.flushing = True
            self.flusher(self)

    def _append_failed(self, e: StorageError | OSError) -> AppendOutcome:
        if isinstance(e, StorageError):
            code = ErrorCode[e.kafka_error] if e.kafka_error else ErrorCode.KAFKA_STORAGE_ERROR
            return AppendOutcome(code, message=str(e))
        # the disk refused (full, read-only, failing): nothing was appended
        _storage_log.warning(f"append {self.log.dir.parent}", "Cannot append to %s: %s; answering "
                             "KAFKA_STORAGE_ERROR (nothing was written)", self.log.dir, e)
        self.storage_error(e)
        return AppendOutcome(ErrorCode.KAFKA_STORAGE_ERROR, message=f"cannot write to the log: {e.strerror or e}")

    def _appended(self, first_offset: int, next_offset: int, buf: bytearray | memoryview) -> None:
        """The log grew: waiting operations are checked (with the bytes at hand, see just_appended)."""
        stats = self.stats
        stats.messages_in += next_offset - first_offset
        stats.bytes_in += len(buf)
        self.just_appended = (first_offset, next_offset, buf)
        try:
            if not self.maybe_increment_hw():
                self.wake(data=True)
        finally:
            self.just_appended = None

    def write_txn_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int) -> AppendOutcome:
        """Leader: append the COMMIT or ABORT marker of `producer_id`'s transaction (a control
        batch stamped with the leader epoch) and end the transaction here: the producer state,
        the aborted-transaction index and the last stable offset follow. Refused with
        NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (older than the producer's) or
        TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's);
        nothing is appended then. A marker for a producer with no open transaction here is
        appended all the same (a coordinator retrying), and changes nothing but its epochs."""
        if not self.is_leader:
            return AppendOutcome(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 message=f"broker {self.node_id} does not lead {self}")
        try:
            self.log.producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
        except SequenceError as e:
            return AppendOutcome(e.code, message=str(e))
        now = now_ms()
        buf = bytearray(marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now))
        lg = self.log
        if self.flusher is not None:
            lg.defer_flush = True
        try:
            result = lg.append(buf, [(0, parse_header(buf))], now_ms=now, leader_epoch=max(self.leader_epoch, 0))
        except (StorageError, OSError) as e:
            return self._append_failed(e)
        self._txn_completed(lg.producers.complete_txn(producer_id, producer_epoch, commit, result.first_offset,
                                                      coordinator_epoch, now, check=False))
        self._appended(result.first_offset, result.last_offset + 1, buf)
        return AppendOutcome(ErrorCode.NONE, result.first_offset, -1, self.log_start_offset,
                             flush_offset=self._flush_if_due(lg))

    def _txn_completed(self, done: CompletedTxn | None) -> None:
        if done is not None and done.aborted:
            self.log.add_aborted_txn(AbortedTxn(done.producer_id, done.first_offset, done.last_offset,
                                                done.last_stable_offset))

    def storage_error(self, e: OSError) -> None:
        """An OSError met in this partition's log: the broker decides whether its dir failed."""
        if self.on_storage_error is not None:
            self.on_storage_error(self.log.dir.parent, e)

    def append_replicated(self, buf: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]]) -> None:
        """Follower append: the leader's batches as they are; producer state follows them so
        this replica can lead with the idempotence window intact."""
        lg = self.log
        if self.flusher is not None:
            lg.defer_flush = True
        lg.append_as_follower(buf, headers, now_ms=now_ms())
        self._flush_if_due(lg)  # (nobody waits for a follower's flush)
        self.stats.replication_bytes_in += len(buf)
        producers = self.log.producers
        for pos, h in headers:
            if h.producer_id >= 0:
                if h.attributes & ATTR_CONTROL:  # a marker: the transaction ends here as on the leader
                    self._txn_completed(replay_batch(producers, h, partial(_cut, buf, pos, h.size)))
                else:
                    producers.record(h, h.base_offset)

    def reload_producer_state(self) -> None:
        """After truncation the state may name batches that are gone: rebuild it from the log."""
        self.log.load_producer_state()

    def wake(self, data: bool = False) -> None:
        """Check the operations waiting on this partition. `data`: the log or the high
        watermark grew, and this partition's state is whole (an append or a high watermark
        move is done); they are checked at once, from inside the append. Other wakes (roles,
        fencing) come in the middle of wider changes, so they are checked on a later turn of
        the loop."""
        purgatory = self.purgatory
        if purgatory is not None:
            if data:
                purgatory.check_and_complete(self)
            else:
                if purgatory.watched(self):
                    purgatory.check_soon(self)
                if purgatory.watched(self.hw_key):
                    purgatory.check_soon(self.hw_key)


class ReplicaManager:
    def __init__(self, purgatory: Purgatory | None = None) -> None:
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.purgatory = purgatory  # given to every partition added
        # Partitions whose log dir failed (until a restart) -> the dir: answered KAFKA_STORAGE_ERROR.
        self.offline: dict[tuple[str, int], Path] = {}
        self.on_storage_error: Callable[[Path, OSError], None] | None = None  # given to every partition added
        self.flusher: Callable[[Partition], None] | None = None  # likewise (flush.messages off the loop)
        self.topic_stats = BrokerTopicStats()  # every topic's BrokerTopicMetrics here (metrics.py)

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def require(self, topic: str, partition: int) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return p

    def missing(self, topic: str, index: int, known: bool) -> ErrorCode:
        """The error for a partition this broker does not serve: KAFKA_STORAGE_ERROR if its log
        dir failed here, else NOT_LEADER_OR_FOLLOWER if the cluster `known`s it, else
        UNKNOWN_TOPIC_OR_PARTITION."""
        if (topic, index) in self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def add(self, p: Partition) -> None:
        if p.purgatory is None:
            p.purgatory = self.purgatory
        if p.on_storage_error is None:
            p.on_storage_error = self.on_storage_error
        if p.flusher is None:
            p.flusher = self.flusher
        p.stats = self.topic_stats.topic(p.topic)
        self.partitions[(p.topic, p.index)] = p

    def remove(self, topic: str, index: int) -> Partition | None:
        p = self.partitions.pop((topic, index), None)
        if p is not None:
            p.fence()
        return p

    def leaders(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    def remove_topic(self, topic: str) -> list[Partition]:
        gone = [p for (t, _), p in self.partitions.items() if t == topic]
        for p in gone:
            del self.partitions[(p.topic, p.index)]
            p.fence()
        self.topic_stats.remove(topic)
        return gone



def _cut(buf: bytes | bytearray | memoryview, position: int, size: int) -> bytes | bytearray | memoryview:
    return buf[position:position + size]
