"""The purgatory: operations that wait for something to happen, each with a deadline (Kafka's
`DelayedOperationPurgatory` and `DelayedOperation`).

A request that cannot be answered yet -- a fetch waiting for data, an acks=all produce waiting
for its replicas, a group write waiting for `__consumer_offsets` to replicate, CreateTopics
waiting for its partitions' leaders -- is a `DelayedOperation`. No coroutine waits for it: the
handler returns the operation's `Pending` and the operation stays here, watched under keys
(the partitions it depends on, `CLUSTER_METADATA`), until one of three things happens:

* something changes for one of its keys: whoever changed it calls `check_and_complete(key)`
  (a partition after an append, a high watermark move or a role change; the cluster view
  after each change it applies), which asks each operation watched there
  `try_complete_on(key)` (`try_complete()`, unless the operation can judge from that key's
  change alone); those that answer True complete;
* its deadline passes: it completes with `expired` set (a timeout answer);
* it is cancelled (its connection closed): it leaves without completing.

Completion runs `on_complete()` exactly once, whichever comes first, and takes the operation
off every key and the timer. A `try_complete()` or `on_complete()` that raises fails the
operation instead (`on_failure(error)`: a request's connection closes) and never reaches the
caller of `check_and_complete`, which is an append or the cluster view.

How it works: each key has an ordered set (a dict) of its operations, so an operation
completed through one key leaves the others at once. Deadlines are in one heap with one timer
(`call_at`) at the earliest; an operation that completes early leaves its entry empty (the
operation itself is freed at once: keeping finished fetches alive until their deadline made the
garbage collector's work, and the produce path, ~15% slower), skipped when popped and swept out
when empty entries are more than half the heap. Everything runs on the event
loop's thread, so Kafka's locks and its "watch, then try again" have no counterpart here.

The clock and the scheduler are injected (`Scheduler`: the event loop, or a manual one in
tests), so expiry is tested without sleeping.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

from samsa.server.responses import Pending

log = logging.getLogger("samsa.purgatory")

# The key of operations waiting for the cluster metadata this broker sees (topics created,
# deleted or grown, partitions given leaders): checked after every change the view applies.
CLUSTER_METADATA = "cluster-metadata"

_SWEEP_MIN = 64  # dead heap entries tolerated before a sweep is considered
_EARLY_S = 0.001


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    """The clock and the scheduler a purgatory runs on: an asyncio event loop has all three."""

    def time(self) -> float: ...
    def call_at(self, when: float, callback: Callable[..., object], *args: Any) -> TimerHandle: ...
    def call_soon(self, callback: Callable[..., object], *args: Any) -> Any: ...


class DelayedOperation:
    """An operation that completes when `try_complete()` says so or at its deadline.

    Subclasses implement `try_complete()` (True when the operation can complete now; it may
    keep what it found for `on_complete`) and `on_complete()` (the answer; `self.expired`
    tells whether the deadline brought it). `timeout_ms` None: no deadline.
    """

    __slots__ = ("_entry", "_keys", "_purgatory", "completed", "deadline", "expired", "timeout_ms")

    def __init__(self, timeout_ms: float | None) -> None:
        self.timeout_ms = timeout_ms
        self.deadline: float | None = None  # on the purgatory's clock, once watched
        self.completed = False
        self.expired = False
        self._keys: tuple[Hashable, ...] | None = None  # while watched
        self._entry: list[Any] | None = None  # its entry in the deadline heap, while there
        self._purgatory: Purgatory | None = None

    def try_complete(self) -> bool:
        raise NotImplementedError

    def try_complete_on(self, key: Hashable) -> bool:
        """`try_complete` after a change for `key`: an operation watched under many keys (a
        fetch session's thousands of partitions) may look at that key's change alone."""
        return self.try_complete()

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_failure(self, error: Exception) -> None:
        """`try_complete` or `on_complete` raised: the operation is over."""
        log.error("delayed operation %r failed", self, exc_info=error)

    def force_complete(self) -> bool:
        """Complete now, whatever `try_complete` would say; False if already completed."""
        if self.completed:
            return False
        self._leave()
        try:
            self.on_complete()
        except Exception as e:
            self._failed(e)
        return True

    def cancel(self) -> None:
        """Leave the purgatory without completing (the request's connection closed)."""
        if not self.completed:
            self._leave()

    def _leave(self) -> None:
        self.completed = True
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._left(self)

    def _failed(self, error: Exception) -> None:
        try:
            self.on_failure(error)
        except Exception:
            log.exception("delayed operation %r failed, and so did its failure handler", self)


class DelayedResponse(DelayedOperation):
    """A delayed operation that answers one request: the handler returns `pending`; closing
    the request's connection cancels the operation; a failure closes the connection."""

    __slots__ = ("pending",)

    def __init__(self, timeout_ms: float | None) -> None:
        super().__init__(timeout_ms)
        self.pending = Pending()
        self.pending.on_cancel(self.cancel)

    def on_failure(self, error: Exception) -> None:
        if self.pending.done:  # answered, and then the answer's listener failed
            log.error("could not deliver the answer of %r", self, exc_info=error)
        else:
            self.pending.fail(error)


class DelayedCondition(DelayedResponse):
    """A response waiting until `ready()` holds (Kafka's DelayedCreatePartitions and
    DelayedDeleteTopics: the controller has done its part and this broker's view shows it).
    `answer()` builds the response from the state then, at the deadline too (it tells there
    what is not done yet)."""

    __slots__ = ("answer", "ready")

    def __init__(self, timeout_ms: float | None, ready: Callable[[], bool], answer: Callable[[], Any]) -> None:
        super().__init__(timeout_ms)
        self.ready = ready
        self.answer = answer

    def try_complete(self) -> bool:
        return self.ready()

    def on_complete(self) -> None:
        self.pending.complete(self.answer())


class Purgatory:
    def __init__(self, scheduler: Scheduler, name: str = "purgatory") -> None:
        self.scheduler = scheduler
        self.name = name
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        # [deadline, sequence number, operation or None once it has left]
        self._heap: list[list[Any]] = []
        self._seq = itertools.count()
        self._dead = 0  # heap entries of operations that completed before their deadline
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0
        self.delayed = 0  # operations waiting here

    def __len__(self) -> int:
        return self.delayed

    def watched(self, key: Hashable) -> int:
        """How many operations wait on `key`."""
        ws = self._watchers.get(key)
        return len(ws) if ws else 0

    # -- entering -------------------------------------------------------------------------------

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can (True); else watch it under `keys` until its deadline.
        An exception from this first `try_complete` is the caller's."""
        if op.try_complete():
            op._purgatory = self
            op.force_complete()
            return True
        self.watch(op, keys)
        return False

    def watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> None:
        """Watch `op`, which the caller has just found cannot complete yet, under `keys`. A
        timeout of 0 or less expires it at once."""
        if op.completed:
            return
        assert op._purgatory is None, "an operation enters a purgatory once"
        op._purgatory = self
        timeout_ms = op.timeout_ms
        if timeout_ms is not None and timeout_ms <= 0:
            op.deadline = self.scheduler.time()
            op.expired = True
            op.force_complete()
            return
        op._keys = keys = tuple(keys)
        watchers = self._watchers
        for key in keys:
            ws = watchers.get(key)
            if ws is None:
                watchers[key] = {op: None}
            else:
                ws[op] = None
        self.delayed += 1
        if timeout_ms is not None:
            deadline = op.deadline = self.scheduler.time() + timeout_ms / 1000
            op._entry = entry = [deadline, next(self._seq), op]
            heapq.heappush(self._heap, entry)
            if self._timer is None or deadline < self._timer_at:
                self._arm(deadline)

    # -- completing ---------------------------------------------------------------------------

    def check_and_complete(self, key: Hashable) -> int:
        """Something changed for `key`: complete the operations watched there that can now.
        Returns how many completed. Never raises."""
        ws = self._watchers.get(key)
        if not ws:
            return 0
        done = 0
        check = self.check_one
        for op in list(ws):
            done += check(op, key)
        return done

    def check_one(self, op: DelayedOperation, key: Hashable) -> bool:
        """`check_and_complete(key)` for one of the operations watched under `key`, for a caller
        that knows which ones the change may complete (a high watermark's waiters, in offset
        order). True if it completed. Never raises."""
        if op.completed:
            return False
        try:
            ready = op.try_complete_on(key)
        except Exception as e:
            op._leave()
            op._failed(e)
            return True
        if ready:  # (force_complete, inline: this runs inside every append)
            op.completed = True
            self._left(op)
            try:
                op.on_complete()
            except Exception as e:
                op._failed(e)
            return True
        return False

    def check_soon(self, key: Hashable) -> None:
        """`check_and_complete(key)` on a later turn of the loop (after a change that is
        part of a wider one: a role change, a fence)."""
        self.scheduler.call_soon(self.check_and_complete, key)

    def _left(self, op: DelayedOperation) -> None:
        """`op` completed or was cancelled: off its keys (and, lazily, the heap)."""
        keys = op._keys
        if keys is None:  # never watched (completed at once)
            return
        op._keys = None
        self.delayed -= 1
        watchers = self._watchers
        for key in keys:
            ws = watchers.get(key)
            if ws is not None:
                ws.pop(op, None)
                if not ws:
                    del watchers[key]
        entry = op._entry
        if entry is not None:  # its heap entry stays until popped or swept, without it
            entry[2] = None
            op._entry = None
            self._dead += 1
            if self._dead > _SWEEP_MIN and self._dead * 2 > len(self._heap):
                self._sweep()

    def _sweep(self) -> None:
        heap = [e for e in self._heap if e[2] is not None]
        heapq.heapify(heap)
        self._heap = heap
        self._dead = 0

    # -- expiring -------------------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.scheduler.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        # Due within a millisecond counts as due: event loops may run a timer a little early
        # (uvloop rounds to milliseconds), which would otherwise only re-arm it.
        now = self.scheduler.time() + _EARLY_S
        # (self._heap each time: an expiring operation's completion may sweep it)
        while self._heap and self._heap[0][0] <= now:
            op = heapq.heappop(self._heap)[2]
            if op is None:
                self._dead -= 1
                continue
            op._entry = None
            op.expired = True
            op.force_complete()
        heap = self._heap
        while heap and heap[0][2] is None:
            heapq.heappop(heap)
            self._dead -= 1
        if heap and (self._timer is None or heap[0][0] < self._timer_at):
            self._arm(heap[0][0])

    # -- shutdown -------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the timer and forget every operation (the broker is stopping; connections
        closing cancel their own)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        ops = {e[2]: None for e in self._heap if e[2] is not None}
        for ws in self._watchers.values():
            ops.update(ws)
        for op in ops:
            op.cancel()
        self._heap.clear()
        self._watchers.clear()
        self._dead = 0
        self.delayed = 0
