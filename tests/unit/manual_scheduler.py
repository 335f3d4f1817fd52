"""A manual event loop for tests of time-based behaviour: `time`, `call_at`, `call_later` and
`call_soon` as asyncio's loop has them, with time moved by the test (`advance`)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class ManualHandle:
    def __init__(self, when: float, fn: Callable[..., object], args: tuple[Any, ...]) -> None:
        self.when, self.fn, self.args = when, fn, args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """An event loop's `time`/`call_at`/`call_soon`, with time moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[tuple[float, int, ManualHandle]] = []
        self.soon: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, fn: Callable[..., object], *args: Any) -> ManualHandle:
        h = ManualHandle(when, fn, args)
        heapq.heappush(self.timers, (when, next(self._seq), h))
        return h

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> ManualHandle:
        return self.call_at(self.now + delay, fn, *args)

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        self.soon.append((fn, args))

    def live_timers(self) -> list[float]:
        return sorted(h.when for _, _, h in self.timers if not h.cancelled)

    def run_soon(self) -> None:
        soon, self.soon = self.soon, []
        for fn, args in soon:
            fn(*args)

    def advance(self, seconds: float) -> None:
        """Move the clock, running every timer due on the way, in order, each at its time."""
        end = self.now + seconds
        while self.timers and self.timers[0][0] <= end:
            when, _, h = heapq.heappop(self.timers)
            if h.cancelled:
                continue
            self.now = max(self.now, when)
            h.fn(*h.args)
        self.now = end
