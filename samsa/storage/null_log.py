"""NullLog: a PartitionLog that keeps offsets, not data. No files, no disk I/O.

Purpose: benchmarking the network path alone (bench/bench_null_engine.py). A broker runs on
it only when its LogManager is given `NullLog.open` as log factory; no config key does that.

What it keeps: the log start and end offsets, the leader epoch cache (in memory), the config,
the largest timestamp seen, and the bytes of the most recent appends (at least the last one,
more while they fit in `retain_bytes`) so that a fetch has something to answer. Keeping an
append costs one copy of its buffer (the caller may reuse that buffer once append returns);
nothing is ever read back from a file, indexed or flushed.

Where it answers differently from `Log` (the contract suite, tests/unit/test_partition_log_contract.py,
names these as engine capabilities):

* reads come from the retained appends only. An offset in range whose batch is no longer
  retained reads as if compaction had removed it: the answer starts at the first retained
  batch after it (clients skip such gaps, as on a compacted topic); with none after it, the
  read is empty (None). A read never spans two appends, as a Log read never spans segments;
* timestamp lookups see the retained batches only and answer per batch (the batch's base
  offset and max timestamp), as Log does for compressed batches; the largest timestamp
  (ListOffsets MAX_TIMESTAMP) is remembered across all appends;
* truncation inside data no longer retained cuts at the exact offset: batch boundaries are
  not kept there (Log removes the whole batch holding the offset);
* the recovery point is always the log end offset (nothing to flush), there is always one
  segment: roll, flush and retention do nothing.

Transactions: the producer state is kept as Log keeps it (`producers`), the aborted
transactions in a list (cut by truncation); `load_producer_state` replays the retained appends
only (nothing survives a restart anyway), and there are no snapshots.

The log start offset moves only through delete_records_before and truncation, as in Log: the
retained window is a cache of the tail, not retention.
"""

from __future__ import annotations

import struct
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

from samsa.protocol.batch import BatchHeader, parse_header
from samsa.storage.config import LogConfig
from samsa.storage.errors import OffsetOutOfRange, StorageError
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.partition_log import AppendResult, Clock, LogSlice, MemorySlice, read_bytes
from samsa.storage.producer_state import ProducerStateManager, replay_batch
from samsa.storage.txn_index import AbortedTxn
from samsa.storage.validator import AssignedBatches, assign_offsets, check_append_sizes, check_follower_offsets

_BASE_OFFSET = struct.Struct(">q")


class _Append:
    """One retained append: its bytes (offsets set) and where each batch sits in them."""

    __slots__ = ("data", "lasts", "next_offset", "positions", "sizes", "timestamps")

    def __init__(self, data: MemorySlice, batches: list[tuple[int, int, int, int]], next_offset: int) -> None:
        self.data = data
        self.positions = [b[0] for b in batches]
        self.lasts = [b[1] for b in batches]
        self.timestamps = [b[2] for b in batches]
        self.sizes = [b[3] for b in batches]
        self.next_offset = next_offset

    def base_offset(self, i: int) -> int:
        return int(_BASE_OFFSET.unpack_from(self.data, self.positions[i])[0])


class NullLog:
    def __init__(self, directory: Path, config: LogConfig, *, log_start_offset: int = 0, clock: Clock = time.time,
                 retain_bytes: int = 0) -> None:
        self.dir = directory  # never created
        self.name = directory.name
        self.config = config
        self.retain_bytes = retain_bytes
        self._clock = clock
        self._lso = self._leo = max(log_start_offset, 0)
        self._max_ts, self._offset_of_max_ts = -1, -1
        self._appends: list[_Append] = []  # retained, oldest first, from index _head on
        self._ends: list[int] = []  # next_offset of each, for bisect
        self._head = 0
        self._retained_bytes = 0
        self._closed = False
        self.leader_epochs = LeaderEpochCache(None, directory.name)
        self.producers = ProducerStateManager()
        self._aborted: list[AbortedTxn] = []

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
             clean_shutdown: bool = False, clock: Clock = time.time, retain_bytes: int = 0) -> NullLog:
        """A new empty log starting at `log_start_offset` (nothing survives a restart)."""
        return cls(directory, config, log_start_offset=log_start_offset, clock=clock, retain_bytes=retain_bytes)

    # -- state ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._leo

    @property
    def segment_count(self) -> int:
        return 1

    @property
    def size_in_bytes(self) -> int:
        return self._retained_bytes  # (in memory: nothing is on disk)

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.dir} is closed")

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # -- append --------------------------------------------------------------------------

    def append(self, buf: bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], *,
               now_ms: int | None = None, log_append_time: bool = False,
               leader_epoch: int | None = None) -> AppendResult:
        self._check_open()
        now = int(self._clock() * 1000) if now_ms is None else now_ms
        check_append_sizes(self.name, buf, headers, self.config.segment_bytes, self.config.max_message_bytes)
        first = self._leo
        assigned = assign_offsets(buf, headers, first, now, log_append_time, leader_epoch)
        if leader_epoch is not None and leader_epoch >= 0:
            self.leader_epochs.assign(leader_epoch, first)
        self._retain(buf, assigned)
        return AppendResult(first, assigned[0] - 1, now if log_append_time else -1, assigned[1], assigned[2])

    def append_as_follower(self, buf: bytes | bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], *,
                           now_ms: int | None = None) -> AppendResult:
        self._check_open()
        check_append_sizes(self.name, buf, headers, self.config.segment_bytes, None)
        assigned, new_epochs = check_follower_offsets(self.name, headers, self._leo, self.leader_epochs.latest_epoch())
        for epoch, start in new_epochs:
            self.leader_epochs.assign(epoch, start)
        self._retain(buf, assigned)
        return AppendResult(headers[0][1].base_offset, assigned[0] - 1, -1, assigned[1], assigned[2])

    def _retain(self, buf: bytes | bytearray | memoryview, assigned: AssignedBatches) -> None:
        next_offset, max_ts, offset_of_max, batches = assigned
        data = MemorySlice(buf, _BASE_OFFSET.unpack_from(buf, 0)[0])
        self._appends.append(_Append(data, batches, next_offset))
        self._ends.append(next_offset)
        self._retained_bytes += len(data)
        self._leo = next_offset
        if max_ts > self._max_ts:
            self._max_ts, self._offset_of_max_ts = max_ts, offset_of_max
        while len(self._appends) - self._head > 1 and self._retained_bytes > self.retain_bytes:
            self._retained_bytes -= len(self._appends[self._head].data)
            self._head += 1
        self._compact_head()

    def _compact_head(self) -> None:
        """Forget dropped appends in bulk (amortized O(1) per append)."""
        head = self._head
        if head and head * 2 >= len(self._appends):
            del self._appends[:head]
            del self._ends[:head]
            self._head = 0

    def _drop_before(self, offset: int) -> None:
        """Stop retaining appends that end at or before `offset`."""
        while self._head < len(self._appends) and self._ends[self._head] <= offset:
            self._retained_bytes -= len(self._appends[self._head].data)
            self._head += 1
        self._compact_head()

    def roll(self, now_ms: int | None = None) -> None:
        self._check_open()

    # -- read ----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> LogSlice | None:
        """As Log.read, from the retained appends (see the module comment)."""
        self._check_open()
        if offset < self._lso or offset > self._leo:
            raise OffsetOutOfRange(f"{self.name}: offset {offset} is outside [{self._lso}, {self._leo}]")
        if offset == self._leo or (max_offset is not None and offset >= max_offset):
            return None
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        i = bisect_right(self._ends, offset, lo=self._head)
        if i == len(self._appends):
            return None
        a = self._appends[i]
        j = bisect_left(a.lasts, offset)
        position, batch_size = a.positions[j], a.sizes[j]
        end = len(a.data)
        if max_offset is not None and max_offset < a.next_offset:
            end = a.positions[bisect_left(a.lasts, max_offset)]
        if end <= position:
            return None
        size = min(end - position, max_bytes)
        if size < batch_size and max_bytes > 0:
            size = batch_size if min_one_batch else 0
        if position == 0 and size == len(a.data):
            return a.data
        return MemorySlice(memoryview(a.data)[position:position + size], a.base_offset(j))

    read_bytes = staticmethod(read_bytes)

    def _retained_batches(self) -> Iterator[tuple[_Append, int]]:
        for i in range(self._head, len(self._appends)):
            a = self._appends[i]
            for j in range(len(a.lasts)):
                yield a, j

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        self._check_open()
        for a, j in self._retained_batches():
            if a.timestamps[j] >= timestamp and a.lasts[j] >= self._lso:
                return max(a.base_offset(j), self._lso), a.timestamps[j]
        return None

    def offset_for_max_timestamp(self) -> tuple[int, int] | None:
        self._check_open()
        if self._max_ts < 0:
            return None
        return self._offset_of_max_ts, self._max_ts

    def tail_batch_headers(self, max_bytes: int) -> Iterator[BatchHeader]:
        """Headers of the newest retained appends, back to the one reaching `max_bytes`."""
        self._check_open()
        first = len(self._appends)
        total = 0
        while first > self._head and total < max_bytes:
            first -= 1
            total += len(self._appends[first].data)
        for i in range(first, len(self._appends)):
            a = self._appends[i]
            for position in a.positions:
                yield parse_header(a.data, position)

    # -- retention, deletion, truncation ---------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None, *, high_watermark: int | None = None) -> int:
        return 0

    def delete_records_before(self, offset: int) -> int:
        self._check_open()
        if offset > self._leo or offset < 0:
            raise OffsetOutOfRange(f"{self.name}: cannot delete records before {offset} (log end {self._leo})")
        if offset > self._lso:
            self._lso = offset
            self.leader_epochs.truncate_from_start(offset)
            self._drop_before(offset)
        return self._lso

    def truncate_to(self, offset: int) -> bool:
        """As Log.truncate_to; inside data no longer retained, the cut is at `offset` exactly."""
        self._check_open()
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if offset >= self._leo:
            return False
        new_leo = offset
        i = bisect_right(self._ends, offset, lo=self._head)
        if i < len(self._appends):
            a = self._appends[i]
            j = bisect_left(a.lasts, offset)  # the first batch that goes
            cut = a.positions[j]
            if a.base_offset(j) < offset:
                new_leo = a.base_offset(j)  # a batch straddling the offset goes whole
            for dropped in self._appends[i:]:
                self._retained_bytes -= len(dropped.data)
            del self._appends[i:]
            del self._ends[i:]
            if cut:
                kept = _Append(MemorySlice(memoryview(a.data)[:cut], a.data.first_batch_offset),
                               list(zip(a.positions[:j], a.lasts[:j], a.timestamps[:j], a.sizes[:j], strict=True)),
                               a.lasts[j - 1] + 1)
                self._appends.append(kept)
                self._ends.append(kept.next_offset)
                self._retained_bytes += cut
            self._head = min(self._head, len(self._appends))
        self.leader_epochs.truncate_from_end(new_leo)
        self._leo = new_leo
        self._lso = min(self._lso, new_leo)
        self._aborted = [t for t in self._aborted if t.last_offset < new_leo]
        if self._offset_of_max_ts >= new_leo:
            self._max_ts, self._offset_of_max_ts = -1, -1
            for a, j in self._retained_batches():
                if a.timestamps[j] > self._max_ts:
                    self._max_ts, self._offset_of_max_ts = a.timestamps[j], a.lasts[j]
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_open()
        self._appends, self._ends, self._head, self._retained_bytes = [], [], 0, 0
        self._lso = self._leo = offset
        self._max_ts, self._offset_of_max_ts = -1, -1
        self.leader_epochs.clear()
        self._aborted = []
        self.producers = ProducerStateManager()

    # -- transactions ----------------------------------------------------------------------

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        if not self._aborted or txn.last_offset > self._aborted[-1].last_offset:
            self._aborted.append(txn)

    @property
    def has_aborted_transactions(self) -> bool:
        return bool(self._aborted)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        return [(t.producer_id, t.first_offset) for t in self._aborted
                if t.last_offset >= start_offset and t.first_offset < upper_bound_offset]

    def batch_headers(self, start_offset: int) -> Iterator[tuple[BatchHeader, Callable[[], bytes]]]:
        """The retained batches from the one holding `start_offset` on."""
        self._check_open()
        for i in range(self._head, len(self._appends)):
            a = self._appends[i]
            for j, position in enumerate(a.positions):
                if a.lasts[j] >= start_offset:
                    yield parse_header(a.data, position), partial(_cut, a.data, position, a.sizes[j])

    def load_producer_state(self) -> int:
        state = ProducerStateManager()
        n = 0
        for h, read in self.batch_headers(self._lso):
            done = replay_batch(state, h, read)
            if done is not None and done.aborted:
                self.add_aborted_txn(AbortedTxn(*done[:3], done.last_stable_offset))
            n += 1
        self.producers = state
        return n

    # -- flush, close, delete ------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        self._check_open()

    defer_flush = False
    flush_due = False  # (nothing to sync: the recovery point is the log end offset)

    def flush_fds(self) -> tuple[int, list[int]]:
        return self._leo, []

    def flushed_to(self, target: int) -> None:
        pass

    def maybe_flush(self, now_ms: int) -> bool:
        return False

    def close(self) -> None:
        self._closed = True

    def delete(self, *, keep_fds: bool = False) -> None:
        self._closed = True
        self._appends, self._ends, self._head, self._retained_bytes = [], [], 0, 0

    def release_files(self) -> None:
        pass

    @property
    def has_pending_deletes(self) -> bool:
        return False

    def finish_pending_deletes(self, now_ms: int | None) -> None:
        pass

    def __repr__(self) -> str:
        return f"NullLog({self.dir}, start={self._lso}, end={self._leo}, retained={self._retained_bytes} bytes)"


def _cut(data: bytes, position: int, size: int) -> bytes:
    return data[position:position + size]
