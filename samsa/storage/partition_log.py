"""PartitionLog: what the broker may use of one partition's log, as a typing.Protocol.

The storage engine's interface (Tansu's `Storage` trait, in Kafka's UnifiedLog names). Two
engines implement it: `Log` (log.py: segments on disk in Kafka's layout) and `NullLog`
(null_log.py: offsets only, no disk, so the network path can be benchmarked alone). One
contract suite runs on both: tests/unit/test_partition_log_contract.py.

The members fall in two groups:

* what the broker uses (server/, handlers/, coordinator/): the offsets (log start, log end),
  append as leader or follower, read, timestamp lookups, the leader epoch cache, truncation
  (replica fetcher), DeleteRecords, roll (group log compaction), the config; the producer
  state (idempotence, transactions) and the aborted transactions a read_committed fetch needs;
* what the LogManager uses to keep a log alive: recovery point, retention, flush, close,
  delete. These stay in because a LogManager must manage either engine.

Nothing here names a segment or an index: a caller that needs something of them gets a
method here (`tail_batch_headers`, `offset_for_max_timestamp`, `segment_count`).

A read returns a `LogSlice`: a `FileSlice` (an fd range, sent with sendfile) from an engine
with files, a `MemorySlice` (the bytes themselves) from one without. Both have `size` and
`first_batch_offset`; the fetch encoder sendfiles the first and copies the second, and
`read_bytes` turns either into bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, Self, runtime_checkable

from samsa.protocol.batch import HEADER_SIZE, BatchHeader, parse_header
from samsa.storage.config import LogConfig
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.producer_state import ProducerStateManager
from samsa.storage.txn_index import AbortedTxn

_Buffer = bytes | bytearray | memoryview
Clock = Callable[[], float]  # seconds since the epoch, as time.time


class FileSlice(NamedTuple):
    """A byte range of a segment file: sendfile(fd, position, size). size may be 0."""

    fd: int
    position: int
    size: int
    first_batch_offset: int


class MemorySlice(bytes):
    """Bytes a read answers from memory (an engine without files), with FileSlice's `size`
    and `first_batch_offset`. The fetch encoder copies them into the response."""

    first_batch_offset: int

    def __new__(cls, data: _Buffer, first_batch_offset: int) -> Self:
        self = super().__new__(cls, data)
        self.first_batch_offset = first_batch_offset
        return self

    @property
    def size(self) -> int:
        return len(self)


LogSlice = FileSlice | MemorySlice


def read_bytes(log_slice: LogSlice) -> bytes:
    """The slice's bytes (for TLS listeners, the group coordinator's replay, tests)."""
    if isinstance(log_slice, MemorySlice):
        return bytes(log_slice)
    fd, position, size, _ = log_slice
    data = os.pread(fd, size, position)
    while len(data) < size:
        more = os.pread(fd, size - len(data), position + len(data))
        if not more:
            break
        data += more
    return data


def slice_next_offset(log_slice: LogSlice) -> int:
    """The offset after the last whole batch of the slice (its first batch's base offset when
    none is whole): the upper bound of what a fetch hands out, read from the batch headers only
    (a pread of 61 bytes per batch from a file). Kafka bounds the aborted transactions it lists
    in a read_committed fetch by it."""
    end_offset = log_slice.first_batch_offset
    if isinstance(log_slice, MemorySlice):
        buf = memoryview(log_slice)
        pos, end = 0, len(buf)

        def header(at: int) -> bytes | memoryview:
            return buf[at:at + HEADER_SIZE]
    else:
        fd, start, size, _ = log_slice
        pos, end = start, start + size

        def header(at: int) -> bytes | memoryview:
            return os.pread(fd, HEADER_SIZE, at)

    while pos + HEADER_SIZE <= end:
        raw = header(pos)
        if len(raw) < HEADER_SIZE:
            break
        h = parse_header(raw)
        if h.size <= 0 or pos + h.size > end:
            break
        end_offset = h.next_offset
        pos += h.size
    return end_offset


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless LogAppendTime
    max_timestamp: int  # -1 when no batch carries a timestamp
    offset_of_max_timestamp: int  # last offset of the batch holding max_timestamp ("shallow")


@runtime_checkable
class PartitionLog(Protocol):
    """One partition's log. Offsets are Kafka's: [log_start_offset, log_end_offset) holds the
    records; see log.py for each member's full semantics (NullLog differs only where the
    contract suite names an engine capability)."""

    config: LogConfig
    dir: Path  # the partition directory (`<log dir>/<topic>-<partition>`), even if never created
    leader_epochs: LeaderEpochCache
    producers: ProducerStateManager  # replaced by load_producer_state and full truncation

    # -- used by the broker ----------------------------------------------------------------

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def segment_count(self) -> int:
        """Segments the log holds (the active one included)."""

    @property
    def size_in_bytes(self) -> int:
        """The bytes of record batches the log holds (DescribeLogDirs' partition size)."""

    def append(self, buf: bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], *,
               now_ms: int | None = None, log_append_time: bool = False,
               leader_epoch: int | None = None) -> AppendResult:
        """Leader append: offsets assigned from the log end offset, rewritten into `buf`."""

    def append_as_follower(self, buf: _Buffer, headers: Sequence[tuple[int, BatchHeader]], *,
                           now_ms: int | None = None) -> AppendResult:
        """Replica append: offsets already set; the first batch starts at the log end offset."""

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> LogSlice | None:
        """Bytes from the start of the batch holding `offset` (None at the end or at max_offset);
        OffsetOutOfRange outside [log_start_offset, log_end_offset]."""

    def read_bytes(self, log_slice: LogSlice) -> bytes: ...

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record (or batch) with timestamp >= `timestamp`."""

    def offset_for_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the largest timestamp (the last offset of its batch), or None."""

    def tail_batch_headers(self, max_bytes: int) -> Iterator[BatchHeader]:
        """Headers of the last batches, about `max_bytes` of them (producer state rebuild)."""

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= `offset`; False if there was none."""

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all data; the log restarts empty at `offset`."""

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to `offset`; returns the log start offset."""

    def update_config(self, config: LogConfig) -> None: ...

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction (with the segment holding its marker)."""

    @property
    def has_aborted_transactions(self) -> bool:
        """Whether any aborted transaction is indexed (a read_committed fetch then bounds them)."""

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start_offset, upper_bound_offset): last offset >= start, first offset < upper bound."""

    def batch_headers(self, start_offset: int) -> Iterator[tuple[BatchHeader, Callable[[], bytes]]]:
        """Header of each batch from the one holding `start_offset` on, with a reader of its bytes."""

    def load_producer_state(self) -> int:
        """Rebuild `producers` from what the log holds (snapshot + replay); batches replayed."""

    # -- used by the LogManager ------------------------------------------------------------

    @property
    def recovery_point(self) -> int: ...

    def delete_old_segments(self, now_ms: int | None = None, *, high_watermark: int | None = None) -> int:
        """Retention; returns the number of segments deleted."""

    def flush(self, up_to: int | None = None) -> None: ...

    defer_flush: bool

    @property
    def flush_due(self) -> bool:
        """flush.messages reached (see Log.flush_fds)."""

    def flush_fds(self) -> tuple[int, list[int]]: ...

    def flushed_to(self, target: int) -> None: ...

    def maybe_flush(self, now_ms: int) -> bool: ...

    def close(self) -> None: ...

    def delete(self, *, keep_fds: bool = False) -> None: ...

    def release_files(self) -> None: ...

    @property
    def has_pending_deletes(self) -> bool: ...  # deleted segments whose files are still open

    def finish_pending_deletes(self, now_ms: int | None) -> None:
        """Close and unlink the deleted segments whose file.delete.delay.ms is over (all: None)."""


class LogFactory(Protocol):
    """How a LogManager opens (or creates) a partition's log: `Log.open` or `NullLog.open`."""

    def __call__(self, directory: Path, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
                 clean_shutdown: bool = False, clock: Clock = ...) -> PartitionLog: ...
