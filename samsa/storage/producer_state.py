"""Producer state: idempotence and transactions of one partition's producers, from batch headers.

Kafka's ProducerStateManager unit. For each producer id the partition remembers its epoch, the
last few batches it appended (first sequence, last sequence, first offset, last offset; Kafka's
five-batch window), its last batch timestamp, the epoch of the transaction coordinator that
last wrote it a marker, and the first offset of its open transaction (-1: none).

A new data batch from that producer is:

* a duplicate of a remembered batch (same epoch and sequence range): answered with the original
  offsets, not appended again -- this is what makes a retried produce safe;
* from an older epoch: INVALID_PRODUCER_EPOCH; a newer epoch must start at sequence 0;
* the next in sequence (first sequence = last sequence + 1, wrapping at 2**31): appended;
* anything else: OUT_OF_ORDER_SEQUENCE_NUMBER;
* not transactional while the producer has a transaction open: INVALID_TXN_STATE.

A producer the partition has no state for (new here, or its state expired or was deleted with
the records) may start at any sequence, as in Kafka.

A transactional batch (attributes bit 4) of a producer with no open transaction opens one at
its base offset. A transaction marker (control batch, protocol/control.py) ends it: refused
when its producer epoch is older than the producer's (INVALID_PRODUCER_EPOCH) or its
coordinator epoch older than the last one seen (TRANSACTION_COORDINATOR_FENCED); a newer epoch
becomes the producer's (its sequence window starts again). Ending a transaction that has data
here gives a `CompletedTxn`; an abort goes into the segment's transaction index.

The first unstable offset is the smallest first offset of an open transaction, or of one whose
marker the high watermark has not passed yet (Kafka's unreplicated transactions): a
read_committed consumer reads up to min(it, high watermark), the last stable offset.

`check` and `check_marker` are pure decisions; `record` and `complete_txn` are called once the
batch is in the log. Replicas call the same two with the leader's batches.

On disk, `<offset>.snapshot` in the partition directory: the state as of that offset (every
batch below it applied), in Kafka's ProducerSnapshot format (v1), big-endian:

    version  int16   1
    crc      uint32  CRC-32C of everything after this field
    count    int32   entries
    entries  count x 46 bytes:
      producer_id int64 | epoch int16 | last_sequence int32 | last_offset int64 |
      offset_delta int32 (last offset - first offset of the last batch) | timestamp int64 |
      coordinator_epoch int32 | current_txn_first_offset int64 (-1: none)

As in Kafka, a snapshot keeps only each producer's last batch of the window; the log writes one
when it rolls a segment and when it closes (log.py), and a restart loads the newest readable one
and replays the batch headers after it (`Log.load_producer_state`).
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c

from samsa.protocol.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchHeader
from samsa.protocol.control import parse_marker
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import InvalidRecords

WINDOW = 5
INT32_WRAP = 1 << 31

SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6


@dataclass
class _BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[_BatchMeta] = field(default_factory=lambda: deque(maxlen=WINDOW))
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1  # the open transaction's first offset here (-1: none)
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()  # a new epoch starts its sequences at 0


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool
    last_stable_offset: int  # the partition's LSO once it is complete (txn index entry)


class Duplicate(Exception):
    def __init__(self, first_offset: int, last_offset: int) -> None:
        super().__init__("duplicate batch")
        self.first_offset = first_offset
        self.last_offset = last_offset


class SequenceError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class CorruptSnapshot(Exception):
    pass


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        # Open transactions: first offset -> producer id, in offset order (they open in the
        # order of the log); decided ones whose marker is above the high watermark: first
        # offset -> marker offset.
        self._ongoing: dict[int, int] = {}
        self._unreplicated: dict[int, int] = {}
        # KIP-890's verification guards (leader only, never snapshotted): producer id -> the
        # token of a verification with the transaction coordinator in flight. A marker of the
        # producer ends it, so an answer that comes back after the transaction ended finds
        # its token gone and the batch is refused instead of opening a transaction here.
        self._verifying: dict[int, object] = {}

    # -- data batches ----------------------------------------------------------------------

    def check(self, h: BatchHeader) -> None:
        """Raise Duplicate or SequenceError if the batch must not be appended (Kafka's order:
        a duplicate first, then the epoch, the sequence, the transaction state)."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            return  # no state here (a new producer, or its state expired or was deleted): any sequence
        last_seq = h.last_sequence
        if h.producer_epoch == entry.epoch:
            for b in entry.batches:
                if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                    raise Duplicate(b.first_offset, b.last_offset)
        if h.producer_epoch < entry.epoch:
            raise SequenceError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}",
            )
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise SequenceError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new epoch {h.producer_epoch} must start at sequence 0, not {h.base_sequence}",
                )
        elif h.base_sequence != (expected := (entry.last_seq + 1) % INT32_WRAP):
            raise SequenceError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {h.producer_id} sent sequence {h.base_sequence}, expected {expected}",
            )
        if entry.current_txn_first_offset >= 0 and not h.is_transactional:
            raise SequenceError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {h.producer_id} has a transaction open at offset {entry.current_txn_first_offset}: "
                "a non-transactional batch is refused",
            )

    def record(self, h: BatchHeader, first_offset: int) -> None:
        """Remember a data batch that was appended at `first_offset`."""
        pid = h.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(h.producer_epoch)
        else:
            entry.set_epoch(h.producer_epoch)
        if h.base_sequence >= 0:
            entry.batches.append(
                _BatchMeta(h.base_sequence, h.last_sequence, first_offset, first_offset + h.last_offset_delta)
            )
        entry.last_timestamp = h.max_timestamp
        if h.attributes & ATTR_TRANSACTIONAL and entry.current_txn_first_offset < 0:  # a transaction opens
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = pid
            self._verifying.pop(pid, None)

    # -- KIP-890 verification ----------------------------------------------------------------

    def start_verification(self, producer_id: int) -> object:
        """The guard of a verification of `producer_id` about to ask the coordinator (the one in
        flight already, if any: pipelined requests share it)."""
        guard = self._verifying.get(producer_id)
        if guard is None:
            guard = self._verifying[producer_id] = object()
        return guard

    def verified(self, producer_id: int, producer_epoch: int, guard: object) -> bool:
        """Whether a batch the coordinator said is in the producer's transaction may go in now:
        the transaction is open here at that epoch (an earlier batch opened it), or no marker
        ended it since `guard` was taken."""
        entry = self.producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == producer_epoch:
            return True
        return self._verifying.get(producer_id) is guard

    def end_verification(self, producer_id: int, guard: object) -> None:
        """Forget `guard` (the coordinator refused: nothing will be appended under it)."""
        if self._verifying.get(producer_id) is guard:
            del self._verifying[producer_id]

    # -- transaction markers -----------------------------------------------------------------

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Raise SequenceError if a marker of `producer_id` must not be appended."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise SequenceError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker for producer {producer_id} at epoch {producer_epoch}, older than {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise SequenceError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, older than "
                f"{entry.coordinator_epoch}",
            )

    def complete_txn(self, producer_id: int, producer_epoch: int, commit: bool, marker_offset: int,
                     coordinator_epoch: int, timestamp: int = -1, *, check: bool = True) -> CompletedTxn | None:
        """Apply a marker appended at `marker_offset` (with `check`, refused first as
        check_marker does: SequenceError). The transaction it ends, if it had data here."""
        if check:
            self.check_marker(producer_id, producer_epoch, coordinator_epoch)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_epoch)
        done = None
        first = entry.current_txn_first_offset
        if first >= 0:
            self._ongoing.pop(first, None)
            self._unreplicated[first] = marker_offset
            lso = next(iter(self._ongoing), marker_offset + 1)
            done = CompletedTxn(producer_id, first, marker_offset, not commit, lso)
        entry.set_epoch(max(producer_epoch, entry.epoch))
        entry.coordinator_epoch = max(coordinator_epoch, entry.coordinator_epoch)
        entry.current_txn_first_offset = -1
        self._verifying.pop(producer_id, None)
        if timestamp >= 0:
            entry.last_timestamp = timestamp
        return done

    def ongoing_txn(self, producer_id: int) -> tuple[int, int] | None:
        """(epoch, first offset) of the producer's open transaction here, or None."""
        entry = self.producers.get(producer_id)
        if entry is None or entry.current_txn_first_offset < 0:
            return None
        return entry.epoch, entry.current_txn_first_offset

    @property
    def has_unstable(self) -> bool:
        """An open transaction, or a decided one the high watermark has not passed yet."""
        return bool(self._ongoing or self._unreplicated)

    def on_high_watermark(self, hw: int) -> None:
        """Transactions whose marker is below `hw` are replicated: they stop holding the LSO."""
        unrep = self._unreplicated
        if unrep:
            for first in [f for f, marker in unrep.items() if marker < hw]:
                del unrep[first]

    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of an open (or unreplicated) transaction; None if none."""
        ongoing = next(iter(self._ongoing), None)
        if not self._unreplicated:
            return ongoing
        low = min(self._unreplicated)
        return low if ongoing is None or low < ongoing else ongoing

    # -- snapshots ---------------------------------------------------------------------------

    def to_snapshot(self) -> bytes:
        """This state in Kafka's ProducerSnapshot format (see the module comment)."""
        out = bytearray(_SNAPSHOT_HEAD.size)
        n = 0
        for pid, e in self.producers.items():
            last = e.batches[-1] if e.batches else None
            out += _SNAPSHOT_ENTRY.pack(
                pid, e.epoch, last.last_seq if last else -1, last.last_offset if last else -1,
                last.last_offset - last.first_offset if last else 0, e.last_timestamp, e.coordinator_epoch,
                e.current_txn_first_offset)
            n += 1
        struct.pack_into(">i", out, _CRC_START, n)
        _SNAPSHOT_HEAD.pack_into(out, 0, SNAPSHOT_VERSION, crc32c(memoryview(out)[_CRC_START:]), n)
        return bytes(out)

    @classmethod
    def from_snapshot(cls, data: bytes) -> ProducerStateManager:
        """The state a snapshot holds; CorruptSnapshot if it is not one."""
        if len(data) < _SNAPSHOT_HEAD.size:
            raise CorruptSnapshot(f"{len(data)} bytes, shorter than the header")
        version, crc, n = _SNAPSHOT_HEAD.unpack_from(data)
        if version != SNAPSHOT_VERSION:
            raise CorruptSnapshot(f"version {version}")
        if crc32c(memoryview(data)[_CRC_START:]) != crc:
            raise CorruptSnapshot("CRC mismatch")
        if n < 0 or len(data) != _SNAPSHOT_HEAD.size + n * _SNAPSHOT_ENTRY.size:
            raise CorruptSnapshot(f"{n} entries in {len(data)} bytes")
        state = cls()
        ongoing = []
        for i in range(n):
            pid, epoch, last_seq, last_offset, delta, ts, coord, txn = _SNAPSHOT_ENTRY.unpack_from(
                data, _SNAPSHOT_HEAD.size + i * _SNAPSHOT_ENTRY.size)
            entry = ProducerEntry(epoch, coordinator_epoch=coord, current_txn_first_offset=txn, last_timestamp=ts)
            if last_seq >= 0:
                entry.batches.append(_BatchMeta((last_seq - delta) % INT32_WRAP, last_seq, last_offset - delta,
                                                last_offset))
            state.producers[pid] = entry
            if txn >= 0:
                ongoing.append((txn, pid))
        state._ongoing = dict(sorted(ongoing))
        return state


def replay_batch(state: ProducerStateManager, h: BatchHeader, read_batch: Callable[[], bytes | bytearray | memoryview]
                 ) -> CompletedTxn | None:
    """Apply one batch already in the log (a replica's append, a rebuild): a data batch is
    recorded, a marker (whose bytes `read_batch` gives) ends its producer's transaction,
    unchecked as Kafka does for replication. The transaction a marker completes, if any."""
    if h.producer_id < 0:
        return None
    if h.attributes & ATTR_CONTROL:
        try:
            marker = parse_marker(read_batch())
        except InvalidRecords:
            return None
        if marker is None:
            return None
        return state.complete_txn(h.producer_id, h.producer_epoch, marker.commit, h.base_offset,
                                  marker.coordinator_epoch, h.max_timestamp, check=False)
    state.record(h, h.base_offset)
    return None
