"""LogSegment: one `.log` file of whole RecordBatch v2 blobs plus its two indexes.

On-disk format: `<base offset, 20 digits zero-padded>.log` is the batches back to back, exactly
as they travel on the wire (see samsa/protocol/batch.py for the 61-byte header); beside it
`<base>.index` (offset -> position, offset_index.py), `<base>.timeindex` (timestamp ->
offset, time_index.py) and, once a transaction aborts in it, `<base>.txnindex` (the aborted
transactions whose marker it holds, txn_index.py). The base offset is the first offset the
segment may hold. A segment being deleted has its files renamed with a `.deleted` suffix first.

The segment never looks inside a batch on the hot path: append writes the caller's buffer in
one write and indexes batches from headers the caller already parsed; lookups read 61-byte
headers with pread, starting from the nearest index entry, so a scan covers about
`index.interval.bytes`. The .log file descriptor is opened lazily and stays open until the
segment is closed, so fetches can sendfile from it.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from samsa.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)
from samsa.ratelimit import RateLimitedLog
from samsa.storage.errors import CorruptIndex, CorruptSegment
from samsa.storage.index import pwrite_all
from samsa.storage.offset_index import ENTRY_SIZE as OFFSET_ENTRY_SIZE
from samsa.storage.offset_index import OffsetIndex
from samsa.storage.time_index import ENTRY_SIZE as TIME_ENTRY_SIZE
from samsa.storage.time_index import TimeIndex
from samsa.storage.txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

INT32_MAX = 2**31 - 1
SCAN_CHUNK = 16384  # bytes per pread when walking headers (> the default index interval)

_fdatasync = getattr(os, "fdatasync", os.fsync)
# A damaged index is found at each read through it until the next restart rebuilds it: one line
# per partition per interval.
_index_log = RateLimitedLog(logging.getLogger("samsa.storage"), interval_s=60.0)


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """`00000000000000000042.index` -> (42, ".index"); None for anything else."""
    stem, dot, suffix = name.partition(".")
    if not dot or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), "." + suffix


RECENT_BATCHES = 64
_BASE = struct.Struct(">q")


class BatchPos(NamedTuple):
    """Where one batch sits in a segment, from its header alone."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, segment_index_bytes: int,
                 created_ms: int, existing: bool) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self._fd: int | None = None
        self.size = self.log_path.stat().st_size if existing else 0
        self.needs_recovery = False  # set when an index is missing or insane (the loader rebuilds it)
        self.index_problem = ""  # ... and why
        self.offset_index, self.time_index = self._open_indexes(segment_index_bytes, existing)
        self.txn_index = TransactionIndex(self.path(TXN_INDEX_SUFFIX), exists=existing)
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp = ts  # largest batch max timestamp (-1: none)
        # The first batch's max timestamp (Kafka's rolling-based timestamp; max.compaction.lag.ms
        # measures a segment's age from it): known once a batch is appended or the segment is
        # scanned or read (`read_first_batch_timestamp`); None until then.
        self.first_batch_timestamp: int | None = None
        self.offset_of_max_timestamp = ts_offset  # last offset of the batch that has it
        self.bytes_since_last_index_entry = 0
        # The last few batches appended since open: a consumer following the tail asks for
        # one of them, and finds it here without reading headers back from the file.
        self.recent: deque[BatchPos] = deque(maxlen=RECENT_BATCHES)
        self._data_synced = not existing
        self._renamed = False

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, segment_index_bytes: int,
               now_ms: int) -> LogSegment:
        """A new empty segment; its three files are created (empty) now."""
        log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        fd = os.open(log_path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(fd).st_size:
            os.close(fd)
            raise FileExistsError(f"segment {log_path} already exists and is not empty")
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            os.close(os.open(directory / segment_file_name(base_offset, suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                             0o644))
        (directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX)).unlink(missing_ok=True)  # (a former segment's)
        seg = cls(directory, base_offset, index_interval_bytes=index_interval_bytes,
                  segment_index_bytes=segment_index_bytes, created_ms=now_ms, existing=False)
        seg._fd = fd
        return seg

    @classmethod
    def open(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, segment_index_bytes: int,
             now_ms: int, durable: bool = False) -> LogSegment:
        """An existing segment; check `needs_recovery` afterwards. `durable`: its files are
        known to be fsynced already (a cleaned segment)."""
        seg = cls(directory, base_offset, index_interval_bytes=index_interval_bytes,
                  segment_index_bytes=segment_index_bytes, created_ms=now_ms, existing=True)
        seg._data_synced = durable
        return seg

    def _open_indexes(self, segment_index_bytes: int, existing: bool) -> tuple[OffsetIndex, TimeIndex]:
        index_path = self.path(INDEX_SUFFIX)
        time_path = self.path(TIME_INDEX_SUFFIX)
        max_offsets = segment_index_bytes // OFFSET_ENTRY_SIZE
        max_times = segment_index_bytes // TIME_ENTRY_SIZE
        if existing:
            why = "missing"
            try:
                if index_path.exists() and time_path.exists():
                    oi = OffsetIndex(index_path, self.base_offset, max_offsets, exists=True)
                    ti = TimeIndex(time_path, self.base_offset, max_times, exists=True)
                    oi.sanity_check(self.size)
                    ti.sanity_check()
                    return oi, ti
            except CorruptIndex as e:
                why = str(e)
            self.needs_recovery = True
            self.index_problem = why
        return (OffsetIndex(index_path, self.base_offset, max_offsets),
                TimeIndex(time_path, self.base_offset, max_times))

    def path(self, suffix: str) -> Path:
        return self.dir / segment_file_name(self.base_offset, suffix)

    @property
    def fd(self) -> int:
        """The .log descriptor (opened on first use, valid until close/delete)."""
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDWR)
        return self._fd

    @property
    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def set_segment_index_bytes(self, segment_index_bytes: int) -> None:
        self.offset_index.max_entries = segment_index_bytes // OFFSET_ENTRY_SIZE
        self.time_index.max_entries = segment_index_bytes // TIME_ENTRY_SIZE

    # -- appending -----------------------------------------------------------------------

    def append(self, buf: bytes | bytearray | memoryview, batches: Sequence[tuple[int, int, int, int]]) -> None:
        """Write `buf` (whole batches, offsets set) at the end in one write and index it.

        `batches` holds (position in buf, last offset, max timestamp, size) per batch.
        """
        start = self.size
        try:
            pwrite_all(self.fd, memoryview(buf), start)
        except OSError:
            os.ftruncate(self.fd, start)
            raise
        self._data_synced = False
        self.size = start + len(buf)
        if start == 0 and batches:
            self.first_batch_timestamp = batches[0][2]
        recent = self.recent
        for pos, last_offset, max_ts, size in batches:
            self.index_batch(start + pos, last_offset, max_ts, size)
            recent.append(BatchPos(start + pos, _BASE.unpack_from(buf, pos)[0], last_offset, size, max_ts))

    def index_batch(self, position: int, last_offset: int, max_timestamp: int, size: int) -> None:
        """Account one batch already in the file (append and recovery share this)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def reset_indexes(self) -> None:
        self.recent.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0

    # -- reading -------------------------------------------------------------------------

    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[BatchPos]:
        """Headers of the complete batches in [start, end), read with chunked preads."""
        end = self.size if end is None else min(end, self.size)
        fd = self.fd
        pos = start
        chunk = b""
        chunk_pos = 0
        while pos + HEADER_SIZE <= end:
            rel = pos - chunk_pos
            if rel < 0 or rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                chunk_pos, rel = pos, 0
                if len(chunk) < HEADER_SIZE:
                    return
            h = HEADER.unpack_from(chunk, rel)
            size = LOG_OVERHEAD + h[1]
            if size < HEADER_SIZE or pos + size > end:
                return
            yield BatchPos(pos, h[0], h[0] + h[6], size, h[8])
            pos += size

    def iter_headers(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the complete batches from `start` on (producer state replay)."""
        end = self.size
        fd = self.fd
        pos = start
        chunk = b""
        chunk_pos = 0
        while pos + HEADER_SIZE <= end:
            rel = pos - chunk_pos
            if rel < 0 or rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                chunk_pos, rel = pos, 0
                if len(chunk) < HEADER_SIZE:
                    return
            h = BatchHeader._make(HEADER.unpack_from(chunk, rel))
            size = LOG_OVERHEAD + h.batch_length
            if size < HEADER_SIZE or pos + size > end:
                return
            yield pos, h
            pos += size

    def checked_batches(self, start: int = 0) -> Iterator[BatchPos]:
        """`iter_batches` for reads: every header must be a plausible batch of this segment
        (magic 2, a size within the segment, offsets inside it and increasing), and the scan
        must reach the end; else CorruptSegment, where `iter_batches` stops silently and a
        read would go on in the next segment, past the damage."""
        end = self.size
        fd = self.fd
        pos = start
        low = self.base_offset
        chunk = b""
        chunk_pos = 0
        while pos < end:
            rel = pos - chunk_pos
            if rel < 0 or rel + HEADER_SIZE > len(chunk):
                chunk = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
                chunk_pos, rel = pos, 0
            if rel + HEADER_SIZE > len(chunk):
                raise CorruptSegment(self.path(LOG_SUFFIX), pos, f"{end - pos} bytes before the end, less than a "
                                     "batch header")
            h = HEADER.unpack_from(chunk, rel)
            size = LOG_OVERHEAD + h[1]
            base, last = h[0], h[0] + h[6]
            if h[3] != 2 or size < HEADER_SIZE or pos + size > end:
                raise CorruptSegment(self.path(LOG_SUFFIX), pos, f"magic {h[3]}, size {size} in {end - pos} bytes")
            if base < low or last < base:
                raise CorruptSegment(self.path(LOG_SUFFIX), pos,
                                     f"offsets {base}..{last} where the next is at least {low}")
            yield BatchPos(pos, base, last, size, h[8])
            low = last + 1
            pos += size

    def find_batch(self, offset: int, start: int | None = None) -> BatchPos | None:
        """The first batch whose last offset is >= `offset` (None if the segment has none).

        Found from the offset index's entry at or before `offset`; if the bytes there are not
        batches of this segment (a damaged index), scanned again from the segment's start,
        with a warning; bytes that do not parse there either raise CorruptSegment."""
        recent = self.recent
        if start is None and recent and recent[0].base_offset <= offset <= recent[-1].last_offset:
            # Walk back from the newest: a consumer at the tail wants the last batch or so.
            found = None
            for b in reversed(recent):
                if b.last_offset < offset:
                    break
                found = b
            return found
        if start is not None:
            return self._find_from(offset, start)
        _, indexed = self.offset_index.lookup(offset)
        if indexed == 0:
            return self._find_from(offset, 0)
        why = None
        try:
            found = self._find_from(offset, indexed)
            if found is not None and (found.base_offset <= offset or found.position > indexed):
                return found
            # The batch at an index entry holds that entry's offset, which is <= `offset`; and
            # nothing from there on is only right if `offset` is past this segment's batches.
            if found is not None:
                why = f"the batch there starts at offset {found.base_offset}, after {offset}"
        except CorruptSegment as e:
            why = str(e)
        rescanned = self._find_from(offset, 0)
        if why is None and rescanned is not None:
            why = f"offset {offset} is in a batch before it"
        if why is not None:
            _index_log.warning(f"index {self.dir}", "The offset index of %s points at position %d for offset %d, "
                               "not at a batch that holds it (%s); read by scanning the segment from its start",
                               self.path(LOG_SUFFIX), indexed, offset, why)
        return rescanned

    def _find_from(self, offset: int, start: int) -> BatchPos | None:
        for batch in self.checked_batches(start):
            if batch.last_offset >= offset:
                return batch
        return None

    def read_first_batch_timestamp(self) -> int | None:
        """`first_batch_timestamp`, read from the file if not known yet (None: no batch)."""
        if self.first_batch_timestamp is None and self.size >= HEADER_SIZE:
            self.first_batch_timestamp = self.read_header(0).max_timestamp
        return self.first_batch_timestamp

    def read_header(self, position: int) -> BatchHeader:
        return BatchHeader._make(HEADER.unpack(os.pread(self.fd, HEADER_SIZE, position)))

    def next_offset(self) -> int:
        """Offset after the last batch (base_offset if empty); also refreshes the tail state."""
        _, position = self.offset_index.last_entry()
        nxt = self.base_offset
        end = position
        for b in self.iter_batches(position):
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp = b.max_timestamp
                self.offset_of_max_timestamp = b.last_offset
            nxt = b.last_offset + 1
            end = b.position + b.size
        if end < self.size:
            raise CorruptIndex(f"{self.log_path}: {self.size - end} bytes after the last whole batch")
        self.bytes_since_last_index_entry = self.size - position
        return nxt

    def largest_timestamp(self) -> int:
        """Max batch timestamp, or the file's mtime when no batch carries one (retention)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return self.log_path.stat().st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return int(time.time() * 1000)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` with timestamp >= target.

        Exact for uncompressed CreateTime batches (their records are walked); for compressed
        batches it answers with the batch base offset and the batch max timestamp.
        """
        _, ts_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(ts_offset, start_offset))
        for b in self.iter_batches(position):
            if b.max_timestamp >= timestamp and b.last_offset >= start_offset:
                return self._refine_by_timestamp(b, timestamp, start_offset)
        return None

    def _refine_by_timestamp(self, b: BatchPos, timestamp: int, start_offset: int) -> tuple[int, int]:
        h = self.read_header(b.position)
        fallback = (max(b.base_offset, start_offset), b.max_timestamp)
        if h.attributes & (ATTR_COMPRESSION_MASK | ATTR_TIMESTAMP_TYPE):
            return fallback
        data = os.pread(self.fd, b.size - HEADER_SIZE, b.position + HEADER_SIZE)
        i = 0
        try:
            for _ in range(h.record_count):
                length, i = _varint(data, i)
                body = i
                i += 1  # attributes
                ts_delta, i = _varint(data, i)
                off_delta, i = _varint(data, i)
                ts, off = h.base_timestamp + ts_delta, b.base_offset + off_delta
                if ts >= timestamp and off >= start_offset:
                    return off, ts
                i = body + length
        except IndexError:
            pass
        return fallback

    # -- truncation, flush, close ------------------------------------------------------

    def truncate_to(self, offset: int) -> int | None:
        """Remove the batches whose last offset is >= `offset`; the first removed base offset.

        None if nothing was removed. A batch holding `offset` is removed whole.
        """
        self.recent.clear()
        self.txn_index.truncate_to(offset)
        batch = self.find_batch(offset)
        if batch is None:
            return None
        os.ftruncate(self.fd, batch.position)
        self.size = batch.position
        if self.size == 0:
            self.first_batch_timestamp = None
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry()
        self.next_offset()  # re-derive max timestamp and index spacing from the tail
        return batch.base_offset

    def on_become_inactive(self) -> None:
        """Roll/close: record the final max timestamp in the time index and write both indexes."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.write_indexes()

    def write_indexes(self, *, fsync: bool = False) -> None:
        self.offset_index.write(fsync=fsync)
        self.time_index.write(fsync=fsync)

    @property
    def data_synced(self) -> bool:
        """The .log's data fdatasynced since its last append."""
        return self._data_synced

    @property
    def durable(self) -> bool:
        """Data fsynced and both index files written and fsynced."""
        oi, ti = self.offset_index, self.time_index
        return self._data_synced and not oi.dirty and not ti.dirty and oi.synced and ti.synced

    def flush(self, *, indexes: bool) -> None:
        """fdatasync the .log; with `indexes`, also write and fsync the index files."""
        if not self._data_synced:
            _fdatasync(self.fd)
            self._data_synced = True
        self.txn_index.flush()
        if indexes:
            self.write_indexes(fsync=True)

    def close(self) -> None:
        self.txn_index.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename_to_deleted(self) -> None:
        self._renamed = True
        for suffix in SEGMENT_SUFFIXES:
            src = self.path(suffix)
            try:
                src.rename(src.with_name(src.name + DELETED_SUFFIX))
            except FileNotFoundError:
                pass

    def delete_files(self) -> None:
        """Close and unlink the segment's files (the `.deleted` names once renamed)."""
        self.close()
        extra = DELETED_SUFFIX if self._renamed else ""
        for suffix in SEGMENT_SUFFIXES:
            self.path(suffix + extra).unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    """Zigzag varint at `i` -> (value, next index)."""
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), i
        shift += 7
