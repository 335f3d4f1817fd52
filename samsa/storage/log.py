"""Log: one partition's ordered segments in its `<topic>-<partition>` directory.

How it works: segments are kept sorted by base offset (plus a parallel list of base offsets
for bisect); the last one is active and takes appends. An append assigns offsets by rewriting
each batch's baseOffset in the caller's buffer (not covered by the CRC), rolls to a new segment
when the active one is full or old, and writes the buffer with one write. A read finds the
segment by bisect, the batch holding the offset by index lookup + a short header scan, and
returns a FileSlice (fd, position, size) for sendfile; its end is the end of the segment, the
max_offset position or max_bytes, whichever comes first (a partial last batch is allowed, as
in Kafka: clients drop it). Deleted segments are renamed `.deleted` and their fds kept open
until file.delete.delay.ms has passed at a later retention pass, so an in-flight sendfile
never reads a recycled descriptor.

The leader epoch cache (leader_epoch.py, `leader-epoch-checkpoint`) follows the log: appends
assign an entry when the epoch changes (before the data is written), truncation trims it
from the end, a rising log start offset from the start. When a log is opened the cache is
cut back to the log's range, and rebuilt from the batch headers if its file was missing or
unreadable.

The log also holds its producer state (producer_state.py; `producers`), as Kafka's UnifiedLog
does: the partition updates it as batches and markers go in, the log snapshots it to
`<offset>.snapshot` when a segment rolls and when it closes, rebuilds it on open
(`load_producer_state`: the newest readable snapshot, then the batch headers after it) and after
a truncation, and never lets retention delete a segment at or past the first unstable offset
(an open transaction is never cut). Aborted transactions go into the `.txnindex` of the
segment holding their marker (txn_index.py); `collect_aborted_transactions` answers a
read_committed fetch from them, at no cost for a log that never saw an abort.

Compaction (cleanup.policy=compact) is cleaner.py's: the log hands a snapshot of its inactive
segments to a clean running in a worker thread (`cleaning_job`), and swaps the cleaned segments
in on the event loop with renames only (`finish_clean`): the old ones go the way deleted
segments go (`.deleted`, descriptors kept for file.delete.delay.ms). A truncation into a
clean's range cancels it. Offsets never change, so reads already scan forward over the gaps a
clean leaves, and a truncation into a gap ends the log at the offset asked.

On disk this is Kafka's layout (see segment.py, offset_index.py, time_index.py, txn_index.py);
loading and recovery live in loader.py, the batch checks and offset assignment in validator.py. `Log` is
the on-disk engine behind the PartitionLog protocol (partition_log.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path

from samsa.protocol.batch import BatchHeader
from samsa.storage import cleaner
from samsa.storage.checkpoints import LEADER_EPOCH_CHECKPOINT
from samsa.storage.cleaner import (
    CleanJob,
    CleanStats,
    PreparedClean,
    groups_to_swap,
    remove_clean_files,
    swap_in,
    take_job,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import OffsetOutOfRange, StorageError
from samsa.storage.leader_epoch import LeaderEpochCache, epoch_starts
from samsa.storage.loader import load_log, new_segment
from samsa.storage.partition_log import AppendResult, Clock, FileSlice, read_bytes
from samsa.storage.producer_state import CorruptSnapshot, ProducerStateManager, replay_batch
from samsa.storage.segment import INT32_MAX, LogSegment, parse_segment_file_name, segment_file_name
from samsa.storage.txn_index import AbortedTxn
from samsa.storage.validator import assign_offsets, check_append_sizes, check_follower_offsets

log = logging.getLogger("samsa.storage")

SNAPSHOT_SUFFIX = ".snapshot"

__all__ = ["AppendResult", "Clock", "FileSlice", "Log"]


class Log:
    # The broker's: an append that reaches flush.messages does not fsync (on the event loop);
    # the partition has it done in a worker thread (`flush_fds`, `flushed_to`).
    defer_flush = False

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], *, log_end_offset: int,
                 log_start_offset: int, recovery_point: int, clock: Clock) -> None:
        self.dir = directory
        self.name = directory.name
        self.config = config
        self._clock = clock
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = log_end_offset
        self._lso = log_start_offset
        self._recovery_point = recovery_point
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._cleans: list[CleanJob] = []  # taken by cleaning_job, not finished or abandoned yet
        self._dir_dirty = False  # segment files created, renamed or deleted since the last directory fsync
        self._dir_new = False  # created by Log.create: fsync the directory before the first data is flushed
        self._closed = False
        self.last_flush_ms = self._now_ms()
        self.leader_epochs = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self._reconcile_leader_epochs()
        self.producers = ProducerStateManager()
        self._has_aborts = any(seg.txn_index.entries for seg in segments)
        # Told (offset, fully) after each truncation: `truncate_to` (the new log end offset,
        # False) or `truncate_fully_and_start_at` (the new start, True). A copy of this log being
        # made in another log dir (server/alter_log_dirs.py) follows it with this.
        self.on_truncate: Callable[[int, bool], None] | None = None

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, recovery_point: int = 0, log_start_offset: int = 0,
             clean_shutdown: bool = False, clock: Clock = time.time) -> Log:
        """Load (and after an unclean stop, recover) the log in `directory`, creating it if absent."""
        loaded = load_log(directory, config, recovery_point=recovery_point, log_start_offset=log_start_offset,
                          clean_shutdown=clean_shutdown, now_ms=int(clock() * 1000))
        return cls(directory, config, loaded.segments, log_end_offset=loaded.log_end_offset,
                   log_start_offset=loaded.log_start_offset, recovery_point=loaded.recovery_point, clock=clock)

    @classmethod
    def create(cls, directory: Path, config: LogConfig, *, clock: Clock = time.time, start_offset: int = 0) -> Log:
        """A new empty log in `directory`, which must not exist yet (FileExistsError), starting
        at `start_offset` (a future replica starts where the log it copies starts).

        Only the directory and its first segment's files are created: nothing to read back,
        nothing fsynced here. The caller makes the directory's name durable (LogManager
        fsyncs the log dir once per batch); the first flush fsyncs this directory.
        """
        directory.mkdir()
        now = int(clock() * 1000)
        lg = cls(directory, config, [new_segment(directory, start_offset, config, now)], log_end_offset=start_offset,
                 log_start_offset=start_offset, recovery_point=start_offset, clock=clock)
        lg._dir_new = True
        return lg

    # -- state ---------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @property
    def log_start_offset(self) -> int:
        return self._lso

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self._recovery_point

    @property
    def flush_due(self) -> bool:
        """flush.messages messages or more are not flushed (with `defer_flush`, an append leaves
        them to the caller: `flush_fds` in a worker thread, then `flushed_to`)."""
        return self._leo - self._recovery_point >= self.config.flush_messages

    @property
    def size_in_bytes(self) -> int:
        segments = self._segments
        if len(segments) == 1:  # (most logs: the metrics endpoint asks each one at every scrape)
            return segments[0].size
        return sum([s.size for s in segments])

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"log {self.dir} is closed")

    def _reconcile_leader_epochs(self) -> None:
        """Make the epoch cache match the loaded log: rebuilt from the batch headers when its
        checkpoint was missing or unreadable, else cut to [log start, log end)."""
        cache = self.leader_epochs
        if cache.needs_rebuild and self._leo > self._segments[0].base_offset:
            cache.rebuild(self._scan_epoch_starts())
            log.info("Rebuilt the leader epoch cache of %s from its batches: %s", self.name, cache.entries())
        # Deferred: the next open would cut the same; written before the next append (_write).
        cache.truncate_from_start(self._lso, defer=True)
        cache.truncate_from_end(self._leo, defer=True)

    def _scan_epoch_starts(self) -> Iterator[tuple[int, int]]:
        for seg in self._segments:
            yield from epoch_starts(seg.fd, 0, seg.size)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.index_interval_bytes = config.index_interval_bytes
            seg.set_segment_index_bytes(config.segment_index_bytes)

    # -- append --------------------------------------------------------------------------

    def append(self, buf: bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], *,
               now_ms: int | None = None, log_append_time: bool = False,
               leader_epoch: int | None = None) -> AppendResult:
        """Leader append: assign offsets from the log end offset by rewriting each baseOffset.

        `headers` are the (position in buf, header) pairs of the validated batches, which must
        cover buf back to back. With `log_append_time`, each batch is stamped with now (and
        its CRC re-sealed); with `leader_epoch`, partitionLeaderEpoch is set and, if it is
        new, recorded in the leader epoch cache as starting at the first offset.
        """
        self._check_open()
        now = self._now_ms() if now_ms is None else now_ms
        check_append_sizes(self.name, buf, headers, self.config.segment_bytes, self.config.max_message_bytes)
        first = self._leo
        next_offset, max_ts, offset_of_max, batches = assign_offsets(buf, headers, first, now, log_append_time,
                                                                     leader_epoch)
        if leader_epoch is not None and leader_epoch >= 0:
            self.leader_epochs.assign(leader_epoch, first)
        self._write(buf, batches, next_offset, now)
        return AppendResult(first, next_offset - 1, now if log_append_time else -1, max_ts, offset_of_max)

    def append_as_follower(self, buf: bytes | bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], *,
                           now_ms: int | None = None) -> AppendResult:
        """Replica append: offsets are already set; the first must be the log end offset.

        Each batch's partitionLeaderEpoch that differs from the one before it (and is not -1)
        goes into the leader epoch cache at the batch's base offset.
        """
        self._check_open()
        now = self._now_ms() if now_ms is None else now_ms
        check_append_sizes(self.name, buf, headers, self.config.segment_bytes, None)
        (next_offset, max_ts, offset_of_max, batches), new_epochs = check_follower_offsets(
            self.name, headers, self._leo, self.leader_epochs.latest_epoch())
        for new_epoch, start in new_epochs:
            self.leader_epochs.assign(new_epoch, start)
        self._write(buf, batches, next_offset, now)
        return AppendResult(headers[0][1].base_offset, next_offset - 1, -1, max_ts, offset_of_max)

    def _write(self, buf: bytes | bytearray | memoryview, batches: list[tuple[int, int, int, int]], next_offset: int,
               now: int) -> None:
        if self.leader_epochs.pending:
            self.leader_epochs.flush()
        seg = self._segments[-1]
        cfg = self.config
        if seg.size > 0 and (seg.size + len(buf) > cfg.segment_bytes or now - seg.created_ms > cfg.segment_ms
                             or seg.index_full or next_offset - 1 - seg.base_offset > INT32_MAX):
            seg = self._roll(now)
        seg.append(buf, batches)
        self._leo = next_offset
        if self._leo - self._recovery_point >= cfg.flush_messages and not self.defer_flush:
            self.flush()

    def roll(self, now_ms: int | None = None) -> None:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self._roll(now_ms)

    def _roll(self, now_ms: int | None = None) -> LogSegment:
        self._check_open()
        active = self._segments[-1]
        if active.size == 0:
            return active
        active.on_become_inactive()
        seg = new_segment(self.dir, self._leo, self.config, self._now_ms() if now_ms is None else now_ms)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True
        self._write_producer_snapshot(self._leo)
        return seg

    # -- read ----------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> FileSlice | None:
        """Bytes from the start of the batch holding `offset`, within one segment.

        None at the log end offset or at/after `max_offset` (the slice ends before the batch
        holding max_offset, e.g. the high watermark). The slice is cut at max_bytes, possibly
        mid-batch; if the first batch alone is larger, it is returned whole when
        `min_one_batch`, else the slice is empty (size 0). Raises OffsetOutOfRange outside
        [log_start_offset, log_end_offset].
        """
        self._check_open()
        if offset < self._lso or offset > self._leo:
            raise OffsetOutOfRange(
                f"{self.name}: offset {offset} is outside [{self._lso}, {self._leo}]")
        if offset == self._leo or (max_offset is not None and offset >= max_offset):
            return None
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        i = max(bisect_right(self._bases, offset) - 1, 0)
        while True:
            if i >= len(self._segments):
                return None
            seg = self._segments[i]
            batch = seg.find_batch(offset)
            if batch is not None:
                break
            i += 1
        end = seg.size
        if max_offset is not None and max_offset < self._leo and (
                i + 1 == len(self._bases) or max_offset < self._bases[i + 1]):
            limit = seg.find_batch(max_offset)
            if limit is not None:
                end = limit.position
        if end <= batch.position:
            return None
        size = min(end - batch.position, max_bytes)
        if size < batch.size and max_bytes > 0:
            size = batch.size if min_one_batch else 0
        return FileSlice(seg.fd, batch.position, size, batch.base_offset)

    read_bytes = staticmethod(read_bytes)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp`, or None.

        Exact for uncompressed CreateTime batches; otherwise the first batch whose max
        timestamp reaches it, answered with its base offset and max timestamp.
        """
        self._check_open()
        for seg in self._segments:
            if seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self._lso)
                if found is not None:
                    return found
        return None

    def offset_for_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the largest batch max timestamp: the last offset of the
        (first) batch holding it, from the segments' tail state, no read. None when no batch
        carries a timestamp."""
        self._check_open()
        best = max(self._segments, key=lambda seg: seg.max_timestamp)
        if best.max_timestamp < 0:
            return None
        return best.offset_of_max_timestamp, best.max_timestamp

    def tail_batch_headers(self, max_bytes: int) -> Iterator[BatchHeader]:
        """Headers of the active segment's batches from the last index entry at or before its
        last `max_bytes` bytes (so about `max_bytes`, never more than the segment)."""
        self._check_open()
        seg = self._segments[-1]
        if seg.size == 0:
            return
        start = seg.offset_index.position_at_or_before(max(0, seg.size - max_bytes))
        for b in seg.iter_batches(start):
            yield seg.read_header(b.position)

    # -- retention, deletion, truncation ---------------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None, *, high_watermark: int | None = None) -> int:
        """Apply retention (start offset, retention.bytes, retention.ms); segments deleted.

        Only segments wholly below `high_watermark` (default: the log end offset) go. The
        active segment goes only when expired by time: a new empty one is rolled first.
        Also finishes deletions whose file.delete.delay.ms has passed.
        """
        self._check_open()
        now = self._now_ms() if now_ms is None else now_ms
        self.finish_pending_deletes(now)
        hw = self._leo if high_watermark is None else min(high_watermark, self._leo)
        unstable = self.producers.first_unstable_offset()
        if unstable is not None:  # an open transaction's segments stay
            hw = min(hw, unstable)
        deleted = self._delete_start_offset_breached(now, hw)
        cfg = self.config
        if cfg.delete_enabled:
            if cfg.retention_bytes >= 0:
                excess = self.size_in_bytes - cfg.retention_bytes

                def over_size(seg: LogSegment) -> bool:
                    nonlocal excess
                    if excess - seg.size < 0:
                        return False
                    excess -= seg.size
                    return True

                deleted += self._delete_while(over_size, now, hw, "retention.bytes", allow_active=False)
            if cfg.retention_ms >= 0:
                deleted += self._delete_while(lambda s: now - s.largest_timestamp() > cfg.retention_ms, now, hw,
                                              "retention.ms", allow_active=True)
        return deleted

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to `offset`, drop whole segments below it."""
        self._check_open()
        if offset > self._leo or offset < 0:
            raise OffsetOutOfRange(f"{self.name}: cannot delete records before {offset} (log end {self._leo})")
        if offset > self._lso:
            # The leader epoch checkpoint is written first: if that fails (OSError), nothing
            # has changed, and a retry does it all again.
            self.leader_epochs.truncate_from_start(offset)
            self._lso = offset
            self._delete_start_offset_breached(self._now_ms(), self._leo)
        return self._lso

    def _delete_start_offset_breached(self, now: int, hw: int) -> int:
        bases = self._bases

        def below_start(seg: LogSegment) -> bool:
            i = bisect_right(bases, seg.base_offset)
            return i < len(bases) and bases[i] <= self._lso

        return self._delete_while(below_start, now, hw, "log start offset", allow_active=False)

    def _delete_while(self, predicate: Callable[[LogSegment], bool], now: int, hw: int, reason: str, *,
                      allow_active: bool) -> int:
        doomed: list[LogSegment] = []
        n = len(self._segments)
        for i, seg in enumerate(self._segments):
            last = i + 1 == n
            upper = self._leo if last else self._bases[i + 1]
            if upper > hw or (last and (seg.size == 0 or not allow_active)) or not predicate(seg):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        if len(doomed) == n:
            self._roll(now)
        self._remove_segments(doomed, now, reason)
        if self._bases[0] > self._lso:
            self._lso = self._bases[0]
            self.leader_epochs.truncate_from_start(self._lso)
        self._delete_snapshots(lambda off: off < self._bases[0])
        return len(doomed)

    def _remove_segments(self, doomed: list[LogSegment], now: int, reason: str) -> None:
        gone = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in gone]
        self._bases = [s.base_offset for s in self._segments]
        for seg in doomed:
            seg.rename_to_deleted()
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        self._dir_dirty = True
        log.info("Deleting segments %s of %s (%s)", [s.base_offset for s in doomed], self.name, reason)

    @property
    def has_pending_deletes(self) -> bool:
        return bool(self._pending_deletes)

    def finish_pending_deletes(self, now_ms: int | None) -> None:
        """Close and unlink deleted segments whose delay is over (all when now_ms is None)."""
        keep = []
        for deadline, seg in self._pending_deletes:
            if now_ms is None or now_ms >= deadline:
                seg.delete_files()
            else:
                keep.append((deadline, seg))
        self._pending_deletes = keep

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch holding an offset >= `offset` (a batch straddling it goes whole)."""
        self._check_open()
        if offset < 0:
            raise ValueError("offset must be >= 0")
        if offset >= self._leo:
            return False
        if offset < self._bases[0]:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._now_ms()
        self._cancel_cleans(offset)
        later = [s for s in self._segments if s.base_offset > offset]
        if later:
            self._remove_segments(later, now, f"truncation to {offset}")
        cut = self._segments[-1].truncate_to(offset)
        new_leo = offset if cut is None else min(cut, offset)  # (offset may be in a gap compaction left)
        log.info("Truncated %s to offset %d (log end offset was %d)", self.name, new_leo, self._leo)
        self.leader_epochs.truncate_from_end(new_leo)
        self._leo = new_leo
        self._lso = min(self._lso, new_leo)
        self._recovery_point = min(self._recovery_point, new_leo)
        self._delete_snapshots(lambda off: off > new_leo)
        self._has_aborts = any(seg.txn_index.entries for seg in self._segments)
        if self.on_truncate is not None:
            self.on_truncate(new_leo, False)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop all data; the log restarts empty at `offset` (start = end = recovery point)."""
        self._check_open()
        now = self._now_ms()
        self._cancel_cleans(-1)
        self._remove_segments(list(self._segments), now, f"truncation to start at {offset}")
        seg = new_segment(self.dir, offset, self.config, now)
        self._segments = [seg]
        self._bases = [offset]
        self._leo = self._lso = self._recovery_point = offset
        self.leader_epochs.clear()
        self._delete_snapshots(lambda off: True)
        self._has_aborts = False
        self.producers = ProducerStateManager()
        if self.on_truncate is not None:
            self.on_truncate(offset, True)

    # -- compaction (cleaner.py) ----------------------------------------------------------------

    def cleaning_job(self, first_dirty: int, first_uncleanable: int, now_ms: int) -> CleanJob | None:
        """A snapshot for `cleaner.clean` (run in a worker) of the inactive segments from the log
        start to `first_uncleanable` (rounded down to a segment base); None if no dirty offset
        is in them. Descriptors are duplicated, nothing is read. One clean at a time: every job
        must end in finish_clean or abandon_clean."""
        self._check_open()
        if self._cleans:
            raise StorageError(f"{self.name}: a clean is in progress (finish_clean or abandon_clean it first)")
        producers = {pid: (e.last_offset, e.epoch) for pid, e in self.producers.producers.items()}
        job = take_job(self.dir, self.name, self._segments, max(first_dirty, self._lso), first_uncleanable,
                       producers, self.config, now_ms)
        if job is not None:
            self._cleans.append(job)
        return job

    def finish_clean(self, prepared: PreparedClean) -> CleanStats | None:
        """Swap in what `cleaner.clean` prepared (renames and opens only): each group whose old
        segments are all still here; the others' files are removed (and every later group's
        when some of a skipped group's segments remain). None when nothing was swapped."""
        job = prepared.job
        if job in self._cleans:
            self._cleans.remove(job)
        if self._closed or job.cancelled.is_set():
            self.abandon_clean(prepared)
            return None
        accept = groups_to_swap(self._segments, prepared.groups)
        remove_clean_files(self.dir, [g.base_offset for g in prepared.groups if g not in accept])
        if not accept:
            return None
        now = self._now_ms()
        for g in accept:
            i = self._segments.index(g.old[0])
            for seg in g.old:
                seg.rename_to_deleted()
                self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
            cleaner.phase_hook("old-deleted")
            self._segments[i : i + len(g.old)] = [swap_in(self.dir, g, self.config, now)]
            cleaner.phase_hook("swapped")
        self._bases = [s.base_offset for s in self._segments]
        self._dir_dirty = True
        self._has_aborts = any(seg.txn_index.entries for seg in self._segments)
        stats = CleanStats(len(accept), sum(len(g.old) for g in accept), sum(g.old_size for g in accept),
                           sum(g.size for g in accept), prepared.end_offset)
        log.info("Swapped in %d cleaned segment(s) of %s for %d: %d bytes to %d", stats.groups, self.name,
                 stats.segments_before, stats.bytes_before, stats.bytes_after)
        return stats

    def abandon_clean(self, prepared: PreparedClean | CleanJob) -> None:
        """Give up a clean: remove the files of a prepared one, or cancel a job (a clean running
        it stops with CleanAborted; a job never given to `clean` must still be `close`d)."""
        if isinstance(prepared, CleanJob):
            prepared.cancel()
            if prepared in self._cleans:
                self._cleans.remove(prepared)
            return
        if prepared.job in self._cleans:
            self._cleans.remove(prepared.job)
        remove_clean_files(prepared.job.directory, [g.base_offset for g in prepared.groups])

    def _cancel_cleans(self, offset: int) -> None:
        """Cancel the cleans whose range a truncation to `offset` reaches (-1: all)."""
        for job in [j for j in self._cleans if offset < j.first_uncleanable]:
            job.cancel()
            self._cleans.remove(job)

    # -- transactions: aborted transaction index, producer-state snapshots ---------------------

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its marker (`last_offset`)."""
        self._check_open()
        i = max(bisect_right(self._bases, txn.last_offset) - 1, 0)
        self._segments[i].txn_index.append(txn)
        self._has_aborts = True

    @property
    def has_aborted_transactions(self) -> bool:
        return self._has_aborts

    def aborted_txns_from(self, offset: int) -> list[AbortedTxn]:
        """The aborted transactions whose marker is at or after `offset`, in marker order (what a
        copy of this log that ends at `offset` has yet to index)."""
        if not self._has_aborts:
            return []
        out: list[AbortedTxn] = []
        for seg in self._segments[max(bisect_right(self._bases, offset) - 1, 0):]:
            out.extend(t for t in seg.txn_index.entries if t.last_offset >= offset)
        return out

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping
        [start_offset, upper_bound_offset), from the segment holding start_offset on."""
        if not self._has_aborts:
            return []
        found: list[AbortedTxn] = []
        for seg in self._segments[max(bisect_right(self._bases, start_offset) - 1, 0):]:
            if seg.txn_index.collect(start_offset, upper_bound_offset, found):
                break
        return [(t.producer_id, t.first_offset) for t in found]

    def batch_headers(self, start_offset: int) -> Iterator[tuple[BatchHeader, Callable[[], bytes]]]:
        """Each batch from the one holding `start_offset` to the log end: its header, and a
        function reading the whole batch (control batches are read; data batches never)."""
        self._check_open()
        for seg in self._segments[max(bisect_right(self._bases, start_offset) - 1, 0):]:
            start = 0
            if seg.base_offset < start_offset:
                _, start = seg.offset_index.lookup(start_offset)
            for pos, h in seg.iter_headers(start):
                if h.base_offset + h.last_offset_delta < start_offset:
                    continue
                yield h, partial(os.pread, seg.fd, h.size, pos)

    def load_producer_state(self) -> int:
        """Rebuild `producers` (and any abort missing from a transaction index): the newest
        readable snapshot at or below the log end, then the batches after it; without one,
        the active segment's batches (a log that never rolled since snapshots were taken).
        Returns the number of batches replayed."""
        self._check_open()
        state = None
        start = self._bases[-1]
        for offset in sorted(self._snapshot_offsets(), reverse=True):
            path = self._snapshot_path(offset)
            if offset > self._leo:
                path.unlink(missing_ok=True)  # from past a truncation that did not finish
                continue
            try:
                state = ProducerStateManager.from_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshot) as e:
                log.warning("Ignoring producer state snapshot %s: %s", path, e)
                continue
            start = offset
            break
        state = state if state is not None else ProducerStateManager()
        start = max(start, self._lso)
        n = 0
        for h, read in self.batch_headers(start):
            done = replay_batch(state, h, read)
            if done is not None and done.aborted:
                self.add_aborted_txn(AbortedTxn(*done[:3], done.last_stable_offset))
            n += 1
        self.producers = state
        return n

    def _snapshot_path(self, offset: int) -> Path:
        return self.dir / segment_file_name(offset, SNAPSHOT_SUFFIX)

    def _snapshot_offsets(self) -> list[int]:
        out = []
        for name in os.listdir(self.dir):
            parsed = parse_segment_file_name(name)
            if parsed is not None and parsed[1] == SNAPSHOT_SUFFIX:
                out.append(parsed[0])
        return out

    def _write_producer_snapshot(self, offset: int, *, fsync: bool = False) -> None:
        """`<offset>.snapshot`, written whole under a temporary name then renamed (a torn one
        fails its CRC at load and an older one is used). Only for a log that has producers."""
        if not self.producers.producers:
            return
        path = self._snapshot_path(offset)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(self.producers.to_snapshot())
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        self._dir_dirty = True

    def _delete_snapshots(self, doomed: Callable[[int], bool]) -> None:
        try:
            offsets = self._snapshot_offsets()
        except OSError:
            return
        for offset in offsets:
            if doomed(offset):
                self._snapshot_path(offset).unlink(missing_ok=True)

    # -- flush, close, delete ------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets in [recovery point, up_to) and advance the recovery point.

        Inactive segments also get their index files written and fsynced; the active one's
        indexes need not be durable (recovery rescans from the recovery point's segment).
        """
        self._check_open()
        target = self._leo if up_to is None else min(up_to, self._leo)
        if target > self._recovery_point:
            if self._dir_new:  # the first segment's name, before data in it counts as flushed
                self._dir_dirty = True
                self._dir_new = False
            n = len(self._segments)
            # From the segment holding recovery_point - 1: it may have been flushed while active
            # and rolled since, leaving its index files written but not yet fsynced.
            for i in range(max(bisect_right(self._bases, self._recovery_point - 1) - 1, 0), n):
                seg = self._segments[i]
                if seg.base_offset >= target:
                    break
                seg.flush(indexes=i + 1 < n)
            self._recovery_point = target
        if self._dir_dirty:
            _fsync_dir(self.dir)
            self._dir_dirty = False
        self.last_flush_ms = self._now_ms()

    def flush_fds(self) -> tuple[int, list[int]]:
        """A flush of everything appended so far, done in a worker thread: (the log end offset,
        duplicates of the descriptors of the segments holding [recovery point, it) whose data
        is not known to be synced). The worker fdatasyncs and closes them (log_manager's
        sync_and_close); then `flushed_to(that offset)` on the loop."""
        self._check_open()
        first = max(bisect_right(self._bases, self._recovery_point - 1) - 1, 0)
        return self._leo, [os.dup(seg.fd) for seg in self._segments[first:] if not seg.data_synced and seg.size > 0]

    def flushed_to(self, target: int) -> None:
        """A worker has synced the data below `target` (`flush_fds`): move the recovery point
        there. What the flush also needs and the worker did not do -- the indexes of segments
        rolled since (written and fsynced), the transaction index, a new segment's directory
        entry -- is done here, and none of it is there on most calls."""
        if self._closed:
            return
        target = min(target, self._leo)
        if target > self._recovery_point:
            if self._dir_new:
                self._dir_dirty = True
                self._dir_new = False
            n = len(self._segments)
            for i in range(max(bisect_right(self._bases, self._recovery_point - 1) - 1, 0), n):
                seg = self._segments[i]
                if seg.base_offset >= target:
                    break
                if i + 1 < n:
                    seg.flush(indexes=True)  # (rolled: its data was synced whole by the worker)
                else:
                    seg.txn_index.flush()
            self._recovery_point = target
        if self._dir_dirty:
            _fsync_dir(self.dir)
            self._dir_dirty = False
        self.last_flush_ms = self._now_ms()

    def presync_fds(self, now_ms: int) -> list[int]:
        """Duplicates of the descriptors of the segments whose data `maybe_flush(now_ms)` would
        fdatasync (the caller syncs and closes them in a worker thread; the fdatasync that
        maybe_flush then makes on the loop finds little or nothing left to write)."""
        if self._closed:
            return []
        due = self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms
        n = len(self._segments)
        if due or self._recovery_point < self._bases[-1]:
            first = max(bisect_right(self._bases, self._recovery_point - 1) - 1, 0)
            segs = self._segments[first:n if due else n - 1]
        elif n > 1 and not self._segments[-2].durable:
            segs = [self._segments[-2]]
        else:
            return []
        return [os.dup(seg.fd) for seg in segs if not seg.data_synced and seg.size > 0]

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if flush.ms elapsed with unflushed messages, or rolled segments are not durable yet."""
        if self._closed:
            return False
        if self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        active_base = self._bases[-1]
        if self._recovery_point < active_base:
            self.flush(active_base)
            return True
        if len(self._segments) > 1 and not self._segments[-2].durable:
            self._segments[-2].flush(indexes=True)  # flushed while active, rolled since
            return True
        return False

    def close(self) -> None:
        """Write the active segment's indexes (fsynced) and close every file. No data fsync."""
        if self._closed:
            return
        active = self._segments[-1]
        active.on_become_inactive()
        active.write_indexes(fsync=True)
        active.txn_index.flush()
        self._write_producer_snapshot(self._leo, fsync=True)
        self._cancel_cleans(-1)
        self.finish_pending_deletes(None)
        for seg in self._segments:
            seg.close()
        self._closed = True

    def delete(self, *, keep_fds: bool = False) -> None:
        """Remove the partition directory (renamed `<dir>.<id>-delete` first: a crash midway
        leaves it for the next startup to remove). The log is unusable afterwards.

        File descriptors close now, or with `keep_fds` only at release_files(), so that
        in-flight sendfiles from this log never read a recycled descriptor.
        """
        self._closed = True
        self._cancel_cleans(-1)
        doomed = self.dir.with_name(f"{self.dir.name}.{uuid.uuid4().hex}-delete")
        try:
            os.rename(self.dir, doomed)
        except OSError:
            doomed = self.dir
        shutil.rmtree(doomed, ignore_errors=True)
        if not keep_fds:
            self.release_files()

    def release_files(self) -> None:
        """Close every descriptor of a deleted log (idempotent)."""
        for _, seg in self._pending_deletes:
            seg.close()
        self._pending_deletes = []
        for seg in self._segments:
            seg.close()

    def __repr__(self) -> str:
        return f"Log({self.dir}, start={self._lso}, end={self._leo}, segments={len(self._segments)})"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
