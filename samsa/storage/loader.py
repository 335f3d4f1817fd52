"""Loading a partition directory into segments, and recovery after an unclean stop.

How it works: first finish an interrupted clean (cleaner.py), with Kafka's rules: its
`.cleaned` files are deleted; a `<base>.log.swap` below the smallest `.cleaned` base is a
cleaned segment ready to replace the segments it covers: every segment file whose base offset
lies in [smallest swap base, largest swap end) is deleted (a swap's end: the offset after its
last batch), then the swaps are renamed to segment files, the .log first (an index `.swap`
beside its `.log`, left by a swap interrupted there, is renamed too). A `.swap` at or above
the smallest `.cleaned` base, or at or above one whose batches do not parse, is deleted: its
clean had not finished. Then list the `<base>.log` files
(deleting leftovers of interrupted operations: `*.deleted`, `*.cleaned`, `*.swap`, `*.tmp`,
and index files without a .log), open each as a LogSegment, then

- clean shutdown: trust the files; only a segment whose index is missing or fails its sanity
  check is rescanned (which rebuilds its indexes);
- unclean: also rescan every segment from the one holding the recovery point onward.

A segment's `.txnindex` is read as it is; entries whose marker is past the recovered log end
are cut, and the producer-state replay that follows the load (`Log.load_producer_state`)
indexes again any abort whose entry did not reach the disk.

A rescan walks the batches from the start of the .log and validates each header (magic 2,
sane length, whole batch present, offsets increasing, CRC-32C over the CRC'd range), rebuilding
both indexes as it goes. At the first invalid or torn batch the .log is truncated there and
every later segment is deleted: the log ends at the last good batch. The log end offset then
comes from the last segment's tail (scanned from its last index entry).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from samsa.protocol.batch import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, compute_crc
from samsa.storage.config import LogConfig
from samsa.storage.errors import CorruptIndex
from samsa.storage.segment import (
    INDEX_SUFFIX,
    INT32_MAX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    parse_segment_file_name,
    segment_file_name,
)

log = logging.getLogger("samsa.storage")

LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap", ".tmp")
RECOVERY_CHUNK = 4 << 20


@dataclass
class LoadedLog:
    segments: list[LogSegment]
    log_end_offset: int
    log_start_offset: int
    recovery_point: int


def load_log(directory: Path, config: LogConfig, *, recovery_point: int, log_start_offset: int,
             clean_shutdown: bool, now_ms: int) -> LoadedLog:
    directory.mkdir(parents=True, exist_ok=True)
    complete_swaps(directory)
    bases = _clean_directory(directory)
    segments = [open_segment(directory, base, config, now_ms) for base in bases]
    if not segments:
        seg = new_segment(directory, max(log_start_offset, 0), config, now_ms)
        return LoadedLog([seg], seg.base_offset, seg.base_offset, seg.base_offset)

    first_unflushed = len(segments)
    if not clean_shutdown:
        first_unflushed = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                first_unflushed = i
    rescanned = 0
    i = 0
    while i < len(segments):
        seg = segments[i]
        if i >= first_unflushed or seg.needs_recovery:
            if seg.needs_recovery:
                log.log(logging.INFO if seg.index_problem == "missing" else logging.WARNING,
                        "Rebuilding the indexes of %s from its batches: %s", seg.log_path, seg.index_problem)
            rescanned += 1
            if recover_segment(seg) and i + 1 < len(segments):
                for later in segments[i + 1 :]:
                    log.warning("Deleting segment %s after the truncation point in %s", later.base_offset, directory)
                    later.delete_files()
                del segments[i + 1 :]
            if i + 1 < len(segments):
                seg.on_become_inactive()  # final time-index entry + index files, as at roll
        i += 1

    if config.compact_enabled:  # (max.compaction.lag.ms measures a segment from its first batch)
        for seg in segments:
            seg.read_first_batch_timestamp()
    active = segments[-1]
    try:
        log_end_offset = active.next_offset()
    except CorruptIndex as e:
        log.warning("Rebuilding the indexes of %s from its batches: %s", active.log_path, e)
        recover_segment(active)
        log_end_offset = active.next_offset()
    active.created_ms = _rolling_timestamp(active, now_ms)
    active.txn_index.truncate_to(log_end_offset)  # aborts whose marker did not survive recovery

    log_start_offset = max(log_start_offset, segments[0].base_offset)
    if log_start_offset > log_end_offset:
        log.warning("Log start offset %d is past the log end offset %d in %s; starting empty there",
                    log_start_offset, log_end_offset, directory)
        for seg in segments:
            seg.delete_files()
        segments = [new_segment(directory, log_start_offset, config, now_ms)]
        log_end_offset = log_start_offset
    recovery_point = log_end_offset if clean_shutdown else min(recovery_point, log_end_offset)
    if rescanned:
        log.info("Loaded %s: rescanned %d of %d segments, log end offset %d",
                 directory.name, rescanned, len(segments), log_end_offset)
    return LoadedLog(segments, log_end_offset, log_start_offset, recovery_point)


def open_segment(directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    return LogSegment.open(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                           segment_index_bytes=config.segment_index_bytes, now_ms=now_ms)


def new_segment(directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    return LogSegment.create(directory, base_offset, index_interval_bytes=config.index_interval_bytes,
                             segment_index_bytes=config.segment_index_bytes, now_ms=now_ms)


def recover_segment(seg: LogSegment) -> int:
    """Validate every batch, rebuild the indexes, truncate at the first bad one; bytes removed."""
    fd = seg.fd
    file_size = os.fstat(fd).st_size
    seg.reset_indexes()
    pos = 0
    prev_last = -1
    buf = b""
    buf_pos = 0
    problem = ""
    while pos < file_size:
        if pos + HEADER_SIZE > file_size:
            problem = "torn batch header"
            break
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            buf, buf_pos, rel = os.pread(fd, min(RECOVERY_CHUNK, file_size - pos), pos), pos, 0
        base, length, _, magic, crc, _, last_delta, _, max_ts, *_ = HEADER.unpack_from(buf, rel)
        size = LOG_OVERHEAD + length
        last = base + last_delta
        if magic != MAGIC_V2:
            problem = f"magic {magic}"
        elif size < HEADER_SIZE:
            problem = f"batch length {length}"
        elif pos + size > file_size:
            problem = "torn batch"
        elif last_delta < 0 or base <= prev_last or last < seg.base_offset or last - seg.base_offset > INT32_MAX:
            problem = f"offsets {base}..{last} out of order"
        if problem:
            break
        if rel + size > len(buf):
            buf, buf_pos, rel = os.pread(fd, max(size, min(RECOVERY_CHUNK, file_size - pos)), pos), pos, 0
        if compute_crc(buf, rel, size) != crc:
            problem = f"CRC mismatch in batch at offset {base}"
            break
        seg.index_batch(pos, last, max_ts, size)
        if pos == 0:
            seg.first_batch_timestamp = max_ts
        prev_last = last
        pos += size
    seg.size = pos
    seg.needs_recovery = False
    if pos < file_size:
        os.ftruncate(fd, pos)
        log.warning("Truncated %s at byte %d (%d bytes dropped): %s", seg.log_path, pos, file_size - pos, problem)
    return file_size - pos


SWAP = ".swap"
CLEANED = ".cleaned"
INDEX_SUFFIXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def complete_swaps(directory: Path) -> list[int]:
    """Finish the swaps an interrupted clean left (see the module docstring); the base offsets
    of the segments swapped in."""
    names = [e.name for e in os.scandir(directory) if e.is_file()]
    limit = min((p[0] for n in names if n.endswith(CLEANED) and (p := parse_segment_file_name(n))),
                default=2**63)  # swaps at or above it are not valid
    swaps = sorted(p[0] for n in names if (p := parse_segment_file_name(n)) and p[1] == LOG_SUFFIX + SWAP)
    valid: list[int] = []
    ends: list[int] = []
    for base in swaps:
        end = _swap_end(directory, base) if base < limit else None
        if end is None:
            log.warning("Deleting %s and every later swap file of an unfinished clean",
                        Path(directory, segment_file_name(base, LOG_SUFFIX + SWAP)))
            limit = min(limit, base)
            break
        valid.append(base)
        ends.append(max(end, base + 1))
    low, high = (valid[0], max(ends)) if valid else (0, 0)
    for name in names:
        parsed = parse_segment_file_name(name)
        if parsed is not None and parsed[1] in SEGMENT_SUFFIXES and low <= parsed[0] < high:
            log.info("Deleting %s: a cleaned segment replaces it", Path(directory, name))
            os.unlink(directory / name)
    for base in valid:
        os.rename(directory / segment_file_name(base, LOG_SUFFIX + SWAP), directory / segment_file_name(base))
        log.info("Swapped in the cleaned segment %s of an interrupted clean", Path(directory, segment_file_name(base)))
    # The indexes of those, and of a swap interrupted after its .log was renamed (Kafka renames
    # every valid .swap file): beside their .log, below any .cleaned file.
    for name in os.listdir(directory):
        parsed = parse_segment_file_name(name)
        if parsed is None or not name.endswith(SWAP) or parsed[1][: -len(SWAP)] not in INDEX_SUFFIXES:
            continue
        base = parsed[0]
        if base < limit and (directory / segment_file_name(base)).exists():
            os.rename(directory / name, directory / name[: -len(SWAP)])
    return valid


def _swap_end(directory: Path, base: int) -> int | None:
    """The offset after the last batch of `<base>.log.swap` (base if empty); None if its
    bytes are not whole batches."""
    nxt = base
    with open(directory / segment_file_name(base, LOG_SUFFIX + SWAP), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < size:
            if pos + HEADER_SIZE > size:
                return None
            f.seek(pos)
            fields = HEADER.unpack(f.read(HEADER_SIZE))
            length = LOG_OVERHEAD + fields[1]
            if fields[3] != MAGIC_V2 or length < HEADER_SIZE or pos + length > size or fields[0] < nxt:
                return None
            nxt = fields[0] + fields[6] + 1
            pos += length
    return nxt


def _rolling_timestamp(seg: LogSegment, now_ms: int) -> int:
    """When the active segment counts as created (segment.ms): its first batch's timestamp."""
    if seg.size >= HEADER_SIZE:
        ts = seg.read_header(0).max_timestamp
        if 0 <= ts <= now_ms:
            return ts
    return now_ms


def _clean_directory(directory: Path) -> list[int]:
    """Delete leftovers and orphan indexes; the sorted base offsets of the .log files."""
    logs: set[int] = set()
    indexes: list[tuple[int, str]] = []
    for entry in os.scandir(directory):
        name = entry.name
        if not entry.is_file():
            continue
        if name.endswith(LEFTOVER_SUFFIXES):
            log.info("Deleting leftover file %s", Path(directory, name))
            os.unlink(entry.path)
            continue
        parsed = parse_segment_file_name(name)
        if parsed is None or parsed[1] not in SEGMENT_SUFFIXES:
            continue
        if parsed[1] == LOG_SUFFIX:
            logs.add(parsed[0])
        else:
            indexes.append((parsed[0], name))
    for base, name in indexes:
        if base not in logs:
            log.info("Deleting orphan index file %s", Path(directory, name))
            os.unlink(directory / name)
    return sorted(logs)
