"""Checkpoint files, in Kafka's text format.

Offset checkpoints (per log dir: `recovery-point-offset-checkpoint`,
`log-start-offset-checkpoint`, `replication-offset-checkpoint`, and `cleaner-offset-checkpoint`:
the first dirty offset of each compacted log, where its next clean starts):

    0                      version
    2                      number of entries
    my-topic 0 1234        topic partition offset
    my-topic 1 99

Leader epoch checkpoint (per partition dir: `leader-epoch-checkpoint`):

    0                      version
    1                      number of entries
    3 1200                 epoch startOffset

Writes are atomic: write `<name>.tmp`, fsync, rename over the target, fsync the directory
(without the fsyncs when the caller can afford to lose the write, `sync=False`).
Reads of a missing file give an empty result; a malformed file raises CorruptCheckpoint.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple, TypeVar

from samsa.storage.errors import CorruptCheckpoint

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0

T = TypeVar("T")
TopicPartition = tuple[str, int]


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_written: dict[str, int] = {}  # the generation of the snapshot each path holds


def _lock_for(path: Path) -> threading.Lock:
    with _locks_guard:
        lock = _locks.get(str(path))
        if lock is None:
            lock = _locks[str(path)] = threading.Lock()
        return lock


def write_checkpoint_lines(path: Path, lines: Iterable[str], version: int = CHECKPOINT_VERSION, *,
                           sync: bool = True, generation: int | None = None) -> bool:
    """Atomically replace `path` with version, count and `lines` (durably, with `sync`).

    Writers of one path take turns (they share its temporary file). With `generation`, the
    number of the snapshot `lines` come from: skipped (False) when the file already holds a
    later snapshot, so that a slow writer of an older snapshot never replaces a newer one."""
    with _lock_for(path):
        if generation is not None:
            if _written.get(str(path), 0) > generation:
                return False
        try:
            _write_lines(path, lines, version, sync)
        except OSError as e:
            if e.filename is None:  # (a write or fsync error names no file: say which)
                raise OSError(e.errno, e.strerror, str(path)) from e
            raise
        if generation is not None:
            _written[str(path)] = generation
        return True


def _write_lines(path: Path, lines: Iterable[str], version: int, sync: bool) -> None:
    body = list(lines)
    text = f"{version}\n{len(body)}\n" + "".join(line + "\n" for line in body)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = memoryview(text.encode())
        while data:
            data = data[os.write(fd, data):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if not sync:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_checkpoint_lines(path: Path, parse: Callable[[list[str]], T], version: int = CHECKPOINT_VERSION) -> list[T]:
    """Parsed entries of `path` ([] if it does not exist); CorruptCheckpoint if malformed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise CorruptCheckpoint(f"{path}: unreadable: {e}") from e
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != version:
            raise ValueError(f"expected version {version} and a count")
        count = int(lines[1])
        entries = [line for line in lines[2:] if line.strip()]
        if count != len(entries):
            raise ValueError(f"count says {count} entries, found {len(entries)}")
        return [parse(line.split()) for line in entries]
    except (ValueError, IndexError) as e:
        raise CorruptCheckpoint(f"{path}: malformed checkpoint: {e}") from e


def _offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError(f"expected 'topic partition offset', got {' '.join(fields)!r}")
    return (fields[0], int(fields[1])), int(fields[2])


def _epoch_entry(fields: list[str]) -> EpochEntry:
    if len(fields) != 2:
        raise ValueError(f"expected 'epoch offset', got {' '.join(fields)!r}")
    return EpochEntry(int(fields[0]), int(fields[1]))


def write_offsets(path: Path, offsets: Mapping[TopicPartition, int], generation: int | None = None) -> bool:
    return write_checkpoint_lines(path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())),
                                  generation=generation)


def read_offsets(path: Path) -> dict[TopicPartition, int]:
    return dict(read_checkpoint_lines(path, _offset_entry))


def write_leader_epochs(path: Path, entries: Iterable[EpochEntry | tuple[int, int]], *, sync: bool = True) -> None:
    write_checkpoint_lines(path, (f"{e} {o}" for e, o in entries), sync=sync)


def read_leader_epochs(path: Path) -> list[EpochEntry]:
    return read_checkpoint_lines(path, _epoch_entry)


def read_cleaner_offsets(log_dir: Path) -> dict[TopicPartition, int]:
    """The first dirty offsets in `log_dir`'s cleaner-offset-checkpoint ({} if it has none)."""
    return read_offsets(log_dir / CLEANER_OFFSET_CHECKPOINT)


def write_cleaner_offsets(log_dir: Path, offsets: Mapping[TopicPartition, int], generation: int | None = None
                          ) -> bool:
    """Atomically replace `log_dir`'s cleaner-offset-checkpoint (see write_checkpoint_lines)."""
    return write_offsets(log_dir / CLEANER_OFFSET_CHECKPOINT, offsets, generation)
