"""Offset index: the `.index` file beside each segment's `.log`.

On-disk format (Kafka's): a flat array of 8-byte entries, big-endian,

    relativeOffset  int32   offset - segment base offset (the *last* offset of an indexed batch)
    position        int32   byte position of that batch in the .log file

sorted by both fields. The index is sparse: the segment adds an entry for a batch when more
than `index.interval.bytes` bytes were appended since the previous entry. A lookup returns the
largest entry whose offset is <= the target; the reader then scans batch headers from there.

Kafka preallocates the file to `segment.index.bytes` and mmaps it. Samsa keeps the entries in
memory (two native `array('i')`, searched with `bisect` in C) and writes the not-yet-written
tail to the file on `write()` (at roll, flush and close), so after a clean close the file holds
exactly the valid entries. Entries of an existing file are loaded lazily, on first use.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from samsa.storage.errors import CorruptIndex

ENTRY_SIZE = 8
_ENTRY = struct.Struct(">ii")
_SWAP = sys.byteorder == "little"


class IndexFile(ABC):
    """What the offset and time indexes share: entries kept in memory (`_offsets` has one per
    entry), the first `_written` of them in the file, and whether the file is fsynced."""

    ENTRY: int
    path: Path
    _offsets: array[int]
    _loaded: bool
    _written: int
    _file_entries: int
    _synced: bool

    @abstractmethod
    def _unwritten(self) -> memoryview:
        """The entries not yet in the file, in this index's byte layout."""

    @property
    def synced(self) -> bool:
        return self._synced

    @property
    def dirty(self) -> bool:
        return self._loaded and (self._written != len(self._offsets) or self._file_entries != len(self._offsets))

    def write(self, *, fsync: bool = False) -> None:
        """Bring the file to exactly our entries (append the unwritten tail, trim any excess)."""
        if not self.dirty:
            if fsync and not self._synced:
                _fsync_path(self.path)
                self._synced = True
            return
        n = len(self._offsets)
        write_index_file(self.path, self._unwritten(), self._written * self.ENTRY, n * self.ENTRY,
                         self._file_entries * self.ENTRY, fsync)
        self._written = self._file_entries = n
        self._synced = fsync


class OffsetIndex(IndexFile):
    ENTRY = ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int, *, exists: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._offsets = array("i")  # relative offsets
        self._positions = array("i")
        self._written = 0  # entries already in the file (a prefix of ours)
        self._file_entries = 0  # entries the file holds now
        self._loaded = not exists
        self._synced = True
        if exists:
            size = path.stat().st_size
            if size % ENTRY_SIZE:
                raise CorruptIndex(f"{path}: size {size} is not a multiple of {ENTRY_SIZE}")
            self._file_entries = self._written = size // ENTRY_SIZE

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        data = self.path.read_bytes()[: self._file_entries * ENTRY_SIZE]
        both = array("i", data)
        if _SWAP:
            both.byteswap()
        self._offsets = both[0::2]
        self._positions = both[1::2]
        self._file_entries = self._written = len(self._offsets)
        self._loaded = True

    def __len__(self) -> int:
        return len(self._offsets) if self._loaded else self._file_entries

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self._loaded:
            if self._file_entries == 0:
                return self.base_offset, 0
            with open(self.path, "rb") as f:
                f.seek((self._file_entries - 1) * ENTRY_SIZE)
                rel, pos = _ENTRY.unpack(f.read(ENTRY_SIZE))
            return self.base_offset + rel, pos
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= `offset` as (absolute offset, position); (base, 0) if none."""
        self._load()
        rel = offset - self.base_offset
        rel = min(rel, 0x7FFFFFFF)
        i = bisect_right(self._offsets, rel) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[i], self._positions[i]

    def entries(self) -> list[tuple[int, int]]:
        """All entries as (absolute offset, position) (tests, tools)."""
        self._load()
        return [(self.base_offset + o, p) for o, p in zip(self._offsets, self._positions, strict=True)]

    def sanity_check(self, log_size: int) -> None:
        """Kafka's cheap checks: last entry within the segment's offsets and the .log's bytes."""
        if len(self) == 0:
            return
        offset, position = self.last_entry()
        if offset < self.base_offset or position < 0 or position >= log_size:
            raise CorruptIndex(f"{self.path}: last entry ({offset}, {position}) is outside the segment")

    # -- writing -------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> bool:
        """Add an entry (offset and position larger than the last); False when full."""
        self._load()
        if len(self._offsets) >= self.max_entries:
            return False
        rel = offset - self.base_offset
        if self._offsets and (rel <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(f"index entry ({offset}, {position}) does not follow the last one")
        self._offsets.append(rel)
        self._positions.append(position)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        self._load()
        keep = bisect_right(self._offsets, offset - self.base_offset - 1)
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._positions[keep:]
            self._written = min(self._written, keep)

    def reset(self) -> None:
        self._offsets = array("i")
        self._positions = array("i")
        self._loaded = True
        self._written = 0

    def _unwritten(self) -> memoryview:
        """The entries not yet in the file, in the file's byte layout."""
        tail = array("i", bytes(ENTRY_SIZE * (len(self._offsets) - self._written)))
        tail[0::2] = self._offsets[self._written :]
        tail[1::2] = self._positions[self._written :]
        if _SWAP:
            tail.byteswap()
        return memoryview(tail).cast("B")


def write_index_file(path: Path, tail: memoryview, at: int, size: int, file_size: int, fsync: bool) -> None:
    """Write an index's unwritten `tail` at byte `at`, trim the file to `size` if it is longer
    (`file_size`), and fsync if asked. Shared by the offset and time indexes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if tail:
            _pwrite_all(fd, tail, at)
        if file_size > size:
            os.ftruncate(fd, size)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _pwrite_all(fd: int, data: memoryview, position: int) -> None:
    while data:
        n = os.pwrite(fd, data, position)
        data = data[n:]
        position += n


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
