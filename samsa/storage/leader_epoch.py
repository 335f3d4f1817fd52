"""Leader epoch cache: which leader epoch each range of a partition's log was written in.

Kafka's LeaderEpochFileCache (KIP-101, KIP-279). The cache is a short list of
EpochEntry(epoch, start_offset), one per leader epoch that wrote data (or, on the leader,
that will write from the log end offset on), kept strictly increasing in both epoch and
start offset. Epoch E covers [its start offset, the next entry's start offset); the latest
epoch runs to the log end offset. A follower asks the leader for the end offset of its own
latest epoch (OffsetForLeaderEpoch) and truncates its log there, so that diverging tails
left by earlier leaders are removed instead of kept on offsets alone.

How it works:

- `assign(epoch, start)` is called on append, once per epoch change. It does nothing when
  the epoch is already the latest one and starts at or before `start` (the common case: an
  O(1) compare). Otherwise, as in Kafka, it removes from the end every entry that the new
  one contradicts (epoch >= the new epoch or start offset >= the new start offset) and
  appends the new entry.
- `end_offset_for(epoch, log_end_offset)` answers OffsetForLeaderEpoch by bisection.
- `truncate_from_end` / `truncate_from_start` follow the log when it is truncated or its
  start offset moves up; `clear` when the log restarts empty.

Every change is written to the partition directory's `leader-epoch-checkpoint` at once
(atomic replace plus fsyncs, checkpoints.py) before the data it describes is appended, and
nothing is written when a call changes nothing. A missing or unreadable checkpoint leaves
the cache empty with `needs_rebuild` set: the Log then rebuilds it from the batch headers
(`epoch_starts` walks them cheaply) and the log end offset. So the first write over a
missing or unreadable file (a new partition's first leader epoch) skips the fsyncs: if a
crash loses it, the file is missing or unreadable again and the cache is rebuilt from the
batches, which carry the same epochs. That saves two fsyncs per partition of a new topic.
A cache made with no path (the null engine's, null_log.py) lives in memory only.

Nothing is written either when the entries are what the file already holds, and the cuts
made when a log is opened (`defer=True`) are not written at once: the file then only holds
entries the next open cuts again, and `Log` writes them out (`flush`) before it appends
data. So restarting a broker writes no checkpoint for a partition whose leader epoch did
not change (its entry at the log end offset is cut at open and assigned again when it
leads), where it wrote two.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from samsa.protocol.batch import HEADER_SIZE, LOG_OVERHEAD
from samsa.storage.checkpoints import EpochEntry, read_leader_epochs, write_leader_epochs
from samsa.storage.errors import CorruptCheckpoint

log = logging.getLogger("samsa.storage")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
HEADER_SCAN_CHUNK = 64 << 10
# baseOffset int64, batchLength int32, partitionLeaderEpoch int32: the start of every batch header.
_EPOCH_PREFIX = struct.Struct(">qii")


class LeaderEpochCache:
    def __init__(self, path: Path | None, name: str | None = None) -> None:
        self.path = path
        self.name = name if name is not None else (path.parent.name if path is not None else "")
        self._entries: list[EpochEntry] = []
        self.needs_rebuild = False  # the checkpoint was missing or unreadable (until written again)
        self._on_disk: list[EpochEntry] | None = None  # what the file holds (None: missing or unreadable)
        self.pending = False  # a deferred change is not in the file yet (see flush)
        if path is not None:
            self._load(path)

    def _load(self, path: Path) -> None:
        if not path.exists():
            self.needs_rebuild = True
            return
        try:
            on_disk = read_leader_epochs(path)
            for entry in on_disk:
                _check_entry(entry)
                self._assign(entry)
            self._on_disk = on_disk
        except (CorruptCheckpoint, ValueError) as e:
            log.warning("Ignoring leader epoch checkpoint %s (rebuilding it from the log): %s", path, e)
            self._entries = []
            self.needs_rebuild = True

    # -- queries -------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        """All entries, by increasing epoch (and start offset)."""
        return list(self._entries)

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch: the largest epoch <= `requested_epoch`
        and where it ends (the next epoch's start offset, or `log_end_offset` for the latest).

        (-1, -1) when the cache is empty or the requested epoch is below the first cached
        epoch or above the latest one.
        """
        entries = self._entries
        if not entries or requested_epoch < entries[0].epoch or requested_epoch > entries[-1].epoch:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        i = bisect_right(entries, requested_epoch, key=_epoch) - 1
        return entries[i].epoch, entries[i + 1].start_offset

    # -- updates -------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> bool:
        """Record that `epoch` starts at `start_offset`; True (and persisted) if that changed the cache.

        With `defer`, the file is written by the next change or `flush` (before data is
        appended): for the epoch a broker starts leading at its log end offset. Until data
        of that epoch is appended nothing on disk depends on the entry, and a leader assigns
        its epoch again whenever it starts leading (after a restart too)."""
        if not self._update_needed(epoch, start_offset):  # the hot path: nothing new
            return False
        entry = EpochEntry(epoch, start_offset)
        _check_entry(entry)
        self._assign(entry)
        self._persist(defer=defer)
        return True

    def rebuild(self, starts: Iterable[tuple[int, int]]) -> None:
        """Replace the entries by assigning each (epoch, start offset) in turn; persist once."""
        self._entries = []
        for epoch, start_offset in starts:
            if epoch >= 0 and start_offset >= 0 and self._update_needed(epoch, start_offset):
                self._assign(EpochEntry(epoch, start_offset))
        self._persist()

    def copy_from(self, other: LeaderEpochCache) -> None:
        """Take `other`'s entries (a log's copy in another log dir becoming the log), written
        with the next change or `flush`, as a deferred change is."""
        self._entries = other.entries()
        self._persist(defer=True)

    def truncate_from_end(self, end_offset: int, *, defer: bool = False) -> bool:
        """Remove the entries starting at or after `end_offset` (the log was truncated there).

        With `defer`, the file is not written now (only by a later change or `flush`): for
        the cut made when the log is opened, which the next open would make again."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        removed = self._remove_from_end(lambda e: e.start_offset >= end_offset)
        log.debug("%s: removed leader epochs %s at truncation to %d", self.name, removed, end_offset)
        self._persist(defer=defer)
        return True

    def truncate_from_start(self, start_offset: int, *, defer: bool = False) -> bool:
        """The log now starts at `start_offset`: drop the entries wholly below it; the epoch
        holding it stays, with its start offset moved up to `start_offset`. (`defer`: as
        for truncate_from_end.)"""
        entries = self._entries
        kept = bisect_right(entries, start_offset, key=_start)  # entries[:kept] start <= start_offset
        if kept == 0 or (kept == 1 and entries[0].start_offset == start_offset):
            return False
        self._entries = [EpochEntry(entries[kept - 1].epoch, start_offset), *entries[kept:]]
        try:
            self._persist(defer=defer)
        except OSError:
            self._entries = entries  # the file is as it was: so is the cache (a retry does it all again)
            raise
        return True

    def flush(self) -> None:
        """Write a deferred change now (durably): before data is appended after it."""
        if self.pending:
            self._persist()

    def clear(self) -> None:
        """Remove every entry (the log restarts empty)."""
        self._entries = []
        self._persist()

    # -- internals -----------------------------------------------------------------------

    def _update_needed(self, epoch: int, start_offset: int) -> bool:
        entries = self._entries
        if not entries:
            return True
        latest = entries[-1]
        return epoch != latest.epoch or start_offset < latest.start_offset

    def _assign(self, entry: EpochEntry) -> None:
        removed = self._remove_from_end(lambda e: e.epoch >= entry.epoch or e.start_offset >= entry.start_offset)
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            # Removing an entry that starts where the new one does is routine (no data was written in it).
            log.warning("%s: new leader epoch entry %s removed conflicting entries %s",
                        self.name, entry, removed)
        self._entries.append(entry)

    def _remove_from_end(self, doomed: Callable[[EpochEntry], bool]) -> list[EpochEntry]:
        entries = self._entries
        removed = []
        while entries and doomed(entries[-1]):
            removed.append(entries.pop())
        return removed

    def _persist(self, *, defer: bool = False) -> None:
        if self.path is None:
            self.needs_rebuild = False
            self.pending = False
            return
        if self._entries == self._on_disk:
            self.pending = False
            return
        if defer:
            self.pending = True
            return
        write_leader_epochs(self.path, self._entries, sync=not self.needs_rebuild)
        self._on_disk = list(self._entries)
        self.needs_rebuild = False  # the file now says what the cache holds
        self.pending = False

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path or self.name}, {self._entries})"


def epoch_starts(fd: int, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(epoch, base offset) of each batch in file bytes [start, end) whose leader epoch differs
    from the previous batch's; batches without an epoch (-1) are skipped.

    Reads only what it needs of each header: headers are parsed out of 64 KiB chunks, and a
    batch larger than that costs one pread for the next header.
    """
    pos = start
    chunk = b""
    chunk_pos = 0
    previous = UNDEFINED_EPOCH
    while pos + HEADER_SIZE <= end:
        rel = pos - chunk_pos
        if rel < 0 or rel + _EPOCH_PREFIX.size > len(chunk):
            chunk = os.pread(fd, min(HEADER_SCAN_CHUNK, end - pos), pos)
            chunk_pos, rel = pos, 0
            if len(chunk) < _EPOCH_PREFIX.size:
                return
        base_offset, length, epoch = _EPOCH_PREFIX.unpack_from(chunk, rel)
        if LOG_OVERHEAD + length < HEADER_SIZE:
            return
        if epoch != previous and epoch >= 0:
            yield epoch, base_offset
            previous = epoch
        pos += LOG_OVERHEAD + length


def _check_entry(entry: EpochEntry) -> None:
    if entry.epoch < 0 or entry.start_offset < 0:
        raise ValueError(f"invalid leader epoch entry {entry}")


def _epoch(entry: EpochEntry) -> int:
    return entry.epoch


def _start(entry: EpochEntry) -> int:
    return entry.start_offset
