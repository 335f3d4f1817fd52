"""Moving replicas between this broker's log dirs: AlterReplicaLogDirs (Kafka's
ReplicaManager.alterReplicaLogDirs, its future replicas and ReplicaAlterLogDirsThread).

`alter` answers the request, per partition (Kafka's order and errors): a path that is not one
of the broker's log dirs (absolute paths compared) is LOG_DIR_NOT_FOUND, an offline one
KAFKA_STORAGE_ERROR; a partition not hosted here is REPLICA_NOT_AVAILABLE, and the dir is
remembered for it (`LogManager.preferred_dirs`: created there if it comes); one whose log dir
failed is KAFKA_STORAGE_ERROR; one already in that dir is NONE and nothing happens; one already
moving elsewhere stops that move (its copy is deleted) and moves to the new dir instead. While
any log dir is offline no copy is started (KAFKA_STORAGE_ERROR), as in Kafka.

A move is one asyncio task; what touches the disk runs in a small pool of worker threads
(lower CPU priority, as the log cleaner's), the event loop only takes snapshots and swaps
references. The on-disk protocol, and what a crash at any point leaves and how startup settles
it, are storage/log_move.py's. The task:

1. creates the future log in the destination dir (`<topic>-<partition>.<uuid>-future`);
2. copies, in rounds: on the loop, a slice of the current log from the future's log end
   offset (the bytes' descriptor duplicated: retention may delete the segment meanwhile) and the
   aborted transactions it has yet to index; in a worker, the slice's whole batches are read,
   checked (CRC) and appended with their offsets and leader epochs. Appends and fetches go on
   meanwhile; a truncation of the current log (a follower's) is noted (`Log.on_truncate`) and
   the future follows it before the next round; a log start offset that passed the copy
   restarts it there. The rounds share `replica.alter.log.dirs.io.max.bytes.per.second`
   (dynamic; Kafka's quota for all moves of a broker), waited out on the loop, no thread held;
3. when the copy has caught up: flushes it (a worker) and catches up again, pauses the
   partition's replication if it is a follower (`Partition.swapping_log`: no truncation from
   here) and commits the copy (a worker: renamed `<topic>-<partition>`, marked as the copy);
4. swaps, on the loop, between two appends: the batches appended since (at most
   FINAL_CATCHUP_BYTES; more, and it goes back to 3's catch-up) are appended to the copy, which
   takes the current's log start offset, leader epochs and producer state, and becomes the
   partition's log (and the LogManager's). Offsets, high watermark and producer state are the
   same objects or numbers as before;
5. retires the old log (a worker: its dir renamed `-delete`, the copy's mark removed, the
   checkpoints written, the old dir deleted); its descriptors close after file.delete.delay.ms
   (fetches in flight may still be reading them). The log cleaner skips the partition from 1 to
   here (Kafka's abortAndPauseCleaning).

DescribeLogDirs lists a future replica (`futures`) in its destination dir, with its size and
offset lag (current log end offset - future log end offset), from 1 until the swap.

A move stopped by a shutdown leaves its copy on disk as `-future` (one already committed gets
that name back); the next start removes it and starts the move again from scratch (`resume`,
from LogManager.interrupted_moves), where Kafka resumes the copy where it was.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from samsa.config import BrokerConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import InvalidRecords
from samsa.server.log_cleaner import LogCleaner
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.storage import log_move
from samsa.storage.errors import OffsetOutOfRange, StorageError
from samsa.storage.log import Log
from samsa.storage.log_manager import LogManager, write_checkpoints
from samsa.storage.partition_log import FileSlice

log = logging.getLogger("samsa.storage")

TopicPartition = tuple[str, int]
T = TypeVar("T")

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"
NO_THROTTLE = 2**63 - 1
MIN_CHUNK = 16 << 10  # a round copies at least this (and a whole batch), throttled or not
FINAL_CATCHUP_BYTES = 256 << 10  # most bytes the swap copies on the loop (from the page cache)
IDLE_S = 0.05  # a round that found nothing to copy where it expected some waits this long
THROTTLE_RECHECK_S = 0.5  # a throttled wait reads the rate again this often
MOVER_NICE = 10  # how much lower than the broker's the copying threads' CPU priority is


class FutureInfo(NamedTuple):
    """A future replica, as DescribeLogDirs lists it."""

    log_dir: Path
    size: int
    log_end_offset: int


@dataclass
class Pacer:
    """Bytes per second over all moves (Kafka's Throttler, as the log cleaner's): a second's
    credit, then each copy's bytes are booked at the rate after those booked before; `book`
    says how long to wait (on the loop: no thread is held while a move is throttled)."""

    clock: Callable[[], float] = time.monotonic
    _booked: float = float("-inf")  # when the bytes counted so far are done, at the rate

    CREDIT_S = 1.0

    def book(self, n: int, rate: float) -> float:
        """Count `n` bytes copied at `rate` bytes/s (0: no limit); the seconds to wait."""
        if rate <= 0:
            return 0.0
        now = self.clock()
        self._booked = max(self._booked, now - self.CREDIT_S) + n / rate
        return max(self._booked - now, 0.0)

    def reset(self) -> None:
        """Forget what was booked (the rate changed: what it priced no longer holds)."""
        self._booked = float("-inf")


class _Stop(Exception):
    """The move ends here: `keep` the copy on disk (a shutdown), or delete it."""

    def __init__(self, why: str, keep: bool = False) -> None:
        super().__init__(why)
        self.keep = keep


@dataclass(eq=False)
class FutureReplica:
    """One move in progress."""

    tp: TopicPartition
    partition: Partition
    source: Log  # the partition's log when the move started
    dest: Path  # the destination log dir
    future: Log | None = None  # the copy (a worker thread's while a round runs)
    log_end_offset: int = -1  # the copy's, as of its last round
    size: int = 0
    truncated: tuple[int, bool] | None = None  # (offset, fully): a truncation of the source to follow
    committed: bool = False
    swapped: bool = False
    cancelled: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def note_truncation(self, offset: int, fully: bool) -> None:
        """Log.on_truncate of the source: the copy must cut (or restart) there too."""
        if self.truncated is None or fully or offset < self.truncated[0]:
            self.truncated = (offset, fully or (self.truncated is not None and self.truncated[1]))


class ReplicaAlterLogDirsManager:
    def __init__(self, loop: asyncio.AbstractEventLoop, logs: LogManager, replicas: ReplicaManager,
                 config: Callable[[], BrokerConfig], cleaner: LogCleaner | None,
                 on_storage_error: Callable[[Path, OSError], None]) -> None:
        self.loop = loop
        self.logs = logs
        self.replicas = replicas
        self._config = config
        self.cleaner = cleaner
        self.on_storage_error = on_storage_error
        self.moves: dict[TopicPartition, FutureReplica] = {}
        self.throttler = Pacer()
        self._pool = ThreadPoolExecutor(max(1, len(logs.log_dirs)), thread_name_prefix="alter-log-dirs",
                                        initializer=_give_way)
        self._closing = False

    def _rate(self) -> float:
        rate = int(self._config().get(THROTTLE_KEY))
        return 0.0 if rate >= NO_THROTTLE else float(max(rate, 1))

    # -- the request ------------------------------------------------------------------------------

    def alter(self, wanted: Mapping[TopicPartition, str]) -> dict[TopicPartition, ErrorCode]:
        """Move each partition's replica to the log dir named (AlterReplicaLogDirs); per partition,
        the error (NONE: moving, or there already)."""
        out = {}
        for tp, path in wanted.items():
            try:
                out[tp] = self._alter(tp, path)
            except Exception:  # (answered, the others still tried)
                log.exception("Cannot move %s-%d to log dir %s", tp[0], tp[1], path)
                out[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
        return out

    def _alter(self, tp: TopicPartition, path: str) -> ErrorCode:
        dest = self.logs.log_dir_named(path)
        if dest is None:
            return ErrorCode.LOG_DIR_NOT_FOUND
        if len(f"{tp[0]}-{tp[1]}.{'0' * 32}{log_move.FUTURE_DIR_SUFFIX}") > log_move.MAX_DIR_NAME:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        if dest in self.logs.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        part = self.replicas.get(*tp)
        if part is None:
            if tp in self.replicas.offline:
                return ErrorCode.KAFKA_STORAGE_ERROR
            self.logs.preferred_dirs[tp] = dest  # (Kafka: created there when this broker gets it)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        moving = self.moves.get(tp)
        if moving is not None and not moving.cancelled:
            if moving.dest == dest:
                return ErrorCode.NONE
            # (Kafka's too) the new destination replaces the old; a move already swapped only
            # retires its old dir, and the new one starts after that
            self._cancel(moving, f"moving to {dest} instead")
        current = part.log
        if current.dir.parent == dest:
            return ErrorCode.NONE
        if not isinstance(current, Log):
            return ErrorCode.KAFKA_STORAGE_ERROR  # (the null engine has no files to move)
        if self.logs.offline_dirs:
            return ErrorCode.KAFKA_STORAGE_ERROR
        self._start(tp, part, current, dest, previous=moving)
        return ErrorCode.NONE

    def _start(self, tp: TopicPartition, part: Partition, current: Log, dest: Path,
               previous: FutureReplica | None) -> None:
        move = FutureReplica(tp, part, current, dest)
        self.moves[tp] = move
        if self.cleaner is not None:
            self.cleaner.pause(tp)
        log.info("Moving %s-%d from log dir %s to %s", tp[0], tp[1], current.dir.parent, dest)
        move.task = self.loop.create_task(self._run(move, previous), name=f"alter-log-dir {tp[0]}-{tp[1]}")

    def resume(self, interrupted: Mapping[TopicPartition, Path]) -> None:
        """Start again the moves a stop interrupted (found at startup), for the partitions still here."""
        for tp, dest in interrupted.items():
            part = self.replicas.get(*tp)
            if part is None or part.log.dir.parent == dest or tp in self.moves:
                continue
            code = self._alter(tp, str(dest.absolute()))
            if code == ErrorCode.NONE:
                log.info("Started again the move of %s-%d to log dir %s, interrupted by the last stop", tp[0], tp[1],
                         dest)
            else:
                log.warning("Cannot start again the move of %s-%d to log dir %s, interrupted by the last stop: %s",
                            tp[0], tp[1], dest, code.name)

    # -- what DescribeLogDirs shows ---------------------------------------------------------------

    def futures(self) -> dict[TopicPartition, FutureInfo]:
        return {tp: FutureInfo(m.dest.absolute(), m.size, m.log_end_offset) for tp, m in self.moves.items()
                if m.future is not None and not m.swapped and not m.cancelled}

    # -- stopping moves ---------------------------------------------------------------------------

    def abort(self, tp: TopicPartition, why: str) -> None:
        """The partition leaves this broker or its log dir (deleted, reassigned, failed)."""
        move = self.moves.get(tp)
        if move is not None:
            self._cancel(move, why)

    def on_log_dir_failed(self, d: Path) -> None:
        for move in list(self.moves.values()):
            if move.dest == d or move.source.dir.parent == d:
                self._cancel(move, f"log dir {d} failed")

    def _cancel(self, move: FutureReplica, why: str) -> None:
        if move.cancelled or move.swapped:
            return
        log.info("Stopping the move of %s-%d to log dir %s: %s", move.tp[0], move.tp[1], move.dest, why)
        move.cancelled = True
        move.wakeup.set()

    async def shutdown(self) -> None:
        """Stop every move at its next step; their copies stay on disk (the next start settles
        them, log_move.py)."""
        self._closing = True
        tasks = [m.task for m in self.moves.values() if m.task is not None]
        for m in self.moves.values():
            m.wakeup.set()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._pool.shutdown(wait=False)

    # -- one move ---------------------------------------------------------------------------------

    async def _run(self, move: FutureReplica, previous: FutureReplica | None) -> None:
        tp = move.tp
        keep = False
        try:
            if previous is not None and previous.task is not None:
                await asyncio.wait([previous.task])
            self._check(move)
            move.source.on_truncate = move.note_truncation
            await self._copy(move)
            await self._catch_up_and_swap(move)
            await self._retire(move)
        except _Stop as e:
            keep = e.keep
            if not keep:
                log.info("Move of %s-%d to log dir %s stopped: %s", tp[0], tp[1], move.dest, e)
        except OSError as e:
            log.error("Move of %s-%d to log dir %s failed: %s", tp[0], tp[1], move.dest, e)
            if not move.swapped:
                self.on_storage_error(move.dest, e)
        except Exception:
            log.exception("Move of %s-%d to log dir %s failed", tp[0], tp[1], move.dest)
        finally:
            await self._finish(move, keep)

    def _check(self, move: FutureReplica) -> None:
        if self._closing:
            raise _Stop("the broker is stopping", keep=True)
        if move.cancelled:
            raise _Stop("cancelled")
        part = move.partition
        if self.replicas.get(*move.tp) is not part or (not move.swapped and part.log is not move.source):
            raise _Stop("the partition's log changed (deleted, moved off this broker, or its log dir failed)")
        if move.dest in self.logs.offline_dirs:
            raise _Stop(f"log dir {move.dest} is offline")

    async def _in_thread(self, move: FutureReplica, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn` in a worker, then `_check` (for a call whose result matters even if the move
        stops meanwhile, use `_worker` and check after keeping it)."""
        result = await self._worker(fn, *args, **kwargs)
        self._check(move)
        return result

    async def _worker(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await self.loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))

    async def _wait(self, move: FutureReplica, seconds: float) -> None:
        if seconds > 0:
            try:
                await asyncio.wait_for(move.wakeup.wait(), seconds)
            except TimeoutError:
                pass
        self._check(move)

    async def _copy(self, move: FutureReplica) -> None:
        """Steps 1-2 and 3's flush: create the copy, then rounds until it has caught up, flush it,
        rounds until it has caught up again."""
        source = move.source
        move.future = await self._worker(log_move.create_future, move.dest, move.tp[0], move.tp[1], source.config,
                                         start_offset=_copy_start(source), source=source.dir, clock=time.time)
        self._check(move)
        self._observe(move)
        flushed = False
        while True:
            if await self._round(move):
                if flushed:
                    return
                future = move.future
                assert future is not None
                await self._in_thread(move, future.flush)  # (most of the fsyncs, before the commit)
                flushed = True

    async def _round(self, move: FutureReplica) -> bool:
        """One round of copying (it always waits: for a worker, or a moment); True when the
        copy has caught up with what the source held when the round began."""
        future, source = move.future, move.source
        assert future is not None
        if move.truncated is not None:
            offset, fully = move.truncated
            move.truncated = None
            if fully:
                await self._in_thread(move, future.truncate_fully_and_start_at, offset)
            elif future.log_end_offset > offset:
                await self._in_thread(move, future.truncate_to, offset)
            self._observe(move)
        start = future.log_end_offset
        end = source.log_end_offset
        if start < source.log_start_offset and _copy_start(source) > start:
            # (retention or DeleteRecords passed the copy: it restarts where the source starts)
            await self._in_thread(move, future.truncate_fully_and_start_at, _copy_start(source))
            self._observe(move)
            return False
        if start > end:
            raise _Stop(f"the copy ({start}) is past the log end offset {end}")
        # (a copy starts at the base of the batch holding the log start offset: read from there)
        sl = _read(source, max(start, source.log_start_offset), self._chunk())
        if start == end or sl is None or sl.size == 0:
            await self._wait(move, IDLE_S if start < end else 0)  # (start < end: moved under it)
            return start == end
        aborted = source.aborted_txns_from(start)
        fd = os.dup(sl.fd)
        try:
            copied = await self._in_thread(move, log_move.copy_slice, future, sl, fd, aborted)
        except InvalidRecords:  # a torn read: the source was truncated under it (noted)
            return False
        except log_move.SourceUnreadable as e:
            raise _Stop(str(e)) from None
        except StorageError as e:
            if move.truncated is not None:
                return False
            raise _Stop(f"the copy does not follow the log: {e}") from None
        self._observe(move)
        await self._pay(move, copied)
        return future.log_end_offset >= end

    async def _pay(self, move: FutureReplica, nbytes: int) -> None:
        """Wait until `nbytes` copied are paid for at the throttle's rate, read again as the wait
        goes (a throttle changed or removed meanwhile applies at once, as the replica fetchers')."""
        rate = self._rate()
        wait = self.throttler.book(nbytes, rate)
        while wait > 0:
            step = min(wait, THROTTLE_RECHECK_S)
            await self._wait(move, step)
            wait -= step
            now = self._rate()
            if now != rate:
                self.throttler.reset()
                if not now:
                    return
                wait, rate = wait * rate / now, now

    def _chunk(self) -> int:
        fetch = int(self._config().get("replica.fetch.max.bytes"))
        rate = self._rate()
        return max(MIN_CHUNK, min(fetch, int(rate)) if rate else fetch)

    def _observe(self, move: FutureReplica) -> None:
        future = move.future
        if future is not None:
            move.log_end_offset = future.log_end_offset
            move.size = future.size_in_bytes

    async def _catch_up_and_swap(self, move: FutureReplica) -> None:
        """Steps 3-4: pause the follower, commit, swap (more rounds while the swap would copy too much)."""
        part = move.partition
        part.swapping_log = True
        while True:
            if move.truncated is None and not move.committed:
                future = move.future
                assert future is not None
                move.future = await self._worker(log_move.commit, future, move.source.dir, clock=time.time)
                move.committed = True
                self._check(move)
                self._observe(move)
            if move.truncated is None and self._swap(move):
                self.logs.release_later(move.source)  # (fetches in flight may still read it)
                return
            await self._round(move)

    def _swap(self, move: FutureReplica) -> bool:
        """On the loop, in one go: catch up the last batches and make the copy the partition's log.
        False when that would copy more than FINAL_CATCHUP_BYTES (what was copied stays)."""
        source, future, part = move.source, move.future, move.partition
        assert future is not None
        budget = FINAL_CATCHUP_BYTES
        while future.log_end_offset < source.log_end_offset:
            if budget <= 0:
                self._observe(move)
                return False
            sl = _read(source, max(future.log_end_offset, source.log_start_offset), budget)
            if sl is None or sl.size == 0:
                break
            try:
                data = source.read_bytes(sl)
            except OSError as e:
                raise _Stop(f"cannot read the log being copied: {e}") from None
            n = log_move.append_copy(future, data, source.aborted_txns_from(future.log_end_offset), verify_crc=False)
            if n == 0:
                return False
            budget -= n
        if future.log_end_offset != source.log_end_offset:
            return False
        if source.log_start_offset > future.log_start_offset:
            future.delete_records_before(source.log_start_offset)
        future.leader_epochs.copy_from(source.leader_epochs)
        future.producers = source.producers
        future.update_config(source.config)
        source.on_truncate = None
        part.log = future
        self.logs.replace_log(move.tp, future)
        move.swapped = True
        self._observe(move)
        return True

    async def _retire(self, move: FutureReplica) -> None:
        """Step 5: the old dir renamed `-delete` (durably), the copy unmarked, checkpoints, the
        old dir deleted."""
        future = move.future
        assert future is not None
        snapshot = self.logs.checkpoint_snapshot()

        def retire() -> None:
            doomed = log_move.retire(move.source.dir, future.dir)
            write_checkpoints(snapshot)
            log_move.remove(doomed)

        await self.loop.run_in_executor(self._pool, retire)
        log.info("Moved %s-%d from log dir %s to %s (log end offset %d)", move.tp[0], move.tp[1],
                 move.source.dir.parent, move.dest, future.log_end_offset)

    async def _finish(self, move: FutureReplica, keep: bool) -> None:
        """After the move, done or not: the copy deleted unless it serves (at a shutdown only
        closed, and named `-future` again if committed: the next start removes it and starts
        the move again), the follower's replication and the cleaning resumed."""
        tp, future = move.tp, move.future
        if move.source.on_truncate == move.note_truncation:
            move.source.on_truncate = None
        if future is not None and not move.swapped:
            committed = move.committed

            def drop() -> None:
                if not keep:
                    future.delete()  # (renamed `-delete` first, then removed)
                    return
                future.close()
                if committed:
                    log_move.uncommit(future.dir)

            try:
                await self.loop.run_in_executor(self._pool, drop)
            except (OSError, RuntimeError) as e:
                log.warning("Could not remove the copy %s: %s (the next start does)", future.dir, e)
        move.partition.swapping_log = False
        if self.moves.get(tp) is move:
            del self.moves[tp]
            if self.cleaner is not None:
                self.cleaner.resume(tp)


def _copy_start(source: Log) -> int:
    """Where a copy of `source` starts: the base offset of the batch holding its log start
    offset (its end, when it holds nothing)."""
    sl = _read(source, source.log_start_offset, 1)
    return sl.first_batch_offset if sl is not None else source.log_end_offset


def _read(source: Log, offset: int, max_bytes: int) -> FileSlice | None:
    """`source.read` for a copy: None where it has nothing (or moved meanwhile); a disk error
    stops the move (it is the source's dir's, for the broker to find, not the copy's)."""
    try:
        sl = source.read(offset, max_bytes)
    except OffsetOutOfRange:
        return None
    except OSError as e:
        raise _Stop(f"cannot read the log being copied: {e}") from None
    return sl if isinstance(sl, FileSlice) else None


def _give_way() -> None:
    """A copying thread gives way to the threads serving produce and fetch (as the log
    cleaner's do): on Linux a thread's nice value is its own. Best effort."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), MOVER_NICE)
    except (AttributeError, OSError):
        pass
