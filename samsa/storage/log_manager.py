"""LogManager: every partition log of this broker, across its log dirs.

On disk, per log dir (Kafka's names):

    meta.properties                      version=0, broker.id=N, cluster.id=... (Java properties)
    recovery-point-offset-checkpoint     offsets flushed to disk, per partition (checkpoints.py)
    log-start-offset-checkpoint          log start offset per partition
    .kafka_cleanshutdown                 present only between a clean shutdown and the next start
    <topic>-<partition>/                 one Log each (topic names may hold '-' and '.': the
                                         partition is what follows the last '-')
    <topic>-<partition>.<id>-delete/     a log being deleted (removed at startup if left over)
    <topic>-<partition>.<id>-stray/      a log moved aside as stray (kept, never loaded)
    <topic>-<partition>.<id>-future/     a copy being made of a log of another log dir
                                         (AlterReplicaLogDirs; log_move.py: removed at startup)

In each partition directory, `partition.metadata` ("version: 0" and "topic_id: <base64>", as
Kafka writes it) names the topic the log belongs to. A topic deleted while this broker was down
and created again under the same name has another id: its old log is not this topic's.

Stray logs (Kafka's name): once the broker knows the cluster's metadata, a log whose topic no
longer exists, whose topic has another id, or whose partition is not assigned to this broker is
moved aside, renamed `<topic>-<partition>.<id>-stray`, and said so in the log with its path.
As in Kafka it is not deleted: the operator may still want its data. Start-up skips them.

Startup reads the checkpoints and the marker, loads every partition directory (rescanning
unflushed segments only after an unclean stop) and removes the marker. Shutdown flushes and
closes every log, writes the checkpoints, then the marker. What a move between log dirs left
half done is settled first (log_move.py): the partition keeps one log, and the moves that did
not finish are in `interrupted_moves` for the broker to start again.

Logs are opened through a `log_factory` (partition_log.py's LogFactory): `Log.open` always,
except in benchmarks that hand it `NullLog.open` to take the disk out of the measurement
(bench/bench_null_engine.py). There is no broker config key for that on purpose.

Creating logs: a new partition goes to the log dir AlterReplicaLogDirs named for it before it
existed here (`preferred_dirs`, as Kafka's), else to the log dir holding the fewest logs (a
count kept per dir, so the choice is O(1)). `create_logs` creates many at once and fsyncs each parent dir
once for all of them (the new partition directories' names are then durable; each new log
fsyncs its own directory at its first flush, before its recovery point moves). It touches no
shared state, so it may run in a worker thread; `add_logs` then registers the logs, on the
thread that owns the manager (the event loop).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from samsa.storage import log_move
from samsa.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    TopicPartition,
    read_offsets,
    write_offsets,
)
from samsa.storage.config import LogConfig
from samsa.storage.errors import CorruptCheckpoint, InconsistentMetadata, StorageError
from samsa.storage.log import Log
from samsa.storage.partition_log import Clock, LogFactory, PartitionLog

log = logging.getLogger("samsa.storage")

# (file, offsets, snapshot generation) of each checkpoint file of each log dir
CheckpointSnapshot = list[tuple[Path, dict[TopicPartition, int], int]]

META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
PARTITION_METADATA = "partition.metadata"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def parse_topic_partition(name: str) -> TopicPartition | None:
    """`my.topic-name-3` -> ("my.topic-name", 3); None for anything that is not a partition dir."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not partition.isdigit() or not partition.isascii() or not is_legal_topic(topic):
        return None
    return topic, int(partition)


def is_legal_topic(topic: str) -> bool:
    return bool(_LEGAL_TOPIC.fullmatch(topic)) and topic not in (".", "..")


class LogManager:
    def __init__(self, log_dirs: Sequence[Path | str], default_config: LogConfig, clock: Clock = time.time, *,
                 broker_id: int | None = None, cluster_id: str | None = None,
                 log_factory: LogFactory = Log.open, recovery_threads: int = 1) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._clock = clock
        self._log_factory = log_factory
        self.recovery_threads = max(1, recovery_threads)  # num.recovery.threads.per.data.dir
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._per_dir: dict[Path, int] = {d: 0 for d in self.log_dirs}  # logs in each log dir
        self._deleted: list[tuple[int, PartitionLog]] = []  # (close fds after, log) of deleted logs
        self._topic_ids: dict[TopicPartition, str | None] = {}  # from partition.metadata
        self._snapshots = itertools.count(1)  # checkpoint snapshot generations
        self.offline_dirs: dict[Path, str] = {}  # failed log dirs -> why (until a restart)
        # AlterReplicaLogDirs named a log dir for a partition not here yet: it is created there.
        self.preferred_dirs: dict[TopicPartition, Path] = {}
        # Moves between log dirs a stop interrupted (found at startup): partition -> destination.
        self.interrupted_moves: dict[TopicPartition, Path] = {}
        # Told of each OSError met in a log dir by the periodic work here (flush, retention,
        # deleted files); the broker decides whether the dir failed (`is_log_dir_failure`).
        self.on_error: Callable[[Path, OSError], None] | None = None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    # -- startup -------------------------------------------------------------------------

    def startup(self, *, broker_id: int | None = None, cluster_id: str | None = None,
                topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Create the dirs, check meta.properties, load every partition log."""
        if broker_id is not None:
            self.broker_id = broker_id
        if cluster_id is not None:
            self.cluster_id = cluster_id
        started = time.monotonic()
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
            self._check_meta(d)
        found: dict[TopicPartition, list[Path]] = {}
        for d in self.log_dirs:
            self._scan_dir(d, found)
        moved = self._check_duplicates(found)
        configs = topic_configs or {}
        # As Kafka: num.recovery.threads.per.data.dir threads for each log dir, all dirs at once.
        with ThreadPoolExecutor(self.recovery_threads * len(self.log_dirs),
                                thread_name_prefix="samsa-log-recovery") as pool:
            opening = {d: self._open_dir(d, found, configs, pool) for d in self.log_dirs}
            opened: dict[TopicPartition, list[PartitionLog]] = {}
            for d in self.log_dirs:
                for tp, fut in opening[d]:
                    opened.setdefault(tp, []).append(fut.result())
        for tp, logs in opened.items():
            lg = self._settle_move(tp, logs) if tp in moved else logs[0]
            if tp not in moved and log_move.is_marked(lg.dir):  # a move done but for removing its marker
                log_move.unmark(lg.dir)
            self._add(tp, lg)
            self._topic_ids[tp] = read_topic_id(lg.dir)
        for d in self.log_dirs:
            if not (d / CLEAN_SHUTDOWN_FILE).exists() and any(lg.dir.parent == d for lg in self._logs.values()):
                log.info("Log dir %s was not shut down cleanly; unflushed segments were rescanned", d)
            (d / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        log.info("Loaded %d logs from %s in %.0f ms", len(self._logs), ", ".join(map(str, self.log_dirs)),
                 (time.monotonic() - started) * 1000)

    def _check_meta(self, d: Path) -> None:
        path = d / META_PROPERTIES
        props = read_properties(path) if path.exists() else {}
        file_id = props.get("broker.id", props.get("node.id"))
        if file_id is not None:
            if self.broker_id is not None and int(file_id) != self.broker_id:
                raise InconsistentMetadata(
                    f"{path} says broker.id={file_id} but this broker is configured with broker.id={self.broker_id}")
            self.broker_id = int(file_id)
        file_cluster = props.get("cluster.id")
        if file_cluster is not None:
            if self.cluster_id is not None and file_cluster != self.cluster_id:
                raise InconsistentMetadata(
                    f"{path} says cluster.id={file_cluster} but the cluster's id is {self.cluster_id}")
            self.cluster_id = file_cluster
        if self.broker_id is not None and (file_id is None or (file_cluster is None and self.cluster_id is not None)):
            wanted = {"version": "0", "broker.id": str(self.broker_id)}
            if self.cluster_id is not None:
                wanted["cluster.id"] = self.cluster_id
            write_properties(path, wanted)

    def _scan_dir(self, d: Path, found: dict[TopicPartition, list[Path]]) -> None:
        """The partition dirs of log dir `d` into `found`; leftovers of deletions and copies that
        were never committed (log_move.py) are removed; stray logs are left alone."""
        strays: list[str] = []
        for entry in sorted(os.scandir(d), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                log.info("Removing log dir %s left over from a deletion", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                continue
            if entry.name.endswith(STRAY_DIR_SUFFIX):
                strays.append(entry.name)
                continue
            future = log_move.parse_future_dir(entry.name)
            if future is not None:
                log.info("Removing %s, the copy of a move between log dirs that a stop interrupted (the move "
                         "starts again)", entry.path)
                shutil.rmtree(entry.path, ignore_errors=True)
                self.interrupted_moves[future] = d
                continue
            tp = parse_topic_partition(entry.name)
            if tp is None:
                log.warning("Skipping %s: not a <topic>-<partition> directory", entry.path)
                continue
            found.setdefault(tp, []).append(Path(entry.path))
        if strays:
            names = ", ".join(strays[:10]) + (" ..." if len(strays) > 10 else "")
            log.warning("Not loading %d stray log(s) kept in %s (moved aside earlier; delete them once their data "
                        "is not needed): %s", len(strays), d, names)

    @staticmethod
    def _check_duplicates(found: Mapping[TopicPartition, list[Path]]) -> set[TopicPartition]:
        """The partitions with a dir in two log dirs because a move between them stopped after
        its commit (one of the two holds log_move's marker); StorageError for any other
        duplicate."""
        moved = set()
        for tp, paths in found.items():
            if len(paths) == 1:
                continue
            if len(paths) == 2 and sum(log_move.is_marked(p) for p in paths) == 1:
                moved.add(tp)
                continue
            raise StorageError(f"duplicate log directories for {tp[0]}-{tp[1]}: {paths[0]} and {paths[1]}")
        return moved

    def _open_dir(self, d: Path, found: Mapping[TopicPartition, list[Path]], topic_configs: Mapping[str, LogConfig],
                  pool: ThreadPoolExecutor) -> list[tuple[TopicPartition, Future[PartitionLog]]]:
        clean = (d / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points = _read_offsets_or_empty(d / RECOVERY_POINT_CHECKPOINT)
        start_offsets = _read_offsets_or_empty(d / LOG_START_OFFSET_CHECKPOINT)
        return [(tp, pool.submit(self._log_factory, path, topic_configs.get(tp[0], self.default_config),
                                 recovery_point=recovery_points.get(tp, 0), log_start_offset=start_offsets.get(tp, 0),
                                 clean_shutdown=clean, clock=self._clock))
                for tp, paths in found.items() for path in paths if path.parent == d]

    def _settle_move(self, tp: TopicPartition, logs: list[PartitionLog]) -> PartitionLog:
        """Of a partition's two logs left by a move that stopped between its commit and its end,
        keep the one holding everything (log_move.copy_wins) and delete the other."""
        copy, current = sorted(logs, key=lambda lg: not log_move.is_marked(lg.dir))
        keep, drop = (copy, current) if log_move.copy_wins(copy.log_end_offset, current.log_end_offset) \
            else (current, copy)
        log.warning("%s-%d: a move from %s to %s stopped half way; keeping the log in %s (log end offset %d), "
                    "deleting the one in %s (log end offset %d)", tp[0], tp[1], current.dir.parent, copy.dir.parent,
                    keep.dir.parent, keep.log_end_offset, drop.dir.parent, drop.log_end_offset)
        drop.close()
        log_move.remove(log_move.retire(drop.dir, keep.dir))
        if keep is current:
            self.interrupted_moves[tp] = copy.dir.parent
        return keep

    # -- logs ----------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def logs(self) -> dict[TopicPartition, PartitionLog]:
        return dict(self._logs)

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        """The partition's log, created empty in the least loaded log dir if absent."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        return self.add_logs(self.create_logs([(topic, partition, config)]))[0]

    def create_logs(self, items: Sequence[tuple[str, int, LogConfig | None]]) -> list[PartitionLog]:
        """The logs of these partitions, in order: registered ones as they are, the others
        created empty (each in the least loaded log dir), every parent dir fsynced once.

        Safe in a worker thread while the owner thread uses the manager: it only reads the
        registry; register what it returns with `add_logs` on the owner thread. A partition
        must not be in two calls running at once.
        """
        for topic, partition, _ in items:
            if not is_legal_topic(topic) or partition < 0:
                raise ValueError(f"illegal topic partition {topic!r}-{partition}")
        counts = dict(self._per_dir)
        out: list[PartitionLog] = []
        parents: set[Path] = set()
        created = 0
        for topic, partition, config in items:
            existing = self._logs.get((topic, partition))
            if existing is not None:
                out.append(existing)
                continue
            online = [d for d in self.log_dirs if d in counts]
            if not online:
                raise StorageError(f"every log dir is offline ({', '.join(map(str, self.log_dirs))}): "
                                   f"cannot create {topic}-{partition}")
            preferred = self.preferred_dirs.get((topic, partition))
            parent = preferred if preferred in counts else min(online, key=counts.__getitem__)
            directory = parent / f"{topic}-{partition}"
            cfg = config or self.default_config
            new: PartitionLog
            if self._log_factory != Log.open:  # another engine (the null one, in benchmarks)
                new = self._log_factory(directory, cfg, clock=self._clock)
            else:
                try:
                    new = Log.create(directory, cfg, clock=self._clock)
                except FileExistsError:  # left by a crash between mkdir and registration: load it
                    if log_move.is_marked(directory):  # (no: the copy of a move being undone)
                        log_move.discard(directory)
                        new = Log.create(directory, cfg, clock=self._clock)
                    else:
                        new = Log.open(directory, cfg, clock=self._clock)
            counts[parent] += 1
            parents.add(parent)
            created += 1
            out.append(new)
        for parent in parents:
            _fsync_dir(parent)
        if created:
            log.debug("Created %d logs in %s", created, ", ".join(map(str, sorted(parents))))
        return out

    def add_logs(self, logs: Iterable[PartitionLog]) -> list[PartitionLog]:
        """Register logs made by `create_logs` (on the owner thread); returns what is registered
        for each (the one already registered, if another call won the race: the new one is closed)."""
        out = []
        for lg in logs:
            tp = parse_topic_partition(lg.dir.name)
            assert tp is not None
            current = self._logs.get(tp)
            if current is None:
                self._add(tp, lg)
                current = lg
            elif current is not lg:
                lg.close()
            out.append(current)
        return out

    def _add(self, tp: TopicPartition, lg: PartitionLog) -> None:
        self._logs[tp] = lg
        self.preferred_dirs.pop(tp, None)
        parent = lg.dir.parent
        self._per_dir[parent] = self._per_dir.get(parent, 0) + 1

    def log_dir_named(self, path: str) -> Path | None:
        """The log dir whose absolute path is `path` (as AlterReplicaLogDirs names one), or None."""
        wanted = Path(path)
        if not wanted.is_absolute():
            return None
        return next((d for d in self.log_dirs if d.absolute() == wanted), None)

    def replace_log(self, tp: TopicPartition, new: PartitionLog) -> PartitionLog | None:
        """Register `new` as the partition's log in place of the current one (a move between log
        dirs, on the owner thread); the current one is returned, still open."""
        old = self._logs.get(tp)
        if old is not None:
            self._per_dir[old.dir.parent] -= 1
        self._logs[tp] = new
        parent = new.dir.parent
        self._per_dir[parent] = self._per_dir.get(parent, 0) + 1
        return old

    def release_later(self, lg: PartitionLog) -> None:
        """Close the descriptors of a log no longer served (its files gone or going) after
        file.delete.delay.ms, so that in-flight sendfiles from it never read a recycled one."""
        self._deleted.append((self._now_ms() + lg.config.file_delete_delay_ms, lg))

    def topic_id_of(self, tp: TopicPartition) -> str | None:
        """The topic id in the log's partition.metadata (None: no such file yet, or no log)."""
        return self._topic_ids.get(tp)

    def record_topic_id(self, lg: PartitionLog, topic_id: str) -> bool:
        """Note that the log belongs to topic id `topic_id` (any thread); True if its
        partition.metadata must be written (`write_topic_id`), False if it holds the id
        already. Kafka too records the id at once and writes the file later, off the
        path that makes the partition's leader."""
        tp = parse_topic_partition(lg.dir.name)
        if tp is None or self._topic_ids.get(tp) == topic_id:
            return False
        self._topic_ids[tp] = topic_id
        return self._log_factory == Log.open  # (the null engine keeps no directory)

    def detach(self, tp: TopicPartition) -> PartitionLog | None:
        """Take the log out of the registry (on the owner thread), for `move_aside`."""
        lg = self._logs.pop(tp, None)
        if lg is not None:
            self._per_dir[lg.dir.parent] -= 1
            self._topic_ids.pop(tp, None)
        return lg

    @staticmethod
    def move_aside(lg: PartitionLog, reason: str) -> Path:
        """Close a detached log and rename its directory `<dir>.<id>-stray` (any thread):
        kept, as Kafka keeps stray logs, and never loaded again. Returns the new path."""
        lg.close()
        stray = lg.dir.with_name(f"{lg.dir.name}.{uuid.uuid4().hex}{STRAY_DIR_SUFFIX}")
        try:
            os.rename(lg.dir, stray)
            _fsync_dir(stray.parent)
        except FileNotFoundError:
            return lg.dir  # (the null engine, or already gone)
        log.warning("Log %s is stray (%s): moved aside to %s, not deleted; delete it once its data is not needed",
                    lg.dir, reason, stray)
        return stray

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove the partition's directory now; its fds close at a cleanup() after file.delete.delay.ms."""
        lg = self._logs.pop((topic, partition), None)
        if lg is None:
            return False
        self._per_dir[lg.dir.parent] -= 1
        lg.delete(keep_fds=True)
        self._deleted.append((self._now_ms() + lg.config.file_delete_delay_ms, lg))
        log.info("Deleted log %s-%d", topic, partition)
        return True

    # -- periodic work -------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write recovery-point-offset-checkpoint and log-start-offset-checkpoint in every dir."""
        write_checkpoints(self.checkpoint_snapshot())

    def checkpoint_snapshot(self) -> CheckpointSnapshot:
        """What `checkpoint` writes, taken now (on the owner thread); `write_checkpoints`
        writes it, anywhere (a worker thread, off the event loop). Snapshots are numbered: a
        file is never replaced by an older snapshot than the one it holds."""
        gen = next(self._snapshots)
        out: CheckpointSnapshot = []
        for d in self.online_dirs:
            here = {tp: lg for tp, lg in self._logs.items() if lg.dir.parent == d}
            out.append((d / RECOVERY_POINT_CHECKPOINT, {tp: lg.recovery_point for tp, lg in here.items()}, gen))
            out.append((d / LOG_START_OFFSET_CHECKPOINT, {tp: lg.log_start_offset for tp, lg in here.items()}, gen))
        return out

    def cleanup(self, now_ms: int | None = None) -> int:
        """Retention over every log; segments deleted."""
        now = self._now_ms() if now_ms is None else now_ms
        self._release_deleted(now)
        return sum(self._each_log(lambda lg: lg.delete_old_segments(now)))

    def release_due(self, now_ms: int | None = None) -> None:
        """Close and unlink what was deleted (segments, whole logs) once its file.delete.delay.ms
        is over: on a timer of its own, not at the next retention pass (minutes later)."""
        now = self._now_ms() if now_ms is None else now_ms
        self._release_deleted(now)

        def finish(lg: PartitionLog) -> int:
            if lg.has_pending_deletes:
                lg.finish_pending_deletes(now)
            return 0

        self._each_log(finish)

    def _release_deleted(self, now_ms: int | None) -> None:
        keep = []
        for deadline, lg in self._deleted:
            if now_ms is None or now_ms >= deadline:
                lg.release_files()
            else:
                keep.append((deadline, lg))
        self._deleted = keep

    def flush_due(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms elapsed (and rolled segments not yet flushed); logs flushed."""
        now = self._now_ms() if now_ms is None else now_ms
        return sum(self._each_log(lambda lg: lg.maybe_flush(now)))

    def presync_due(self, now_ms: int) -> list[int]:
        """Duplicated descriptors of the segment data `flush_due(now_ms)` would fdatasync, for a
        worker thread to sync (and close) first: the fsync of a rolled segment (up to
        segment.bytes of dirty pages) then no longer holds the event loop. An error here is
        left for flush_due to meet and report."""
        fds: list[int] = []
        for lg in list(self._logs.values()):
            presync = getattr(lg, "presync_fds", None)
            if presync is not None:
                try:
                    fds += presync(now_ms)
                except OSError:
                    pass
        return fds

    def _each_log(self, fn: Callable[[PartitionLog], int]) -> list[int]:
        """`fn` over every log; an OSError of one goes to `on_error` (or up, without one) and
        the others still run."""
        out = []
        for lg in list(self._logs.values()):
            try:
                out.append(fn(lg))
            except OSError as e:
                if self.on_error is None:
                    raise
                self.on_error(lg.dir.parent, e)
        return out

    def fail_dir(self, d: Path, why: str) -> list[tuple[TopicPartition, PartitionLog]]:
        """Take log dir `d` offline (Kafka's handleLogDirFailure): its logs leave the registry and
        are closed (quietly: the disk may refuse), nothing new is created there, and no
        checkpoint is written there, until a restart. Returns the logs it held."""
        if d in self.offline_dirs:
            return []
        self.offline_dirs[d] = why
        gone = [(tp, lg) for tp, lg in self._logs.items() if lg.dir.parent == d]
        for tp, lg in gone:
            del self._logs[tp]
            self._topic_ids.pop(tp, None)
            try:
                lg.close()
            except OSError:
                pass
        self._per_dir.pop(d, None)
        return gone

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def shutdown(self) -> None:
        """Flush and close every log, write checkpoints, then the clean-shutdown marker per dir."""
        failed: set[Path] = set()

        def close(tp: TopicPartition, lg: PartitionLog) -> Path | None:
            try:
                lg.flush()
                lg.close()
            except OSError as e:
                log.warning("Could not flush and close %s: %s (its log dir is not marked cleanly shut down)", lg.dir, e)
                return lg.dir.parent
            return None

        with ThreadPoolExecutor(self.recovery_threads * len(self.log_dirs),
                                thread_name_prefix="samsa-log-shutdown") as pool:
            failed = {d for d in pool.map(lambda item: close(*item), list(self._logs.items())) if d is not None}
        try:
            self.checkpoint()
        except OSError as e:
            log.warning("Could not write the checkpoints at shutdown (the next start recovers the logs): %s", e)
            failed.update(self.log_dirs)
        for d in self.online_dirs:
            if d not in failed:
                (d / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
                _fsync_dir(d)
        self._release_deleted(None)
        log.info("Log manager shut down (%d logs)", len(self._logs))
        self._logs.clear()
        self._per_dir = {d: 0 for d in self.log_dirs}


def _read_offsets_or_empty(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offsets(path)
    except CorruptCheckpoint as e:
        log.warning("Ignoring %s (%s): recovering from offset 0", path, e)
        return {}


def read_topic_id(directory: Path) -> str | None:
    """The topic id in `directory`/partition.metadata, None if there is none (or it is unreadable)."""
    try:
        text = (directory / PARTITION_METADATA).read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as e:
        log.warning("Cannot read %s: %s", directory / PARTITION_METADATA, e)
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "topic_id":
            return value.strip() or None
    return None


def write_topic_id(directory: Path, topic_id: str, inode: tuple[int, int] | None = None) -> bool:
    """Write `directory`/partition.metadata (through a fsynced temporary file and a rename).

    With `inode` (the directory's (st_dev, st_ino) when its log was created), only into that
    very directory: False, nothing written, when the path now names another one (the log
    was deleted and its partition created again meanwhile) or none. Everything goes
    through a descriptor of the directory, so a rename under way cannot redirect the write."""
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        if inode is not None:
            return False
        raise
    try:
        if inode is not None:
            st = os.fstat(dfd)
            if (st.st_dev, st.st_ino) != inode:
                return False
        tmp = PARTITION_METADATA + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dfd)
        try:
            os.write(fd, f"version: 0\ntopic_id: {topic_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, PARTITION_METADATA, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
        return True
    finally:
        os.close(dfd)


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file's key=value lines (comments and blanks skipped)."""
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    text = "#\n#Written by Samsa\n" + "".join(f"{k}={v}\n" for k, v in props.items())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def write_checkpoints(snapshot: CheckpointSnapshot) -> None:
    for path, offsets, generation in snapshot:
        write_offsets(path, offsets, generation)


def sync_and_close(fds: list[int], report: bool = False) -> None:
    """fdatasync then close each descriptor (in a worker thread). Errors: with `report`, the
    first is raised once all are closed (Log.flush_fds' flush); else they are the loop's flush
    to meet again and report (presync_due's)."""
    error: OSError | None = None
    for fd in fds:
        try:
            _fdatasync(fd)
        except OSError as e:
            error = error or e
        finally:
            os.close(fd)
    if report and error is not None:
        raise error


_fdatasync = getattr(os, "fdatasync", os.fsync)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
