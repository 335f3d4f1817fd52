"""The log cleaner: compaction of `cleanup.policy=compact` logs (Kafka's LogCleaner unit).

A compacted log keeps, for each key, at least its latest record. The cleaner rewrites the
inactive segments of a log without the records a later record of the same key supersedes,
keeping every remaining record at its original offset (offsets never change: a read at an
offset whose record is gone gets the next batch). How one clean goes:

1. `cleanable_range` (event loop, memory only): the checkpointed first dirty offset (reset to
   the log start when it is below it or past the log end), the first uncleanable offset (the
   smallest of the last stable offset the caller passes, the active segment's base, and the
   base of the first segment with a record younger than min.compaction.lag.ms; rounded down
   to a segment base), the clean and dirty bytes, their ratio (due above
   min.cleanable.dirty.ratio) and whether max.compaction.lag.ms makes it due anyway.
2. `Log.cleaning_job` (event loop): a `CleanJob` snapshot: the inactive segments from the log
   start to the first uncleanable offset (objects, plus a dup of each .log descriptor so the
   files stay readable whatever retention does), every aborted transaction from the
   transaction indexes, each producer's last data batch offset and epoch, the config.
3. `clean` (worker thread, files only):
   a. the offset map over the dirty range [first dirty, first uncleanable): key -> latest
      offset, skipping control batches and aborted transactions' batches. When the map fills,
      the clean ends at the end of the last segment it covered whole (several passes then
      finish a key set larger than the map); if not even the first dirty segment fits, at
      the last batch it covered whole (as Kafka; later records of that segment are kept).
   b. the segments from the log start to that end, grouped so that each group fits one
      segment (segment.bytes, segment.index.bytes for each index, relative offsets in int32):
      Kafka's groupSegmentsBySize.
   c. each group recopied into `<base>.log.cleaned` (+ `.index`, `.timeindex`, `.txnindex`
      `.cleaned`), base = its first segment's: clean_filter.py decides per batch (below).
   d. every file fsynced, then renamed `.cleaned` -> `.swap`, the last group first and each
      group's .log first, and the directory fsynced. The result: a `PreparedClean`.
4. `Log.finish_clean` (event loop, renames and opens only): per group, in offset order, if its
   old segments are all still in the log (the same objects), they are renamed `.deleted` (their
   descriptors stay open until file.delete.delay.ms, for in-flight sendfiles) and the `.swap`
   files take their names (the .log first); else the group's swap files are removed, and so
   are every later group's unless none of the skipped group's segments is left (a later
   group's clean may have dropped a tombstone whose key still has an older value in the
   skipped group). A truncation into the job's range while it runs cancels it.

What is kept (Kafka's rules, MemoryRecords.filterTo and the cleaner's RecordFilter):

- a record is kept iff its key has no later offset in the map, with a value or with the
  batch's delete horizon not yet passed; a record without a key is dropped (Kafka's cleaner
  counts it invalid); a record at or past the map's end is kept;
- aborted transactions' batches lose every record (the transaction index says which); a
  COMMIT marker goes once no batch of its transaction is left, an ABORT marker once no batch
  of its transaction was met in the pass (its transaction index entry goes with the first
  such pass); a marker that may go first gets a delete horizon, and goes at the first clean
  after it;
- a tombstone (null value) first gets a delete horizon: the clean that first keeps it sets the
  batch's attribute bit 6 and stores now + delete.retention.ms in its baseTimestamp, every
  record's timestamp delta rewritten against it so clients read the same timestamps (KIP-534);
  a clean after the horizon drops it;
- a batch whose records are all kept (and needs no new horizon) is copied byte for byte; one
  with records dropped is rebuilt with the same base offset, last offset delta, producer id,
  epoch, base sequence, leader epoch and attributes, compressed again with its codec, CRC
  recomputed (baseTimestamp: the horizon if it has one, else the first kept record's, as
  Kafka's builder); an emptied batch goes, except a producer's last data batch (or, for a
  producer without one, its marker of the current epoch) and the last batch before the
  clean's end, which stay as a 61-byte header without records (so producer state rebuilt from
  the log keeps its sequence and epoch, and the end offset stays known).

Crash safety (loader.py): at load `.cleaned` files are deleted; `.swap` files are completed:
the segment files whose base offset lies in [smallest swap base, largest swap end) are
deleted, then the swaps renamed (the .log first; an index `.swap` left beside its `.log` is
renamed too). A `.swap` at or above the smallest `.cleaned` base is deleted instead: with the
renames of step 3d in that order, the swaps of a clean become valid all at once, when its last
`.cleaned` file is renamed. Swap files that will not be swapped in are removed the same way,
the lowest `.log.swap` renamed `.log.cleaned` first (`remove_clean_files`). A kill at any
point so leaves the log as it was before the clean or as after it.

Where Samsa differs from Kafka: a map that fills stops at a segment boundary rather than mid
segment (unless the first segment alone overflows it); the map's hash is keyed SipHash-128,
not MD5; the emptied last batch kept is the last before the clean's end rather than before
the first uncleanable offset; all groups are written before any is swapped (the disk needs
room for the whole cleaned copy); max.compaction.lag.ms measures a segment loaded from disk
by its largest timestamp until its first batch's is known (no read on the event loop);
legacy (magic < 2) rules do not apply (Samsa stores v2 only).
"""

from __future__ import annotations

import logging
import os
import threading
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from samsa.protocol.batch import ATTR_CONTROL, HEADER
from samsa.storage.clean_filter import (
    CLEANED_SUFFIX,
    IO_CHUNK,
    SWAP_SUFFIX,
    BatchFilter,
    CleanedSegment,
    CorruptBatch,
    ReadBuffer,
    TxnTracker,
    marker_type,
    read_batches,
    records_section,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import StorageError
from samsa.storage.offset_map import OffsetMap
from samsa.storage.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from samsa.storage.txn_index import AbortedTxn

log = logging.getLogger("samsa.storage")

# The order files of one segment are renamed in: the .log first into .swap (a .swap index
# never exists without its .log.swap), the .log last out of it.
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


class CleanerError(StorageError):
    """The clean cannot be done (a corrupt batch in the range, ...); the log is untouched."""

    kafka_error = None

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CleanAborted(StorageError):
    """The clean was stopped (`stop` set, or its log truncated, closed or deleted)."""

    kafka_error = None


# -- what to clean --------------------------------------------------------------------------

@dataclass(frozen=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    dirty_ratio: float
    max_lag_due: bool  # max.compaction.lag.ms has passed for some dirty segment
    checkpoint_reset: bool  # the first dirty offset given was out of the log: reset to its start
    min_cleanable_dirty_ratio: float

    @property
    def due(self) -> bool:
        """Whether the log should be cleaned now (Kafka: ratio above the minimum, or overdue)."""
        return self.dirty_bytes > 0 and (self.max_lag_due or self.dirty_ratio > self.min_cleanable_dirty_ratio)


class CleanableLog(Protocol):
    """What `cleanable_range` reads of a Log (log.py imports this module, not the reverse)."""

    @property
    def segments(self) -> tuple[LogSegment, ...]: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def config(self) -> LogConfig: ...


def cleanable_range(log: CleanableLog, first_dirty: int, *, last_stable_offset: int, now_ms: int) -> CleanableRange:
    """Kafka's LogCleanerManager.cleanableOffsets and dirty ratio, from memory only.
    `last_stable_offset`: min(LSO, high watermark)."""
    segs = log.segments
    bases = [s.base_offset for s in segs]
    start, end = log.log_start_offset, log.log_end_offset
    reset = first_dirty < start or first_dirty > end
    if reset:
        first_dirty = start
    cfg = log.config
    limit = min(last_stable_offset, bases[-1])
    first = max(bisect_right(bases, first_dirty) - 1, 0)
    dirty_inactive = segs[first:-1]
    if cfg.min_compaction_lag_ms > 0:
        for s in dirty_inactive:
            largest = s.max_timestamp if s.max_timestamp >= 0 else s.created_ms
            if largest > now_ms - cfg.min_compaction_lag_ms:
                limit = min(limit, s.base_offset)
                break
    first_uncleanable = bases[max(bisect_right(bases, limit) - 1, 0)]
    clean_bytes = dirty_bytes = 0
    for i, s in enumerate(segs):
        upper = bases[i + 1] if i + 1 < len(segs) else end + 1
        if s.base_offset < first_dirty:
            clean_bytes += s.size
        if s.base_offset < first_uncleanable and upper > first_dirty:
            dirty_bytes += s.size
    total = clean_bytes + dirty_bytes
    # (a segment whose first batch was never read: its largest timestamp, a later one)
    stamps = [t for s in dirty_inactive
              if (t := s.first_batch_timestamp if s.first_batch_timestamp is not None else s.max_timestamp) > 0]
    due = bool(stamps) and min(stamps) < now_ms - cfg.max_compaction_lag_ms
    return CleanableRange(first_dirty, max(first_dirty, first_uncleanable), clean_bytes, dirty_bytes,
                          dirty_bytes / total if total else 0.0, due, reset, cfg.min_cleanable_dirty_ratio)


# -- the job --------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobSegment:
    segment: LogSegment  # (its identity only: finish_clean checks it is still in the log)
    base_offset: int
    next_base: int  # the next segment's base offset
    fd: int  # a dup of its .log descriptor, owned by the job
    size: int
    index_bytes: int
    time_index_bytes: int
    path: str


@dataclass
class CleanJob:
    """What `clean` needs, taken on the event loop by `Log.cleaning_job`; consumed by `clean`
    (which closes its descriptors) or released with `close`."""

    directory: Path
    name: str
    segments: tuple[JobSegment, ...]  # the log start's segment .. the last before first_uncleanable
    first_dirty: int
    first_uncleanable: int
    aborted: tuple[AbortedTxn, ...]  # every aborted transaction indexed in the log, by first offset
    producers: Mapping[int, tuple[int, int]]  # producer id -> (last data batch's last offset or -1, epoch)
    config: LogConfig
    now_ms: int
    bases: tuple[int, ...] = ()  # the segments' base offsets (kept after close: cancel needs them)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        """Close the job's descriptors (idempotent)."""
        for js in self.segments:
            try:
                os.close(js.fd)
            except OSError:
                pass
        object.__setattr__(self, "segments", ())

    def cancel(self) -> None:
        """Stop the clean (its log was truncated into its range, closed or deleted) and remove
        whatever it wrote so far; the worker removes what it writes after this."""
        self.cancelled.set()
        remove_clean_files(self.directory, self.bases)


def take_job(directory: Path, name: str, segments: Sequence[LogSegment], first_dirty: int, first_uncleanable: int,
             producers: Mapping[int, tuple[int, int]], config: LogConfig, now_ms: int) -> CleanJob | None:
    """The job for `Log.cleaning_job` (the log's segments, the last one active); None when
    no inactive segment holds an offset in [first_dirty, first_uncleanable)."""
    bases = [s.base_offset for s in segments]
    n = 0  # segments wholly below first_uncleanable, the active one never
    while n + 1 < len(segments) and bases[n + 1] <= first_uncleanable:
        n += 1
    if n == 0:
        return None
    upper = bases[n]
    first_dirty = max(first_dirty, bases[0])
    if first_dirty >= upper:
        return None
    aborted = sorted((t for s in segments for t in s.txn_index.entries), key=lambda t: t.first_offset)
    taken: list[JobSegment] = []
    try:
        for i in range(n):
            s = segments[i]
            taken.append(JobSegment(s, s.base_offset, bases[i + 1], os.dup(s.fd), s.size,
                                    len(s.offset_index) * s.offset_index.ENTRY,
                                    len(s.time_index) * s.time_index.ENTRY, str(s.log_path)))
    except OSError:
        for js in taken:
            os.close(js.fd)
        raise
    return CleanJob(directory, name, tuple(taken), first_dirty, upper, tuple(aborted), dict(producers), config,
                    now_ms, tuple(js.base_offset for js in taken))


# -- the result -----------------------------------------------------------------------------

@dataclass(frozen=True)
class CleanedGroup:
    base_offset: int
    old: tuple[LogSegment, ...]  # the segments it replaces, in order
    old_size: int
    size: int
    next_offset: int  # after its last batch (its base offset if it is empty)
    first_batch_timestamp: int | None
    files: tuple[str, ...]  # the suffixes it has (.log, .index, .timeindex, maybe .txnindex)


@dataclass
class PreparedClean:
    job: CleanJob
    groups: list[CleanedGroup]
    first_dirty: int
    end_offset: int  # the next first dirty offset (for the cleaner-offset-checkpoint)
    bytes_read: int
    bytes_written: int
    records_read: int
    records_removed: int
    batches_removed: int
    map_entries: int
    map_utilization: float  # entries / slots
    map_full: bool  # the map filled before the first uncleanable offset


@dataclass(frozen=True)
class CleanStats:
    """What `Log.finish_clean` swapped in."""

    groups: int
    segments_before: int
    bytes_before: int
    bytes_after: int
    end_offset: int


# -- the clean --------------------------------------------------------------------------------

def _no_throttle(n: int) -> None:
    pass


def _no_phase(phase: str) -> None:
    pass


# Called at each named phase of a clean; crash-safety tests set it to kill the process there:
# map-built, segment-recopied (a group's output half written), cleaned (all written),
# swap-renamed (after each group's renames), and in Log.finish_clean old-deleted (a group's
# old segments renamed), swap-log-renamed (its .log swapped in, not its indexes), swapped.
phase_hook: Callable[[str], None] = _no_phase


class _Progress:
    def __init__(self, throttle: Callable[[int], None], stop: threading.Event | None,
                 cancelled: threading.Event) -> None:
        self.throttle = throttle
        self.stop = stop
        self.cancelled = cancelled
        self.bytes_read = 0
        self.bytes_written = 0

    def read(self, n: int) -> None:
        self.bytes_read += n
        self.throttle(n)

    def wrote(self, n: int) -> None:
        self.bytes_written += n
        self.throttle(n)

    def check(self) -> None:
        if self.cancelled.is_set() or (self.stop is not None and self.stop.is_set()):
            raise CleanAborted("the clean was stopped")


def clean(job: CleanJob, offset_map: OffsetMap, *, throttle: Callable[[int], None] = _no_throttle,
          stop: threading.Event | None = None, read_buffer_size: int = IO_CHUNK) -> PreparedClean:
    """Clean the job's log into `.swap` files (see the module docstring). Runs in a worker
    thread and touches only files; closes the job's descriptors. CleanerError (a corrupt
    batch: the log untouched) or CleanAborted, each after removing what it wrote. Segments
    are read `read_buffer_size` bytes at a time (more for a larger batch)."""
    progress = _Progress(throttle, stop, job.cancelled)
    outputs: list[CleanedSegment] = []
    buffer = ReadBuffer(max(read_buffer_size, 4096))
    try:
        try:
            end, last_batch, full = _build_offset_map(job, offset_map, progress, buffer)
            segments = [js for js in job.segments if js.base_offset < end]
            groups = group_segments_by_size(segments, job.config.segment_bytes, job.config.segment_index_bytes)
            filt = BatchFilter(offset_map, end, last_batch, job.producers, job.now_ms,
                               job.config.delete_retention_ms, TxnTracker(list(job.aborted)))
            phase_hook("map-built")
            cleaned = [_clean_group(job, group, filt, progress, buffer, outputs) for group in groups]
            phase_hook("cleaned")
            _rename_to_swap(job, outputs)
        except CorruptBatch as e:
            raise CleanerError(str(e)) from None
    except BaseException:
        for out in outputs:
            out.close()
        remove_clean_files(job.directory, [out.base_offset for out in outputs])
        raise
    finally:
        job.close()
    st = filt.stats
    prepared = PreparedClean(job, cleaned, job.first_dirty, end, progress.bytes_read, progress.bytes_written,
                             st.records_read, st.records_removed, st.batches_removed, offset_map.size,
                             offset_map.size / offset_map.slots, full)
    log.debug("Cleaned %s: offsets [%d, %d) dirty, %d segments into %d, %d of %d records removed, %.1f MB read, "
             "%.1f MB written, offset map %.0f%% full", job.name, job.first_dirty, end, len(segments), len(cleaned),
             st.records_removed, st.records_read, progress.bytes_read / 1e6, progress.bytes_written / 1e6,
             100 * prepared.map_utilization)
    return prepared


def _build_offset_map(job: CleanJob, offset_map: OffsetMap, progress: _Progress,
                      buffer: ReadBuffer) -> tuple[int, int, bool]:
    """Fill the map from the dirty range: (the clean's end offset, the last offset of the last
    batch below it or -1, whether the map filled)."""
    offset_map.clear()
    start = job.first_dirty
    txns = TxnTracker([t for t in job.aborted if t.last_offset >= start and t.first_offset < job.first_uncleanable])
    whole_end, whole_last = -1, -1  # the end of the last segment mapped whole, its last batch
    batch_last = -1  # the last batch mapped whole
    for js in job.segments:
        if js.next_base <= start:
            continue
        for h, batch in read_batches(js.fd, js.size, js.path, buffer, js.base_offset, on_read=progress.read):
            progress.check()
            last = h.base_offset + h.last_offset_delta
            if last < start:
                continue
            if h.attributes & ATTR_CONTROL:
                txns.on_marker(h, marker_type(h, batch))
            elif not txns.on_batch(h) and h.record_count:
                data = records_section(h, batch)
                try:
                    _, full = offset_map.add_records(data, h.record_count, h.base_offset, start)
                except ValueError as e:
                    raise CorruptBatch(f"{js.path}: batch at offset {h.base_offset}: {e}") from None
                if full:
                    if whole_end >= 0:
                        return whole_end, whole_last, True
                    if batch_last >= start:
                        return batch_last + 1, batch_last, True
                    raise CleanerError(f"{job.name}: the offset map holds {offset_map.limit} keys, fewer than the "
                                       f"batch at offset {h.base_offset} has: raise log.cleaner.dedupe.buffer.size")
            batch_last = last
        whole_end, whole_last = js.next_base, batch_last
    return job.first_uncleanable, whole_last, False


def group_segments_by_size(segments: Sequence[JobSegment], max_size: int, max_index_size: int
                           ) -> list[list[JobSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose total size, offset index size
    and time index size each fit, and whose offsets stay within int32 of the group's base."""
    groups: list[list[JobSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size, index_size, time_size = segments[i].size, segments[i].index_bytes, segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            s = segments[i]
            if (size + s.size > max_size or index_size + s.index_bytes > max_index_size
                    or time_size + s.time_index_bytes > max_index_size
                    or (s.size > 0 and s.next_base - 1 - group[0].base_offset > INT32_MAX)):
                break
            group.append(s)
            size, index_size, time_size = size + s.size, index_size + s.index_bytes, time_size + s.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def _clean_group(job: CleanJob, group: list[JobSegment], filt: BatchFilter, progress: _Progress, buffer: ReadBuffer,
                 outputs: list[CleanedSegment]) -> CleanedGroup:
    out = CleanedSegment(job.directory, group[0].base_offset, job.config)
    outputs.append(out)
    for js in group:
        for h, batch in read_batches(js.fd, js.size, js.path, buffer, js.base_offset, on_read=progress.read):
            progress.check()
            data, txn = filt.filter(h, batch)
            if txn is not None:
                out.aborted.append(txn)
            if data is not None:
                max_ts = h.max_timestamp if data is batch else HEADER.unpack_from(data)[8]
                out.append(data, h.base_offset + h.last_offset_delta, max_ts, progress.wrote)
        out.flush(progress.wrote)
        phase_hook("segment-recopied")
    out.finish(os.fstat(group[-1].fd).st_mtime_ns, progress.wrote)
    files = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX) + ((TXN_INDEX_SUFFIX,) if out.aborted else ())
    return CleanedGroup(out.base_offset, tuple(js.segment for js in group), sum(js.size for js in group), out.size,
                        out.next_offset, out.first_batch_timestamp, files)


def _rename_to_swap(job: CleanJob, outputs: list[CleanedSegment]) -> None:
    """`.cleaned` -> `.swap`, the last group first and each group's .log first: until the
    first group's last index is renamed, a `.cleaned` file lies at or below every `.swap`, and
    the loader discards them all (the set of swaps becomes valid at once)."""
    for out in reversed(outputs):
        if job.cancelled.is_set():
            raise CleanAborted("the clean was cancelled")
        for suffix in (LOG_SUFFIX, *INDEX_SUFFIXES):
            src = _path(job.directory, out.base_offset, suffix, CLEANED_SUFFIX)
            if suffix == TXN_INDEX_SUFFIX and not out.aborted:
                continue
            os.rename(src, _path(job.directory, out.base_offset, suffix, SWAP_SUFFIX))
        phase_hook("swap-renamed")
    fsync_dir(job.directory)
    if job.cancelled.is_set():  # (a truncation may have removed swaps before they existed)
        raise CleanAborted("the clean was cancelled")


# -- swapping in (event loop), removing ----------------------------------------------------------

def _path(directory: Path, base_offset: int, suffix: str, extra: str = "") -> Path:
    return directory / (segment_file_name(base_offset, suffix) + extra)


def groups_to_swap(segments: Sequence[LogSegment], groups: Sequence[CleanedGroup]) -> list[CleanedGroup]:
    """The groups `Log.finish_clean` may swap into a log whose segments are now `segments` (the
    last one active): each whose old segments are all there, in a row and inactive, until a
    group some of whose segments are gone but not all (what is left of it stays uncleaned, so
    a later group, which may have dropped a tombstone for a key with an older value in it, may
    not go in). A pure decision."""
    position = {id(s): i for i, s in enumerate(segments)}
    last = len(segments) - 1
    accept = []
    for g in groups:
        first = position.get(id(g.old[0]), -1)
        if first >= 0 and first + len(g.old) - 1 < last and all(
                position.get(id(s)) == first + k for k, s in enumerate(g.old)):
            accept.append(g)
        elif any(id(s) in position for s in g.old):
            break
    return accept


def swap_in(directory: Path, group: CleanedGroup, config: LogConfig, now_ms: int) -> LogSegment:
    """Rename a group's `.swap` files to segment files (its old segments already renamed
    `.deleted`), the .log first (an index `.swap` beside a `.log` and no `.log.swap` is
    renamed by the loader), and open the new segment. Renames and small reads only."""
    os.rename(_path(directory, group.base_offset, LOG_SUFFIX, SWAP_SUFFIX), _path(directory, group.base_offset,
                                                                                  LOG_SUFFIX))
    phase_hook("swap-log-renamed")
    for suffix in INDEX_SUFFIXES:
        if suffix in group.files:
            os.rename(_path(directory, group.base_offset, suffix, SWAP_SUFFIX), _path(directory, group.base_offset,
                                                                                      suffix))
    seg = LogSegment.open(directory, group.base_offset, index_interval_bytes=config.index_interval_bytes,
                          segment_index_bytes=config.segment_index_bytes, now_ms=now_ms, durable=True)
    seg.first_batch_timestamp = group.first_batch_timestamp
    return seg


def remove_clean_files(directory: Path, bases: Sequence[int]) -> None:
    """Unlink the `.swap` and `.cleaned` files of these segment bases, safely at any point:
    the lowest `.log.swap` is first renamed `.log.cleaned`, which makes a restart discard every
    swap at or above it, and goes last."""
    ordered = sorted(bases)
    for base in ordered:
        try:
            os.rename(_path(directory, base, LOG_SUFFIX, SWAP_SUFFIX), _path(directory, base, LOG_SUFFIX,
                                                                             CLEANED_SUFFIX))
            break
        except FileNotFoundError:
            continue
    for base in reversed(ordered):
        for extra in (SWAP_SUFFIX, CLEANED_SUFFIX):
            for suffix in (*INDEX_SUFFIXES, LOG_SUFFIX):
                try:
                    os.unlink(_path(directory, base, suffix, extra))
                except FileNotFoundError:
                    pass


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
