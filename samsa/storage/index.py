"""Index: what the offset and time indexes share (Kafka's AbstractIndex unit).

On-disk format: a flat array of fixed-width entries, big-endian, no header and no padding;
each subclass names its fields (`COLUMNS`, struct/array type codes in file order) and states
the layout in its own opening comment (offset_index.py, time_index.py). One field is the
offset relative to the segment's base offset (`OFFSET_COLUMN`); entries are sorted by it.

How it works: Kafka preallocates the file to `segment.index.bytes` and mmaps it. Samsa keeps
the entries in memory, one native `array` per field, so lookups are `bisect` in C, and writes
the not-yet-written tail to the file on `write()` (at roll, flush and close): after a clean
close the file holds exactly the valid entries, and its size alone says how many there are.
An existing file is loaded lazily, on first use, by splitting its interleaved fields with
strided slices (no per-entry Python). `max_entries` (segment.index.bytes / entry size) is
what makes an index full: the segment then rolls, as in Kafka.

What the base does: the entry arrays and the lazy load, length and fullness, the on-disk
tail (`write`, `dirty`, `synced`), truncation by offset, `reset`, `entries()`. What a
subclass adds: its fields, its lookup, its append rule and its sanity check.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path
from typing import ClassVar

from samsa.storage.errors import CorruptIndex

_SWAP = sys.byteorder == "little"


class AbstractIndex:
    COLUMNS: ClassVar[tuple[str, ...]]  # type codes of the fields, in file order ("i" int32, "q" int64)
    OFFSET_COLUMN: ClassVar[int]  # the field holding offset - base offset
    ENTRY: ClassVar[int]  # bytes per entry (from COLUMNS)
    ENTRY_STRUCT: ClassVar[struct.Struct]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.ENTRY_STRUCT = struct.Struct(">" + "".join(cls.COLUMNS))
        cls.ENTRY = cls.ENTRY_STRUCT.size
        assert all(array(t).itemsize == struct.calcsize(">" + t) for t in cls.COLUMNS)

    def __init__(self, path: Path, base_offset: int, max_entries: int, *, exists: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._columns: tuple[array[int], ...] = ()
        self._set_columns(tuple(array(t) for t in self.COLUMNS))
        self._written = 0  # entries already in the file (a prefix of ours)
        self._file_entries = 0  # entries the file holds now
        self._loaded = not exists
        self._synced = True
        if exists:
            size = path.stat().st_size
            if size % self.ENTRY:
                raise CorruptIndex(f"{path}: size {size} is not a multiple of {self.ENTRY}")
            self._file_entries = self._written = size // self.ENTRY

    def _set_columns(self, columns: tuple[array[int], ...]) -> None:
        """Replace the entry arrays; subclasses bind their named fields here."""
        self._columns = columns

    # -- reading -------------------------------------------------------------------------

    def _load(self) -> None:
        if self._loaded:
            return
        n = self._file_entries
        data = self.path.read_bytes()[: n * self.ENTRY]
        self._set_columns(_split(data, self.COLUMNS, n))
        self._file_entries = self._written = n
        self._loaded = True

    def _last_in_file(self) -> tuple[int, ...] | None:
        """The file's last entry (raw fields), read without loading the rest; None if empty."""
        if self._file_entries == 0:
            return None
        with open(self.path, "rb") as f:
            f.seek((self._file_entries - 1) * self.ENTRY)
            return self.ENTRY_STRUCT.unpack(f.read(self.ENTRY))

    def __len__(self) -> int:
        return len(self._columns[0]) if self._loaded else self._file_entries

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def entries(self) -> list[tuple[int, ...]]:
        """All entries in file order, with the offset field made absolute (tests, tools)."""
        self._load()
        columns: list[list[int]] = [list(c) for c in self._columns]
        base = self.base_offset
        columns[self.OFFSET_COLUMN] = [base + o for o in columns[self.OFFSET_COLUMN]]
        return list(zip(*columns, strict=True))

    # -- writing -------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        self._load()
        offsets = self._columns[self.OFFSET_COLUMN]
        keep = bisect_right(offsets, offset - self.base_offset - 1)
        if keep < len(offsets):
            for column in self._columns:
                del column[keep:]
            self._written = min(self._written, keep)
            self._truncated()

    def reset(self) -> None:
        """Drop every entry (the next write() empties the file)."""
        self._set_columns(tuple(array(t) for t in self.COLUMNS))
        self._loaded = True
        self._written = 0
        self._truncated()

    def _truncated(self) -> None:
        """Called after entries were dropped from the end."""

    @property
    def synced(self) -> bool:
        return self._synced

    @property
    def dirty(self) -> bool:
        n = len(self._columns[0])
        return self._loaded and (self._written != n or self._file_entries != n)

    def write(self, *, fsync: bool = False) -> None:
        """Bring the file to exactly our entries (append the unwritten tail, trim any excess)."""
        if not self.dirty:
            if fsync and not self._synced:
                _fsync_path(self.path)
                self._synced = True
            return
        n = len(self._columns[0])
        tail = _interleave([c[self._written :] for c in self._columns], self.COLUMNS)
        write_index_file(self.path, tail, self._written * self.ENTRY, n * self.ENTRY,
                         self._file_entries * self.ENTRY, fsync)
        self._written = self._file_entries = n
        self._synced = fsync


def _split(data: bytes, types: tuple[str, ...], n: int) -> tuple[array[int], ...]:
    """Interleaved big-endian entries -> one native array per field."""
    if len(set(types)) == 1:  # equal widths: one conversion, then strided slices of the array
        both = array(types[0], data)
        if _SWAP:
            both.byteswap()
        m = len(types)
        return tuple(both[k::m] for k in range(m))
    entry = sum(array(t).itemsize for t in types)
    out = []
    at = 0
    for t in types:
        width = array(t).itemsize
        raw = bytearray(width * n)
        for k in range(width):
            raw[k::width] = data[at + k :: entry]
        column = array(t)
        column.frombytes(raw)
        if _SWAP:
            column.byteswap()
        out.append(column)
        at += width
    return tuple(out)


def _interleave(columns: list[array[int]], types: tuple[str, ...]) -> memoryview:
    """One native array per field -> the entries in the file's byte layout (byte-swaps the
    arrays it is given in place: pass copies)."""
    n = len(columns[0])
    if len(set(types)) == 1:
        m = len(types)
        both = array(types[0], bytes(array(types[0]).itemsize * m * n))
        for k, column in enumerate(columns):
            both[k::m] = column
        if _SWAP:
            both.byteswap()
        return memoryview(both).cast("B")
    entry = sum(c.itemsize for c in columns)
    out = bytearray(entry * n)
    at = 0
    for column in columns:
        if _SWAP:
            column.byteswap()
        raw = column.tobytes()
        width = column.itemsize
        for k in range(width):
            out[at + k :: entry] = raw[k::width]
        at += width
    return memoryview(out)


def write_index_file(path: Path, tail: memoryview, at: int, size: int, file_size: int, fsync: bool) -> None:
    """Write an index's unwritten `tail` at byte `at`, trim the file to `size` if it is longer
    (`file_size`), and fsync if asked."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if tail:
            pwrite_all(fd, tail, at)
        if file_size > size:
            os.ftruncate(fd, size)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd: int, data: memoryview, position: int) -> None:
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
