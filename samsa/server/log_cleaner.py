"""LogCleaner: compacts the logs of topics with `cleanup.policy=compact` (Kafka's LogCleaner and
LogCleanerManager; the cleaning itself is samsa/storage/cleaner.py).

How it works: a tick on the event loop (every `log.cleaner.backoff.ms`, and whenever a clean
ends) fills the free cleaner slots (`log.cleaner.threads`). For each slot it picks the
"filthiest" log: among the compacted logs this broker holds that are not being cleaned and not
marked uncleanable, the one with the highest dirty ratio over its `min.cleanable.dirty.ratio`
(or any whose oldest dirty record is older than `max.compaction.lag.ms`). It takes the clean's
snapshot (`Log.cleaning_job`) on the loop, runs `clean` in a child process started and awaited
by a worker thread (samsa/server/clean_process.py: only files are touched there), and swaps
the result in on the loop (`Log.finish_clean`: renames and opens, nothing that waits). The
cleaned range's end goes to the log dir's `cleaner-offset-checkpoint` (Kafka's file: `topic
partition first-dirty-offset`), written by a worker thread.

The dirty section is bounded above by the last stable offset (never past an open
transaction, never past the high watermark), the active segment and `min.compaction.lag.ms`.
A clean whose input is corrupt (CleanerError) marks that log uncleanable, with the reason, in
the broker's log and in `describe()`: it is not retried until the broker restarts, as in
Kafka. The other logs carry on.

Throttle: `log.cleaner.io.max.bytes.per.second` (dynamic) bounds the bytes read plus written
by all cleans together; each child gets the limit over the cleans running and sleeps when over
it. Memory: `log.cleaner.dedupe.buffer.size` is shared by the threads, as in Kafka: each clean
gets 1/threads of it for its offset map.

State per log (`describe()`): dirty ratio now, the last clean's time and figures, bytes
reclaimed since start, uncleanable and why. The broker logs one summary line per clean.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from samsa.server.clean_process import CLEANER_NICE, SUPPORTED, Throttler, clean_in_process
from samsa.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_cleaner_offsets, write_cleaner_offsets
from samsa.storage.cleaner import CleanAborted, CleanerError, CleanJob, PreparedClean, clean, cleanable_range
from samsa.storage.errors import CorruptCheckpoint, StorageError
from samsa.storage.log import Log
from samsa.storage.offset_map import NATIVE, new_offset_map

log = logging.getLogger("samsa.cleaner")

TopicPartition = tuple[str, int]


class CleanablePartition(Protocol):
    """What the cleaner needs of a partition (replica_manager.Partition)."""

    topic: str
    index: int

    @property
    def log(self) -> Any: ...

    @property
    def last_stable_offset(self) -> int: ...


class CleanerConfig(Protocol):
    def get(self, key: str) -> Any: ...


@dataclass
class LogCleaningState:
    """What describe() reports of one log."""

    first_dirty: int = 0
    in_progress: bool = False
    uncleanable: str | None = None
    last_clean_ms: int | None = None
    last_summary: str = ""
    cleans: int = 0
    bytes_reclaimed: int = 0
    dirty_ratio: float = 0.0


class LogCleaner:
    def __init__(self, loop: asyncio.AbstractEventLoop, config: Callable[[], CleanerConfig],
                 partitions: Callable[[], Iterable[CleanablePartition]], log_dirs: Callable[[], Iterable[Path]],
                 clock: Callable[[], float] = time.time) -> None:
        self.loop = loop
        self._config = config
        self._partitions = partitions
        self._log_dirs = log_dirs
        self._clock = clock
        self.states: dict[TopicPartition, LogCleaningState] = {}
        self.paused: set[TopicPartition] = set()  # not cleaned for now (a move between log dirs)
        self._running: dict[TopicPartition, tuple[Log, threading.Event]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._checkpoint_generation = 0
        self._closed = False
        self.throttler = Throttler(self._rate)
        # Each clean runs in a child process (samsa/server/clean_process.py: its own GIL, nice 10),
        # where the system allows; else in the worker thread itself.
        self.in_process = SUPPORTED

    def _rate(self) -> float:
        return float(self._config().get("log.cleaner.io.max.bytes.per.second"))

    def _rate_share(self) -> float:
        """A child's share of the I/O limit: the limit over the cleans running now."""
        return self._rate() / max(len(self._running), 1)

    # -- life ------------------------------------------------------------------------------------

    def load_checkpoints(self) -> None:
        """Read every log dir's cleaner-offset-checkpoint (at start-up, off the loop)."""
        for d in self._log_dirs():
            try:
                offsets = read_cleaner_offsets(Path(d))
            except CorruptCheckpoint as e:
                log.warning("Ignoring %s (%s): every compacted log there is dirty from its start",
                            Path(d) / CLEANER_OFFSET_CHECKPOINT, e)
                continue
            for tp, offset in offsets.items():
                self.states.setdefault(tp, LogCleaningState()).first_dirty = offset

    def start(self) -> None:
        if not self._enabled():
            log.info("The log cleaner is off (log.cleaner.enable=false or log.cleaner.threads=0): compacted "
                     "topics are not compacted")
            return
        if not NATIVE:
            log.warning("The log cleaner runs in Python (samsa/storage/_cleaner.c was not compiled: run "
                        "scripts/install-deps.sh with a C compiler): compaction is many times slower")
        self._schedule(0)

    async def shutdown(self) -> None:
        """Stop: running cleans are aborted (their files removed); the checkpoint is written."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for _, stop in self._running.values():
            stop.set()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        await self.loop.run_in_executor(None, self._write_checkpoints, self._checkpoint_snapshot())

    def _enabled(self) -> bool:
        return bool(self._config().get("log.cleaner.enable")) and int(self._config().get("log.cleaner.threads")) > 0

    def _schedule(self, delay_s: float) -> None:
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(delay_s, self.tick)

    # -- choosing work ----------------------------------------------------------------------------

    def tick(self) -> None:
        """Start cleans in the free slots; come back after log.cleaner.backoff.ms."""
        self._timer = None
        if self._closed:
            return
        try:
            if self._enabled():
                threads = int(self._config().get("log.cleaner.threads"))
                while len(self._running) < threads:
                    if not self._start_one(threads):
                        break
        except Exception:
            log.exception("The log cleaner could not choose a log to clean")
        self._schedule(int(self._config().get("log.cleaner.backoff.ms")) / 1000)

    def _candidates(self, now_ms: int) -> list[tuple[float, CleanablePartition, Any]]:
        found = []
        for part in self._partitions():
            lg = part.log
            if not isinstance(lg, Log) or not lg.config.compact_enabled:
                continue
            tp = (part.topic, part.index)
            state = self.states.setdefault(tp, LogCleaningState())
            if tp in self._running or state.uncleanable is not None or tp in self.paused:
                continue
            rng = cleanable_range(lg, state.first_dirty, last_stable_offset=part.last_stable_offset, now_ms=now_ms)
            state.dirty_ratio = rng.dirty_ratio
            if rng.due:
                found.append((rng.dirty_ratio, part, rng))
        return found

    def _start_one(self, threads: int) -> bool:
        now_ms = int(self._clock() * 1000)
        candidates = self._candidates(now_ms)
        if not candidates:
            return False
        _, part, rng = max(candidates, key=lambda c: c[0])
        lg = part.log
        tp = (part.topic, part.index)
        try:
            job = lg.cleaning_job(rng.first_dirty, rng.first_uncleanable, now_ms)
        except StorageError as e:  # (a clean of it not finished: cannot happen while it is in _running)
            log.warning("Cannot clean %s-%d now: %s", tp[0], tp[1], e)
            return False
        if job is None:
            self.states[tp].first_dirty = rng.first_uncleanable  # nothing dirty below it
            return False
        stop = threading.Event()
        self._running[tp] = (lg, stop)
        self.states[tp].in_progress = True
        task = self.loop.create_task(self._run(tp, lg, job, stop, threads), name=f"clean {tp[0]}-{tp[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _executor(self, threads: int) -> ThreadPoolExecutor:
        if self._pool is None or self._pool_size != threads:
            if self._pool is not None:
                self._pool.shutdown(wait=False)  # (running cleans finish there)
            self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-cleaner",
                                            initializer=_lower_priority)
            self._pool_size = threads
        return self._pool

    # -- one clean --------------------------------------------------------------------------------

    async def _run(self, tp: TopicPartition, lg: Log, job: CleanJob, stop: threading.Event, threads: int) -> None:
        state = self.states[tp]
        cfg = self._config()
        started = time.monotonic()
        buffer = int(cfg.get("log.cleaner.dedupe.buffer.size")) // threads
        load_factor = float(cfg.get("log.cleaner.io.buffer.load.factor"))
        # Kafka's log.cleaner.io.buffer.size is all threads' read and write buffers: half of a
        # thread's share is its read buffer (writes go out one batch at a time)
        read_buffer = int(cfg.get("log.cleaner.io.buffer.size")) // threads // 2

        def work() -> PreparedClean:
            if self.in_process:
                return clean_in_process(job, dedupe_buffer_size=buffer, load_factor=load_factor,
                                        read_buffer_size=read_buffer, rate=self._rate_share, stop=stop)
            offset_map = new_offset_map(buffer, load_factor)
            try:
                return clean(job, offset_map, throttle=self.throttler, stop=stop, read_buffer_size=read_buffer)
            finally:
                offset_map.clear()  # (its memory goes back until the next clean)

        try:
            prepared = await self.loop.run_in_executor(self._executor(threads), work)
        except (CleanAborted, CleanerError, OSError, RuntimeError) as e:
            lg.abandon_clean(job)
            if isinstance(e, CleanerError):
                state.uncleanable = e.reason
                log.error("Marking %s-%d uncleanable: %s. Its records are served as before; it is not cleaned "
                          "again until the broker restarts", tp[0], tp[1], e.reason)
            elif isinstance(e, OSError):
                state.uncleanable = f"I/O error: {e}"
                log.error("Marking %s-%d uncleanable after an I/O error while cleaning it: %s", tp[0], tp[1], e)
            elif isinstance(e, RuntimeError) and not self._closed:  # (the pool shut down under it)
                raise
            return
        finally:
            state.in_progress = False
            self._running.pop(tp, None)
        if self._closed or self._current_log(tp) is not lg:
            lg.abandon_clean(prepared)
            return
        swapped = lg.finish_clean(prepared)
        if swapped is not None and swapped.groups == len(prepared.groups):
            state.first_dirty = swapped.end_offset  # (a group skipped: the next clean covers its range again)
        state.cleans += 1
        state.last_clean_ms = int(self._clock() * 1000)
        elapsed = time.monotonic() - started
        if swapped is not None:
            state.bytes_reclaimed += max(swapped.bytes_before - swapped.bytes_after, 0)
        state.last_summary = summary(tp, prepared, swapped, elapsed)
        log.info("%s", state.last_summary)
        self._checkpoint()
        self._schedule(0)

    def _current_log(self, tp: TopicPartition) -> Any:
        for part in self._partitions():
            if (part.topic, part.index) == tp:
                return part.log
        return None

    def pause(self, tp: TopicPartition) -> None:
        """Abort the log's clean and clean it no more until `resume` (Kafka's
        abortAndPauseCleaning, while its replica moves to another log dir)."""
        self.paused.add(tp)
        running = self._running.get(tp)
        if running is not None:
            running[1].set()

    def resume(self, tp: TopicPartition) -> None:
        self.paused.discard(tp)

    def on_log_removed(self, tp: TopicPartition) -> None:
        """A log deleted or moved away: abort its clean and forget it (its files are gone)."""
        running = self._running.get(tp)
        if running is not None:
            running[1].set()
        self.states.pop(tp, None)

    # -- the checkpoint ---------------------------------------------------------------------------

    def _checkpoint_snapshot(self) -> tuple[int, dict[Path, dict[TopicPartition, int]]]:  # (on the loop)
        self._checkpoint_generation += 1
        per_dir: dict[Path, dict[TopicPartition, int]] = {Path(d): {} for d in self._log_dirs()}
        for part in self._partitions():
            lg = part.log
            tp = (part.topic, part.index)
            state = self.states.get(tp)
            if not isinstance(lg, Log) or state is None or not lg.config.compact_enabled:
                continue
            per_dir.setdefault(lg.dir.parent, {})[tp] = state.first_dirty
        return self._checkpoint_generation, per_dir

    @staticmethod
    def _write_checkpoints(snapshot: tuple[int, dict[Path, dict[TopicPartition, int]]]) -> None:
        generation, per_dir = snapshot
        for d, offsets in per_dir.items():
            try:
                write_cleaner_offsets(d, offsets, generation)
            except OSError as e:
                log.warning("Could not write %s: %s", d / CLEANER_OFFSET_CHECKPOINT, e)

    def _checkpoint(self) -> None:
        fut = self.loop.run_in_executor(None, self._write_checkpoints, self._checkpoint_snapshot())
        fut.add_done_callback(lambda f: None if f.cancelled() else f.exception())

    # -- what it reports ---------------------------------------------------------------------------

    def describe(self) -> dict[TopicPartition, LogCleaningState]:
        """Each compacted log's state, with its dirty ratio as of now."""
        now_ms = int(self._clock() * 1000)
        out = {}
        for part in self._partitions():
            lg = part.log
            if not isinstance(lg, Log) or not lg.config.compact_enabled:
                continue
            tp = (part.topic, part.index)
            state = self.states.setdefault(tp, LogCleaningState())
            if not state.in_progress:
                state.dirty_ratio = cleanable_range(lg, state.first_dirty, last_stable_offset=part.last_stable_offset,
                                                    now_ms=now_ms).dirty_ratio
            out[tp] = state
        return out


def _lower_priority() -> None:
    """A cleaner thread gives way to the threads serving produce and fetch: on Linux a thread's
    nice value is its own (setpriority on its thread id), so the scheduler runs the event loop
    first when both want a core. Best effort: elsewhere it is a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CLEANER_NICE)
    except (AttributeError, OSError):
        pass


def summary(tp: TopicPartition, prepared: PreparedClean, swapped: Any, elapsed: float) -> str:
    """One line per clean, with Kafka's cleaner-stats figures."""
    mb = prepared.bytes_read / 1e6
    head = (f"Cleaned {tp[0]}-{tp[1]} up to offset {prepared.end_offset} (dirty from {prepared.first_dirty}): "
            f"{mb:.1f} MB read in {elapsed:.2f} s ({mb / elapsed if elapsed > 0 else 0:.1f} MB/s), "
            f"{prepared.bytes_written / 1e6:.1f} MB written, {prepared.records_removed:,} of "
            f"{prepared.records_read:,} records removed, offset map {100 * prepared.map_utilization:.0f}% full")
    if swapped is None:
        return head + "; the log changed meanwhile: nothing swapped in"
    before, after = swapped.bytes_before, swapped.bytes_after
    cut = 100 * (before - after) / before if before else 0.0
    return head + (f"; {swapped.segments_before} segments into {swapped.groups}, {before:,} -> {after:,} bytes "
                   f"({cut:.1f}% smaller)")
