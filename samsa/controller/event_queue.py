"""One task consuming a queue of events, in order: Kafka's ControllerEventManager.

Watch callbacks and timers only `put` an event (a function and its arguments); the task
runs them one at a time, awaiting those that are coroutines (a ZooKeeper write), so the
state they change has a single writer and every change is applied in the order it was
seen. `call` puts an event and awaits its result (an admin API served by the controller).

A long burst of events (10,000 partition states at start-up) is cut into slices: after
`slice_s` of work the task yields to the loop, so client requests are served in between.

A failing event is logged, not raised: a store error is a warning (the watch that caused
the event fires again once the store is back), anything else an error with its traceback;
the queue carries on with the next event.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from samsa.metadata.store import StoreError
from samsa.ratelimit import RateLimitedLog


class EventQueue:
    def __init__(self, name: str, logger: logging.Logger, *, clock: Callable[[], float] = time.monotonic,
                 slice_s: float = 0.02) -> None:
        self.name = name
        self._log = logger
        self._warn = RateLimitedLog(logger, interval_s=10.0, clock=clock)
        self._clock = clock
        self._slice_s = slice_s
        self._events: deque[tuple[Callable[..., Any], tuple[Any, ...], asyncio.Future[Any] | None]] = deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy = False
        self._stopped = False
        self.processed = 0
        self._drain_waiters: list[asyncio.Future[None]] = []

    def start(self) -> None:
        if self._task is None:
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            if self._events:
                self._wake.set()

    def put(self, fn: Callable[..., Any], *args: Any) -> None:
        self._events.append((fn, args, None))
        if self._wake is not None:
            self._wake.set()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` in its turn on the queue's task and return (or raise) its result."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._events.append((fn, args, fut))
        if self._wake is not None:
            self._wake.set()
        return await fut

    @property
    def idle(self) -> bool:
        return not self._events and not self._busy

    async def drained(self) -> None:
        """Return once every event queued so far, and every event they queued, has run."""
        while not self.idle:
            fut = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(fut)
            await fut

    def clear(self) -> None:
        """Drop the events not run yet (callers of `call` get a StoreError)."""
        while self._events:
            _, _, fut = self._events.popleft()
            if fut is not None and not fut.done():
                fut.set_exception(StoreError(f"{self.name}: cancelled"))

    async def stop(self) -> None:
        self.clear()
        self._stopped = True
        if self._task is not None:
            # The flag as well as the cancellation: Python 3.11's asyncio.wait_for drops a
            # cancellation that arrives as its inner wait completes (the controller's failover
            # waits so for the view), and the task then went back to waiting for events forever.
            if self._wake is not None:
                self._wake.set()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                me = asyncio.current_task()
                if me is not None and me.cancelling():
                    raise  # (stop() itself was cancelled, not just the task it ended)
            self._task = None

    async def _run(self) -> None:
        assert self._wake is not None
        events = self._events
        started = self._clock()
        while not self._stopped:
            if not events:
                if self._drain_waiters:
                    waiters, self._drain_waiters = self._drain_waiters, []
                    for w in waiters:
                        if not w.done():
                            w.set_result(None)
                self._wake.clear()
                await self._wake.wait()
                started = self._clock()
                continue
            fn, args, fut = events.popleft()
            self._busy = True
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    result = await result
                if fut is not None and not fut.done():
                    fut.set_result(result)
            except asyncio.CancelledError:
                if fut is not None and not fut.done():
                    fut.cancel()
                raise
            except StoreError as e:
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                else:
                    self._warn.warning(f"{self.name}:{getattr(fn, '__name__', fn)}:{type(e).__name__}",
                                       "%s: event %s not handled: %s", self.name, getattr(fn, "__name__", fn), e)
            except Exception as e:
                if fut is not None and not fut.done():
                    fut.set_exception(e)
                else:
                    self._log.exception("%s: event %s failed", self.name, getattr(fn, "__name__", fn))
            finally:
                self._busy = False
                self.processed += 1
            if self._clock() - started >= self._slice_s:
                await asyncio.sleep(0)
                started = self._clock()
