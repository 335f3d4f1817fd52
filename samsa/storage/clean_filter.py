"""What the log cleaner keeps of each batch, and the segment files it writes them to.

Kafka's MemoryRecords.filterTo with the cleaner's RecordFilter, and CleanedTransactionMetadata;
cleaner.py drives them (see its docstring for the rules as a whole). Three parts:

- `read_batches`: the batches of one segment through a reusable read buffer, each checked
  (magic 2, length within the segment, offsets increasing, CRC-32C): a batch that fails raises
  `CorruptBatch`, never passes silently.
- `TxnTracker`: the aborted transactions met so far (from the transaction indexes, consumed in
  first-offset order as batches go by), which batches belong to one, and whether a marker may
  go (an ABORT marker stays while batches of its transaction are still in the log, a COMMIT
  marker while batches of its transaction were seen since the previous marker of its producer).
- `BatchFilter.filter`: one batch in, the bytes to write out (the batch itself, byte for byte,
  when nothing changes; a rebuilt batch with the kept records; an empty batch header; or
  nothing). The per-record part is offset_map.py's (C).
- `CleanedSegment`: `<base>.log.cleaned` with its `.index.cleaned`, `.timeindex.cleaned` and,
  when a kept abort marker needs it, `.txnindex.cleaned`; indexed as LogSegment does.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from samsa.protocol import compression
from samsa.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
)
from samsa.protocol.control import decode_control_key
from samsa.protocol.records import InvalidRecords, decode_records
from samsa.storage.config import LogConfig
from samsa.storage.index import pwrite_all
from samsa.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from samsa.storage.offset_index import OffsetIndex
from samsa.storage.offset_map import OffsetMap, rebuild_records
from samsa.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_file_name
from samsa.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from samsa.storage.time_index import TimeIndex
from samsa.storage.txn_index import AbortedTxn, TransactionIndex

ATTR_DELETE_HORIZON = 0x40  # KIP-534: baseTimestamp holds the delete horizon
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
IO_CHUNK = 1 << 20
_CRC = struct.Struct(">I")


class CorruptBatch(Exception):
    """A batch in the range does not check out; the clean stops, the log untouched."""


# -- reading ------------------------------------------------------------------------------

class ReadBuffer:
    """One reusable buffer for a cleaner's reads (grows for a batch larger than it)."""

    def __init__(self, size: int = IO_CHUNK) -> None:
        self.buf = bytearray(size)


def read_batches(fd: int, size: int, path: str, buffer: ReadBuffer, first_offset: int, *,
                 on_read: Callable[[int], None]) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The checked batches of the segment file `fd` (`size` bytes), each as (header, its bytes),
    from the start; the bytes stay valid until the next one is asked for. `on_read(n)` is told
    of each read. CorruptBatch at the first batch that fails a check."""
    pos = 0
    chunk_pos = 0
    chunk_len = 0
    low = first_offset
    while pos < size:
        rel = pos - chunk_pos
        if rel + HEADER_SIZE > chunk_len:
            chunk_pos, chunk_len = pos, _fill(fd, buffer, pos, min(len(buffer.buf), size - pos), on_read)
            rel = 0
            if chunk_len < HEADER_SIZE:
                raise CorruptBatch(f"{path}: {size - pos} bytes at position {pos}, less than a batch header")
        view = memoryview(buffer.buf)
        h = BatchHeader._make(HEADER.unpack_from(view, rel))
        n = LOG_OVERHEAD + h.batch_length
        if h.magic != MAGIC_V2 or n < HEADER_SIZE or pos + n > size:
            raise CorruptBatch(f"{path}: no valid batch at position {pos} (magic {h.magic}, size {n})")
        if h.base_offset < low or h.last_offset_delta < 0 or h.record_count < 0:
            raise CorruptBatch(f"{path}: batch at position {pos} has offsets {h.base_offset}..{h.last_offset} "
                               f"where the next is at least {low}")
        if rel + n > chunk_len:
            if n > len(buffer.buf):
                buffer.buf = bytearray(n)
                view = memoryview(buffer.buf)
            chunk_pos, chunk_len = pos, _fill(fd, buffer, pos, max(n, min(len(buffer.buf), size - pos)), on_read)
            rel = 0
            if chunk_len < n:
                raise CorruptBatch(f"{path}: the file ends inside the batch at position {pos}")
            view = memoryview(buffer.buf)
        batch = view[rel : rel + n]
        if crc32c(batch[CRC_START:]) != h.crc:
            raise CorruptBatch(f"{path}: CRC mismatch in the batch at offset {h.base_offset} (position {pos})")
        yield h, batch
        low = h.base_offset + h.last_offset_delta + 1
        pos += n


def _fill(fd: int, buffer: ReadBuffer, pos: int, want: int, on_read: Callable[[int], None]) -> int:
    got = 0
    view = memoryview(buffer.buf)
    while got < want:
        n = os.preadv(fd, [view[got:want]], pos + got)
        if n <= 0:
            break
        got += n
    on_read(got)
    return got


def records_section(h: BatchHeader, batch: memoryview) -> bytes | bytearray | memoryview:
    """The batch's records, decompressed (CorruptBatch if they do not decompress)."""
    body = batch[HEADER_SIZE:]
    codec = h.attributes & ATTR_COMPRESSION_MASK
    if codec == compression.NONE or (h.record_count == 0 and not body):
        return body
    try:
        return compression.decompress(codec, body)
    except InvalidRecords as e:
        raise CorruptBatch(f"batch at offset {h.base_offset}: {e}") from None


def marker_type(h: BatchHeader, batch: memoryview) -> bool | None:
    """A control batch's marker: True COMMIT, False ABORT, None another or none (emptied)."""
    if h.record_count == 0:
        return None
    try:
        records = decode_records(batch, h)
    except InvalidRecords as e:
        raise CorruptBatch(f"control batch at offset {h.base_offset}: {e}") from None
    if not records or records[0].key is None:
        return None
    return decode_control_key(records[0].key)


# -- transactions -------------------------------------------------------------------------

@dataclass
class _Aborted:
    txn: AbortedTxn
    seen_batch: bool = False  # a batch of it was met in this pass


@dataclass
class TxnTracker:
    """Kafka's CleanedTransactionMetadata. `aborted`: every aborted transaction the pass may
    meet, sorted by first offset."""

    aborted: list[AbortedTxn]
    _next: int = 0
    _ongoing_aborted: dict[int, _Aborted] = field(default_factory=dict)
    _ongoing_committed: set[int] = field(default_factory=set)

    def _consume_up_to(self, offset: int) -> None:
        aborted = self.aborted
        while self._next < len(aborted) and aborted[self._next].first_offset <= offset:
            txn = aborted[self._next]
            self._ongoing_aborted.setdefault(txn.producer_id, _Aborted(txn))
            self._next += 1

    def on_batch(self, h: BatchHeader) -> bool:
        """A data batch goes by: whether it belongs to an aborted transaction."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if not h.attributes & ATTR_TRANSACTIONAL:
            return False
        entry = self._ongoing_aborted.get(h.producer_id)
        if entry is not None:
            entry.seen_batch = True
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, commit: bool | None) -> tuple[bool, AbortedTxn | None]:
        """A control batch goes by: (whether it may be discarded, the abort to index with it)."""
        self._consume_up_to(h.base_offset + h.last_offset_delta)
        if h.record_count == 0:
            return True, None  # emptied by an earlier clean
        if commit is None:
            return False, None  # another control type: kept
        if not commit:
            entry = self._ongoing_aborted.pop(h.producer_id, None)
            if entry is not None and entry.seen_batch:
                return False, entry.txn
            return True, None
        if h.producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(h.producer_id)
            return False, None
        return True, None


# -- one batch ----------------------------------------------------------------------------

@dataclass
class FilterStats:
    records_read: int = 0
    records_removed: int = 0
    batches_removed: int = 0


@dataclass
class BatchFilter:
    """The cleaner's decisions for one pass (Kafka's cleanInto RecordFilter)."""

    offset_map: OffsetMap
    end_offset: int  # the map covers [.., end_offset); a record at or past it is kept
    last_batch_offset: int  # last offset of the last batch before end_offset: kept, if only as a header
    producers: Mapping[int, tuple[int, int]]  # producer id -> (last data offset or -1, epoch)
    now_ms: int
    delete_retention_ms: int
    txns: TxnTracker
    stats: FilterStats = field(default_factory=FilterStats)
    _aborts_by_marker: dict[int, AbortedTxn] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._aborts_by_marker = {t.last_offset: t for t in self.txns.aborted}

    def _is_last_of_producer(self, h: BatchHeader) -> bool:
        last = self.producers.get(h.producer_id)
        if last is None:
            return False
        last_data, epoch = last
        if last_data >= 0:
            return h.base_offset + h.last_offset_delta == last_data
        return bool(h.attributes & ATTR_CONTROL) and h.producer_epoch == epoch

    def filter(self, h: BatchHeader, batch: memoryview) -> tuple[bytes | memoryview | None, AbortedTxn | None]:
        """(What to write for this batch, or None; the aborted transaction to index with it)."""
        attrs = h.attributes
        last_offset = h.base_offset + h.last_offset_delta
        self.stats.records_read += h.record_count
        if h.base_offset >= self.end_offset:  # (a partly mapped segment's rest: another clean's)
            return batch, self._aborts_by_marker.get(h.base_offset) if attrs & ATTR_CONTROL else None
        control = bool(attrs & ATTR_CONTROL)
        index_txn = None
        if control:
            can_discard, index_txn = self.txns.on_marker(h, marker_type(h, batch))
            has_horizon = bool(attrs & ATTR_DELETE_HORIZON)
            discard_records = can_discard and has_horizon and h.base_timestamp <= self.now_ms
        else:
            can_discard = discard_records = self.txns.on_batch(h)
        if h.producer_id >= 0 and self._is_last_of_producer(h):
            retain_empty, delete = True, False
        elif last_offset == self.last_batch_offset:
            retain_empty, delete = True, False  # the round's last batch: its offsets stay known
        else:
            retain_empty, delete = False, discard_records
        if delete:
            self._removed(h.record_count, whole=True)
            return None, None
        if h.record_count == 0:  # (emptied by an earlier clean)
            if not retain_empty:
                self._removed(0, whole=True)
            return (batch if retain_empty else None), index_txn
        if discard_records:
            kept = 0
            out = None
        else:
            out, kept = self._records(h, batch, control, marker_for_empty_txn=control and can_discard)
        self._removed(h.record_count - kept, whole=kept == 0 and not retain_empty)
        if kept:
            return out, index_txn
        if retain_empty:
            return empty_batch(h), index_txn
        return None, None

    def _removed(self, records: int, *, whole: bool) -> None:
        self.stats.records_removed += records
        self.stats.batches_removed += whole

    def _records(self, h: BatchHeader, batch: memoryview, control: bool, *, marker_for_empty_txn: bool
                 ) -> tuple[bytes | memoryview | None, int]:
        attrs = h.attributes
        has_horizon = bool(attrs & ATTR_DELETE_HORIZON)
        lat = bool(attrs & ATTR_TIMESTAMP_TYPE)
        data = records_section(h, batch)
        keep_tombstones = not has_horizon or self.now_ms < h.base_timestamp
        try:
            kept, tombstones, first_ts, max_kept, mask = self.offset_map.filter_records(
                data, h.record_count, h.base_offset, h.base_timestamp, h.max_timestamp, lat,
                h.base_offset if control else self.end_offset, keep_tombstones)
        except ValueError as e:
            raise CorruptBatch(f"batch at offset {h.base_offset}: {e}") from None
        if kept == 0:
            return None, 0
        set_horizon = (tombstones or marker_for_empty_txn) and not has_horizon
        if mask is None and not set_horizon:
            return batch, kept
        if set_horizon or has_horizon:
            new_base = self.now_ms + self.delete_retention_ms if set_horizon else h.base_timestamp
        else:
            new_base = first_ts
        try:
            body = rebuild_records(data, h.record_count, mask if mask is not None else b"\x01" * h.record_count,
                                   h.base_timestamp, h.max_timestamp, lat, new_base)
        except ValueError as e:
            raise CorruptBatch(f"batch at offset {h.base_offset}: {e}") from None
        codec = attrs & ATTR_COMPRESSION_MASK
        payload = body if codec == compression.NONE else compression.compress(codec, body)
        new_attrs = attrs | ATTR_DELETE_HORIZON if (set_horizon or has_horizon) else attrs & ~ATTR_DELETE_HORIZON
        max_ts = h.max_timestamp if lat else max_kept
        return seal(h, payload, new_attrs, new_base, max_ts, kept), kept


def seal(h: BatchHeader, payload: bytes | memoryview, attributes: int, base_timestamp: int, max_timestamp: int,
         record_count: int) -> bytes:
    """A batch with h's offsets, epoch and producer fields around `payload`, CRC computed."""
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(out, 0, h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(payload), h.partition_leader_epoch,
                     MAGIC_V2, 0, attributes, h.last_offset_delta, base_timestamp, max_timestamp, h.producer_id,
                     h.producer_epoch, h.base_sequence, record_count)
    out += payload
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


def empty_batch(h: BatchHeader) -> bytes:
    """Kafka's empty batch header (DefaultRecordBatch.writeEmptyHeader): the producer's fields
    and the offset range, no records, no codec, baseTimestamp -1, the same max timestamp."""
    attributes = h.attributes & (ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    return seal(h, b"", attributes, -1, h.max_timestamp, 0)


# -- the new segment ----------------------------------------------------------------------

def cleaned_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (segment_file_name(base_offset, suffix) + CLEANED_SUFFIX)


# Bytes written to a cleaned segment between two fdatasyncs: its writeback is done by the cleaner
# (a low-priority process), a little at a time, not by the kernel's flusher threads (at normal
# priority, beside the broker) all at once at the final fsync.
WRITE_BEHIND = 8 << 20
_fdatasync = getattr(os, "fdatasync", os.fsync)


class CleanedSegment:
    """`<base>.log.cleaned` and its indexes, written sequentially, indexed as LogSegment does."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.interval = config.index_interval_bytes
        self.fd = os.open(cleaned_path(directory, base_offset, LOG_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                          0o644)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # (both exist even when empty: no rebuild at open)
            os.close(os.open(cleaned_path(directory, base_offset, suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                             0o644))
        self.offset_index = OffsetIndex(cleaned_path(directory, base_offset, INDEX_SUFFIX), base_offset,
                                        config.segment_index_bytes // OFFSET_ENTRY_SIZE)
        self.time_index = TimeIndex(cleaned_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset,
                                    config.segment_index_bytes // TIME_ENTRY_SIZE)
        self.aborted: list[AbortedTxn] = []
        self.buf = bytearray()
        self.written = 0  # bytes in the file
        self.size = 0  # bytes in the file and the buffer
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.next_offset = base_offset
        self._since_index = 0
        self._synced = 0  # bytes of the file fdatasynced

    def append(self, batch: bytes | memoryview, last_offset: int, max_timestamp: int,
               on_write: Callable[[int], None]) -> None:
        n = len(batch)
        position = self.size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = max_timestamp
        if self._since_index > self.interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._since_index = 0
        self._since_index += n
        self.buf += batch
        self.size += n
        self.next_offset = last_offset + 1
        if len(self.buf) >= IO_CHUNK:
            self.flush(on_write)

    def flush(self, on_write: Callable[[int], None]) -> None:
        """Write what is buffered."""
        if self.buf:
            pwrite_all(self.fd, memoryview(self.buf), self.written)
            self.written += len(self.buf)
            on_write(len(self.buf))
            self.buf = bytearray()
            if self.written - self._synced >= WRITE_BEHIND:
                _fdatasync(self.fd)
                self._synced = self.written

    def finish(self, mtime_ns: int, on_write: Callable[[int], None]) -> None:
        """Write the rest, the indexes (with the final time index entry) and the aborted
        transactions, give the .log the old segments' mtime, fsync everything."""
        self.flush(on_write)
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.write()
        self.time_index.write()
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # (an index without entries was never written)
            fd = os.open(cleaned_path(self.dir, self.base_offset, suffix), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if self.aborted:
            txn_index = TransactionIndex(cleaned_path(self.dir, self.base_offset, TXN_INDEX_SUFFIX), exists=False)
            try:
                for txn in self.aborted:
                    txn_index.append(txn)
                txn_index.flush()
            finally:
                txn_index.close()
        os.utime(self.fd, ns=(mtime_ns, mtime_ns))
        os.fsync(self.fd)
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
