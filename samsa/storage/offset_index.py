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
exactly the valid entries. Entries of an existing file are loaded lazily, on first use. That
machinery is shared with the time index (index.py, Kafka's AbstractIndex); this file holds
the entry format, the lookup and the append rule.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

from samsa.storage.errors import CorruptIndex
from samsa.storage.index import AbstractIndex


class OffsetIndex(AbstractIndex):
    COLUMNS = ("i", "i")  # relativeOffset, position
    OFFSET_COLUMN = 0

    _offsets: array[int]  # relative offsets
    _positions: array[int]

    def _set_columns(self, columns: tuple[array[int], ...]) -> None:
        self._columns = columns
        self._offsets, self._positions = columns

    # -- reading -------------------------------------------------------------------------

    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self._loaded:
            raw = self._last_in_file()
            if raw is None:
                return self.base_offset, 0
            return self.base_offset + raw[0], raw[1]
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

    def position_at_or_before(self, position: int) -> int:
        """The largest indexed position <= `position` (0 if none): where a header scan that must
        cover the bytes from `position` on can start."""
        self._load()
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

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


ENTRY_SIZE = OffsetIndex.ENTRY  # 8
