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
arrays), are written like the offset index's and loaded lazily for existing files: that part
is index.py's (Kafka's AbstractIndex); this file holds the entry format, the lookup and the
append rule.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from pathlib import Path

from samsa.storage.errors import CorruptIndex
from samsa.storage.index import AbstractIndex


class TimeIndex(AbstractIndex):
    COLUMNS = ("q", "i")  # timestamp, relativeOffset
    OFFSET_COLUMN = 1

    _timestamps: array[int]
    _offsets: array[int]  # relative

    def __init__(self, path: Path, base_offset: int, max_entries: int, *, exists: bool = False) -> None:
        self._last: tuple[int, int] = (-1, base_offset)  # (timestamp, absolute offset), kept without loading
        super().__init__(path, base_offset, max_entries, exists=exists)
        raw = self._last_in_file() if exists else None
        if raw is not None:
            self._last = (raw[0], base_offset + raw[1])

    def _set_columns(self, columns: tuple[array[int], ...]) -> None:
        self._columns = columns
        self._timestamps, self._offsets = columns

    def _truncated(self) -> None:
        if self._offsets:
            self._last = (self._timestamps[-1], self.base_offset + self._offsets[-1])
        else:
            self._last = (-1, self.base_offset)

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


ENTRY_SIZE = TimeIndex.ENTRY  # 12
