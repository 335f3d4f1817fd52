"""Moving a partition's log to another log dir of the same broker, on disk (Kafka's future
replica, made for AlterReplicaLogDirs; the mover is server/alter_log_dirs.py).

On disk, in the destination log dir:

    <topic>-<partition>.<uuid hex>-future/   the copy being made (Kafka's name); never loaded
    <topic>-<partition>/log-dir-move         the copy once committed: a text file,
                                             `source=<source log dir>`, until the move is done

and in the source log dir the current `<topic>-<partition>/`, renamed
`<topic>-<partition>.<uuid hex>-delete` once the copy serves the partition, then deleted.

The steps, each durable (renames and new files fsynced with their directory) before the next:

1. create  `create_future`: the future dir, with the current's `partition.metadata`. The mover
           fills it from the current log, whole batches with the current's offsets
           (`Log.append_as_follower`, `append_copy`), in a worker thread.
2. commit  `commit`: the copy has (nearly) caught up and the partition's replication is paused,
           so that the current log is not truncated from here to step 4. Flush and close the
           copy, copy the current's producer-state snapshots into it, write `log-dir-move`,
           rename the dir to `<topic>-<partition>`, open it again.
3. swap    (the mover, on the event loop, in one go, between two appends) the batches the
           current took meanwhile are appended to the copy, which takes the current's producer
           state, leader epochs and log start offset and becomes the partition's log.
4. retire  `retire`: rename the old dir `...-delete`; remove `log-dir-move`; delete the old dir.

A crash (kill -9, power) at any point leaves one of these, which `LogManager.startup` settles
with `settle_move` before it opens anything:

- a `-future` dir: the copy was not committed; it is removed and its log dir noted as the
  destination of an interrupted move (the broker starts that move again, from scratch).
- two `<topic>-<partition>` dirs, one holding `log-dir-move`: between 2 and 4. Neither log was
  truncated since 2, the current took appends until 3 and the copy after it, so one is a prefix
  of the other: the one with the larger log end offset holds everything acknowledged and is
  kept (on a tie they hold the same batches and the copy is kept: the move is done); the other
  is deleted. If the current won, the move is noted as interrupted (and started again).
- one `<topic>-<partition>` with `log-dir-move`: step 4 stopped after its rename; the file goes.
- two `<topic>-<partition>` dirs otherwise: an error, as before (and as in Kafka).

Differences from Kafka: Kafka renames the future dir to the current's name and the current's
to `-delete` while appends wait on the partition's lock, and refuses to start if a crash fell
between the two renames; here appends never wait (the copy is committed before it serves, and
the two copies are told apart by `log-dir-move` and their log end offsets). Kafka resumes an
interrupted copy where it was; here it is started again.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path

from samsa.protocol.records import scan_batches
from samsa.storage.config import LogConfig
from samsa.storage.errors import StorageError
from samsa.storage.log import SNAPSHOT_SUFFIX, Log
from samsa.storage.partition_log import Clock, FileSlice, read_bytes
from samsa.storage.segment import parse_segment_file_name
from samsa.storage.txn_index import AbortedTxn

log = logging.getLogger("samsa.storage")

FUTURE_DIR_SUFFIX = "-future"
DELETE_DIR_SUFFIX = "-delete"
MOVE_MARKER = "log-dir-move"
PARTITION_METADATA = "partition.metadata"
MAX_DIR_NAME = 255  # (a future dir's name must fit: Kafka answers INVALID_TOPIC_EXCEPTION otherwise)

TopicPartition = tuple[str, int]


class SourceUnreadable(StorageError):
    """The log being copied could not be read (its disk's trouble, not the copy's)."""


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def parse_future_dir(name: str) -> TopicPartition | None:
    """`t-0.<32 hex>-future` -> ("t", 0); None for any other name."""
    if not name.endswith(FUTURE_DIR_SUFFIX):
        return None
    stem, dot, tag = name[: -len(FUTURE_DIR_SUFFIX)].rpartition(".")
    topic, dash, partition = stem.rpartition("-")
    if not dot or len(tag) != 32 or not dash or not partition.isdigit():
        return None
    return topic, int(partition)


# -- 1. create, fill --------------------------------------------------------------------------


def create_future(log_dir: Path, topic: str, partition: int, config: LogConfig, *, start_offset: int,
                  source: Path, clock: Clock) -> Log:
    """An empty future log of the partition in `log_dir`, starting at `start_offset`, with the
    `partition.metadata` of `source` (the current log's dir). Nothing is fsynced: a crash
    that loses it loses a copy that is made again; `commit` makes it durable."""
    directory = log_dir / future_dir_name(topic, partition)
    future = Log.create(directory, config, clock=clock, start_offset=start_offset)
    try:
        shutil.copyfile(source / PARTITION_METADATA, directory / PARTITION_METADATA)
    except FileNotFoundError:
        pass  # (none yet: the broker writes it into whichever dir the log is in)
    return future


def copy_slice(future: Log, log_slice: FileSlice, fd: int, aborted: Sequence[AbortedTxn]) -> int:
    """Append to `future` the whole batches of `log_slice` (read through `fd`, a duplicate of
    the slice's descriptor, closed here), and index the `aborted` transactions whose marker
    it now holds; the bytes appended. Runs in a worker thread."""
    try:
        data = read_bytes(FileSlice(fd, log_slice.position, log_slice.size, log_slice.first_batch_offset))
    except OSError as e:
        raise SourceUnreadable(f"cannot read the log being copied: {e}") from e
    finally:
        os.close(fd)
    return append_copy(future, data, aborted, verify_crc=True)


def append_copy(future: Log, data: bytes, aborted: Sequence[AbortedTxn], *, verify_crc: bool) -> int:
    """Append the whole batches of `data` (read from the current log: offsets and leader epochs
    as they are) to `future`, then the aborted transactions whose marker is now in it; the bytes
    appended (0: no whole batch). A torn read (the current was truncated under it) fails the
    CRC check: InvalidRecords, and the caller reads again."""
    headers = scan_batches(data, verify_crc=verify_crc, allow_partial_tail=True)
    if not headers:
        return 0
    last_pos, last = headers[-1]
    end = last_pos + last.size
    future.append_as_follower(memoryview(data)[:end], headers)
    leo = future.log_end_offset
    for txn in aborted:
        if txn.last_offset < leo:
            future.add_aborted_txn(txn)
    return end


# -- 2. commit ----------------------------------------------------------------------------------


def commit(future: Log, source: Path, *, clock: Clock) -> Log:
    """Make the copy the partition's log on disk (step 2): flush and close `future`, copy the
    producer-state snapshots of `source` it covers, write `log-dir-move`, rename its dir to
    `<topic>-<partition>` and open it again (returned). StorageError if that name is taken."""
    name = source.name
    target = future.dir.with_name(name)
    if target.exists():
        raise StorageError(f"cannot commit {future.dir}: {target} exists")
    future.flush()
    leo, start, config = future.log_end_offset, future.log_start_offset, future.config
    future.close()
    _copy_snapshots(source, future.dir, leo)
    marker = future.dir / MOVE_MARKER
    with open(marker, "w") as f:
        f.write(f"source={source.parent}\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(future.dir)
    os.rename(future.dir, target)
    _fsync_dir(target.parent)
    return Log.open(target, config, recovery_point=leo, log_start_offset=start, clean_shutdown=True, clock=clock)


def _copy_snapshots(source: Path, dest: Path, up_to: int) -> None:
    """The producer-state snapshots of `source` at offsets <= `up_to` (valid for the copy too:
    same batches), so that the copy rebuilds its producer state from them when it is opened."""
    try:
        names = os.listdir(source)
    except OSError:
        return
    for name in names:
        parsed = parse_segment_file_name(name)
        if parsed is None or parsed[1] != SNAPSHOT_SUFFIX or parsed[0] > up_to:
            continue
        tmp = dest / (name + ".move.tmp")
        try:
            shutil.copyfile(source / name, tmp)
        except FileNotFoundError:  # deleted meanwhile (retention, truncation)
            continue
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, dest / name)


# -- 4. retire ----------------------------------------------------------------------------------


def retire(old: Path, new: Path) -> Path:
    """Step 4: rename the old dir `<name>.<uuid>-delete` (durably), then remove `log-dir-move`
    from the new one. Returns the doomed dir (delete it with `remove`)."""
    doomed = old.with_name(f"{old.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
    os.rename(old, doomed)
    _fsync_dir(old.parent)
    unmark(new)
    return doomed


def unmark(directory: Path) -> None:
    try:
        (directory / MOVE_MARKER).unlink()
    except FileNotFoundError:
        return
    _fsync_dir(directory)


def uncommit(directory: Path) -> None:
    """Give a committed copy that will not serve its `-future` name back (durably): the next
    start removes it and starts its move again."""
    topic, _, partition = directory.name.rpartition("-")
    os.rename(directory, directory.with_name(future_dir_name(topic, int(partition))))
    _fsync_dir(directory.parent)


def doom(directory: Path) -> Path | None:
    """Rename a dir no log uses `<name>.<uuid>-delete` (durably): the next start removes it if
    nothing does before. The new path (None: no such dir)."""
    doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
    try:
        os.rename(directory, doomed)
    except FileNotFoundError:
        return None
    _fsync_dir(directory.parent)
    return doomed


def discard(directory: Path) -> None:
    """Delete a dir no log uses (renamed `-delete` first, so that a crash midway leaves no
    half-deleted log under a live name)."""
    doomed = doom(directory)
    if doomed is not None:
        remove(doomed)


def remove(directory: Path) -> None:
    """Delete a dir that no log uses any more (a `-delete` or abandoned `-future` one)."""
    shutil.rmtree(directory, ignore_errors=True)


# -- startup ------------------------------------------------------------------------------------


def is_marked(directory: Path) -> bool:
    return (directory / MOVE_MARKER).exists()


def copy_wins(copy_log_end_offset: int, current_log_end_offset: int) -> bool:
    """Between commit and retire both logs are on disk: which one holds everything? The one
    with the larger log end offset (one is a prefix of the other); on a tie, the copy."""
    return copy_log_end_offset >= current_log_end_offset


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
