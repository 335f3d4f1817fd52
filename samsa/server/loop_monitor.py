"""The loop-lag monitor: logs any stall of the event loop over a threshold, with what ran.

How it works. A callback on the loop stamps the time every `tick_s`. A watchdog thread
checks the stamp; once it is older than `threshold_s`, the loop is stuck in some callback:
the thread takes the loop thread's current stack at that moment (the culprit, caught in the
act) and, when the loop ticks again, one warning gives the stall's length and that stack:

    Event loop stalled for 412 ms; it was running:
      samsa/server/broker.py:350 in on_topic_assignment
      samsa/storage/log.py:120 in open

Stalls are counted (`stalls`, `longest_ms`) and the warning is rate-limited per culprit.
Every tick's lag also goes into a histogram (`lags`) and the largest of the last 10 to 20
seconds is kept (`recent_max_s`): the Prometheus endpoint's event-loop metrics.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

from samsa.ratelimit import RateLimitedLog
from samsa.server.metrics import LAG_BUCKETS_S, Histogram

log = logging.getLogger("samsa.loop")


class LoopMonitor:
    def __init__(self, loop: asyncio.AbstractEventLoop, threshold_s: float = 0.1, tick_s: float = 0.02) -> None:
        self.loop = loop
        self.threshold_s = threshold_s
        self.tick_s = tick_s
        self.stalls = 0
        self.longest_ms = 0.0
        self._stamp = time.monotonic()
        self._stack: list[str] | None = None
        self._stalled_since: float | None = None
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._warn = RateLimitedLog(log, interval_s=10.0)
        self.lags = Histogram(LAG_BUCKETS_S)  # each tick's lag, seconds
        self._max_now = self._max_before = 0.0  # the largest lag of this 10-s window and of the last one
        self._window_ends = time.monotonic() + 10.0

    @property
    def recent_max_s(self) -> float:
        """The largest lag of the last 10 to 20 seconds."""
        return max(self._max_now, self._max_before)

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._stamp = time.monotonic()
        self._handle = self.loop.call_later(self.tick_s, self._tick)
        self._thread = threading.Thread(target=self._watch, name="samsa-loop-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        now = time.monotonic()
        lag = max(now - self._stamp - self.tick_s, 0.0)
        self._stamp = now
        self.lags.observe(lag)
        if now >= self._window_ends:
            self._max_before, self._max_now = self._max_now, 0.0
            self._window_ends = now + 10.0
        if lag > self._max_now:
            self._max_now = lag
        stack, self._stack = self._stack, None
        if lag >= self.threshold_s:
            self.stalls += 1
            self.longest_ms = max(self.longest_ms, lag * 1000)
            where = "".join(stack) if stack else "  (no stack caught)\n"
            key = stack[-1] if stack else "?"
            self._warn.warning(key, "Event loop stalled for %.0f ms; it was running:\n%s", lag * 1000, where.rstrip())
        if not self._stop.is_set():
            self._handle = self.loop.call_later(self.tick_s, self._tick)

    def _watch(self) -> None:
        while not self._stop.wait(self.threshold_s / 2):
            stamp = self._stamp
            if time.monotonic() - stamp > self.threshold_s and self._stack is None:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    self._stack = _summary(frame)


def _summary(frame: object, limit: int = 8) -> list[str]:
    """The innermost `limit` frames of samsa's own code (else of anything), one line each."""
    entries = traceback.extract_stack(frame)  # type: ignore[arg-type]
    ours = [e for e in entries if "/samsa/" in e.filename] or entries
    return [f"  {_short(e.filename)}:{e.lineno} in {e.name}\n" for e in ours[-limit:]]


def _short(filename: str) -> str:
    i = filename.rfind("/samsa/")
    return filename[i + 1:] if i >= 0 else filename
