"""Time index: the `.timeindex` file beside each segment's `.log`.

On-disk format (Kafka's): a flat array of 12-byte entries, big-endian,

    timestamp       int64   the largest batch max timestamp seen in the segment so far
    relativeOffset  int32   offset - segment base offset of the batch holding that timestamp
                            (its last offset: the index is "shallow", batches are not opened)

Timestamps and offsets strictly increase from entry to entry. An entry is added alongside each
offset-index entry when the max timestamp grew, plus one final entry when the segment stops
being active (roll, clean close), so the last entry holds the segment's largest timestamp.

Lookup: the largest entry with timestamp <= target; reading from its offset and scanning batch
headers finds the first batch whose max timestamp >= target. Entries live in memory (native
arrays) and are written like the offset index's, lazily loaded for existing files.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

from samsa.storage.errors import CorruptIndex
from samsa.storage.offset_index import IndexFile

ENTRY_SIZE = 12
_ENTRY = struct.Struct(">qi")
_SWAP = sys.byteorder == "little"


class TimeIndex(IndexFile):
    ENTRY = ENTRY_SIZE

    def __init__(self, path: Path, base_offset: int, max_entries: int, *, exists: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._timestamps = array("q")
        self._offsets = array("i")  # relative
        self._written = 0
        self._file_entries = 0
        self._loaded = not exists
        self._synced = True
        self._last: tuple[int, int] = (-1, base_offset)
        if exists:
            size = path.stat().st_size
            if size % ENTRY_SIZE:
                raise CorruptIndex(f"{path}: size {size} is not a multiple of {ENTRY_SIZE}")
            self._file_entries = self._written = size // ENTRY_SIZE
            if self._file_entries:
                with open(path, "rb") as f:
                    f.seek(size - ENTRY_SIZE)
                    ts, rel = _ENTRY.unpack(f.read(ENTRY_SIZE))
                self._last = (ts, base_offset + rel)

    def _load(self) -> None:
        if self._loaded:
            return
        data = self.path.read_bytes()[: self._file_entries * ENTRY_SIZE]
        n = len(data) // ENTRY_SIZE
        ts = array("q")
        offs = array("i")
        if n:
            # Split the interleaved 8-byte and 4-byte columns with strided slices (no per-entry loop).
            ts_bytes = bytearray(8 * n)
            off_bytes = bytearray(4 * n)
            for k in range(8):
                ts_bytes[k::8] = data[k::ENTRY_SIZE]
            for k in range(4):
                off_bytes[k::4] = data[8 + k :: ENTRY_SIZE]
            ts.frombytes(ts_bytes)
            offs.frombytes(off_bytes)
            if _SWAP:
                ts.byteswap()
                offs.byteswap()
        self._timestamps, self._offsets = ts, offs
        self._file_entries = self._written = n
        self._loaded = True

    def __len__(self) -> int:
        return len(self._offsets) if self._loaded else self._file_entries

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, absolute offset) of the last entry, or (-1, base_offset) when empty."""
        return self._last

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= `timestamp`; (-1, base_offset) if none."""
        self._load()
        i = bisect_right(self._timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._offsets[i]

    def entries(self) -> list[tuple[int, int]]:
        self._load()
        return [(t, self.base_offset + o) for t, o in zip(self._timestamps, self._offsets, strict=True)]

    def sanity_check(self) -> None:
        ts, offset = self._last
        if len(self) and offset < self.base_offset:
            raise CorruptIndex(f"{self.path}: last entry ({ts}, {offset}) is below the base offset")

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if the timestamp grew; False if skipped."""
        if timestamp < 0 or (len(self) and timestamp <= self._last[0]):
            return False
        self._load()
        if not skip_full_check and len(self._offsets) >= self.max_entries:
            return False
        if self._offsets and offset <= self._last[1]:
            raise ValueError(f"time index entry ({timestamp}, {offset}) does not follow the last one")
        self._timestamps.append(timestamp)
        self._offsets.append(offset - self.base_offset)
        self._last = (timestamp, offset)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset`."""
        self._load()
        keep = bisect_right(self._offsets, offset - self.base_offset - 1)
        if keep < len(self._offsets):
            del self._offsets[keep:]
            del self._timestamps[keep:]
            self._written = min(self._written, keep)
            if keep:
                self._last = (self._timestamps[-1], self.base_offset + self._offsets[-1])
            else:
                self._last = (-1, self.base_offset)

    def reset(self) -> None:
        self._timestamps = array("q")
        self._offsets = array("i")
        self._loaded = True
        self._written = 0
        self._last = (-1, self.base_offset)

    def _unwritten(self) -> memoryview:
        """The entries not yet in the file, in the file's byte layout."""
        ts = self._timestamps[self._written :]
        offs = self._offsets[self._written :]
        if _SWAP:
            ts.byteswap()
            offs.byteswap()
        ts_bytes, off_bytes = ts.tobytes(), offs.tobytes()
        out = bytearray(ENTRY_SIZE * len(offs))
        for k in range(8):
            out[k::ENTRY_SIZE] = ts_bytes[k::8]
        for k in range(4):
            out[8 + k :: ENTRY_SIZE] = off_bytes[k::4]
        return memoryview(out)
