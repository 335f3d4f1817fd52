"""Repeated warnings, rate-limited: one line per cause per interval, with a count.

A broker cut off from ZooKeeper would otherwise log the same line on every follower fetch
(hundreds a second). `RateLimitedLog.warning(key, msg, *args)` logs the first occurrence of
`key` at once; later ones within `interval_s` are counted, and the next line for that key
says how many were suppressed:

    Could not change the ISR of t-0: not connected to ZooKeeper (and 668 more like it in the last 10 s)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any


class RateLimitedLog:
    def __init__(self, logger: logging.Logger, interval_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, max_keys: int = 10_000) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._max_keys = max_keys
        self._last: dict[str, tuple[float, int]] = {}  # key -> (when last logged, suppressed since)

    def log(self, level: int, key: str, msg: str, *args: Any) -> bool:
        """Log now if `key` was not logged within the interval; True if a line was written."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            msg += " (and %d more like it in the last %.0f s)"
            args = (*args, last[1], now - last[0])
        if len(self._last) >= self._max_keys and key not in self._last:
            self._forget_old(now)
        self._last[key] = (now, 0)
        self.logger.log(level, msg, *args)
        return True

    def warning(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.WARNING, key, msg, *args)

    def info(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.INFO, key, msg, *args)

    def error(self, key: str, msg: str, *args: Any) -> bool:
        return self.log(logging.ERROR, key, msg, *args)

    def _forget_old(self, now: float) -> None:
        self._last = {k: v for k, v in self._last.items() if now - v[0] < self.interval_s}
        if len(self._last) >= self._max_keys:
            self._last.clear()


class BurstLog:
    """Per-item lines (a partition's new role) that can come by the thousand (a topic of
    10,000 partitions created, a broker restarted): the first `per_second` lines of each
    second are logged as they come; past that, they are counted by kind and one summary
    line per kind says how many were left out.

        Leading t-0 (leader epoch 0, ISR [0, 1, 2])
        ... and 3314 more leaderships in the last 1.2 s
    """

    def __init__(self, logger: logging.Logger, per_second: int = 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.per_second = per_second
        self._clock = clock
        self._window = -1.0
        self._in_window = 0
        self._skipped: dict[str, int] = {}
        self._skipped_since = 0.0

    def note(self, kind: str, msg: str, *args: Any) -> None:
        now = self._clock()
        if now - self._window >= 1.0:
            self.flush(now)
            self._window, self._in_window = now, 0
        if self._in_window < self.per_second:
            self._in_window += 1
            self.logger.info(msg, *args)
            return
        if not self._skipped:
            self._skipped_since = now
        self._skipped[kind] = self._skipped.get(kind, 0) + 1

    def flush(self, now: float | None = None) -> None:
        """Log the summary of what was left out (called at the next window, or by a timer)."""
        if not self._skipped:
            return
        now = self._clock() if now is None else now
        for kind, n in sorted(self._skipped.items()):
            self.logger.info("... and %d more %s in the last %.1f s", n, kind, now - self._skipped_since)
        self._skipped.clear()
