"""TransactionIndex: the aborted transactions whose abort marker sits in one segment.

On disk, `<base offset>.txnindex` beside the segment's `.log`, Kafka's format byte for byte:
34-byte entries back to back, appended in marker order, big-endian:

    field               type    meaning
    version             int16   0
    producer_id         int64   the producer whose transaction was aborted
    first_offset        int64   the transaction's first offset in this partition
    last_offset         int64   the offset of its ABORT marker (in this segment)
    last_stable_offset  int64   the partition's LSO once the marker is appended (the first
                                offset of the next undecided transaction, else marker + 1)

How it works: the file is created at the first abort (most segments have none), read whole
when the segment is opened (it is small: one entry per aborted transaction), and kept in memory
as a list; appends also go to the file (written, not fsynced: `flush` fsyncs it with the
segment's data). A read_committed fetch asks `collect` for the entries overlapping
[fetch offset, upper bound): Kafka's rule, last_offset >= fetch offset and first_offset <
upper bound. An entry whose last_stable_offset reaches the upper bound ends the search: no
later segment can hold one that overlaps (`complete`).

A torn last entry (a crash mid-write) is dropped when the file is read; entries past the
segment's end (the log was truncated or recovered shorter) are cut by `truncate_to`.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from samsa.storage.index import pwrite_all

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path, *, exists: bool) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._fd: int | None = None
        self._synced = True
        if exists:
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return
            for i in range(len(data) // ENTRY_SIZE):
                version, pid, first, last, lso = ENTRY.unpack_from(data, i * ENTRY_SIZE)
                if version != VERSION or last < first:
                    break  # garbage from here on (a torn or damaged tail): kept out, cut at the next append
                self.entries.append(AbortedTxn(pid, first, last, lso))
            if len(self.entries) * ENTRY_SIZE != len(data):
                self._rewrite()

    @property
    def last_offset(self) -> int:
        """The last marker offset indexed (-1: none)."""
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Index an abort; markers come in offset order (an entry at or before the last is a
        replay of one already indexed, and is ignored)."""
        if txn.last_offset <= self.last_offset:
            return
        pos = len(self.entries) * ENTRY_SIZE
        pwrite_all(self._file(), memoryview(ENTRY.pack(VERSION, *txn)), pos)
        self.entries.append(txn)
        self._synced = False

    def collect(self, fetch_offset: int, upper_bound: int, out: list[AbortedTxn]) -> bool:
        """Add to `out` the entries overlapping [fetch_offset, upper_bound); True when the
        search is complete (no later segment can hold one)."""
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return True
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset`."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        if not self.entries and not self.path.exists():
            return
        fd = self._file()
        os.ftruncate(fd, len(self.entries) * ENTRY_SIZE)
        self._synced = False

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def flush(self) -> None:
        if not self._synced and self._fd is not None:
            os.fsync(self._fd)
        self._synced = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
