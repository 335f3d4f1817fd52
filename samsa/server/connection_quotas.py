"""What the broker's connections may take, broker-wide: how many, from where, for how long
idle, and how much memory their requests hold (Kafka's `ConnectionQuotas`, the idle check
of its `Selector` and the `MemoryPool` of `queued.max.request.bytes`).

How it works: one `ConnectionQuotas` is shared by every listener.

- **Counting.** A connection is counted when accepted and uncounted when closed. Past
  `max.connections.per.ip` (or that address's entry in `max.connections.per.ip.overrides`,
  `host:count,...`) a new connection from that address is closed at once, as Kafka does.
  At `max.connections` the listeners stop accepting (new connections wait in the kernel's
  backlog, `socket.listen.backlog.size`) until one closes. The limits are dynamic: read at
  each accept.
- **Idle connections.** Every read and write stamps the connection with the time of the last
  check (one attribute on the data path); a check every second closes those idle for longer than
  `connections.max.idle.ms`, and sooner (after `STALL_S`, or the idle limit if lower) one
  that stopped in the middle of a request: a peer that promised a frame and does not send it.
- **Request memory.** Every connection's frame splitter reports the bytes it holds for
  requests not handed out yet. With `queued.max.request.bytes` > 0, once they add up to it, a
  connection about to start a large request stops reading (its bytes wait in the kernel)
  until memory is released; requests already started may finish (so it cannot deadlock), as
  in Kafka, where an allocation may overshoot the pool once. -1 (the default) is no bound;
  a request's memory still follows what arrived of it (`protocol/framing.py`).
- **Running out of descriptors.** `accept` failing with EMFILE/ENFILE (or ENOBUFS/ENOMEM)
  pauses accepting for `ACCEPT_BACKOFF_S`, logging once per interval with a count, where it
  used to spin at 100% CPU on a listening socket that stayed readable.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from samsa.ratelimit import RateLimitedLog

log = logging.getLogger("samsa.network")

STALL_S = 30.0  # a request started and not finished: closed after this long without a byte
ACCEPT_BACKOFF_S = 0.5
CHECK_EVERY_S = 1.0
_ABSENT = object()


@dataclass(frozen=True)
class Limits:
    """The limits in force (the broker's config, read when needed: some are dynamic)."""

    max_connections: int = 2**31 - 1
    max_per_ip: int = 2**31 - 1
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    idle_ms: int = 600_000
    max_request_bytes_queued: int = -1


def parse_overrides(text: str) -> dict[str, int]:
    """`max.connections.per.ip.overrides`: "host:count,host:count" (an IPv6 host keeps its colons)."""
    out: dict[str, int] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not host:count")
        out[host.strip().strip("[]")] = int(count)
    return out


class Quotaed(Protocol):
    """What the quotas need of a connection (network.Connection)."""

    peer_host: str
    closed: bool
    last_active: float

    def close(self) -> None: ...
    def stalled_mid_request(self) -> bool: ...
    def retry_frames(self) -> None: ...


class ConnectionQuotas:
    def __init__(self, loop: asyncio.AbstractEventLoop, limits: Callable[[], Limits],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.loop = loop
        self.limits = limits
        self.clock = clock
        # queued.max.request.bytes is static (read-only in Kafka too): read once.
        self.memory_limit = limits().max_request_bytes_queued
        self.now = clock()  # the time of the last check: what `touch` stamps (1 s resolution)
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self.memory_used = 0
        self._memory_waiters: deque[Quotaed] = deque()
        self._wake_scheduled = False
        self._active: OrderedDict[Quotaed, None] = OrderedDict()
        self._paused_accept: list[Callable[[], None]] = []  # listeners' resume callbacks
        self._timer: asyncio.TimerHandle | None = None
        self._warn = RateLimitedLog(log, interval_s=10.0)
        self.closed_idle = 0
        self.closed_stalled = 0
        self.refused_per_ip = 0

    # -- counting ---------------------------------------------------------------------------

    def at_max(self) -> bool:
        return self.total >= self.limits().max_connections

    def admit(self, host: str) -> bool:
        """May a new connection from `host` stay? (Counted if so.)"""
        lim = self.limits()
        allowed = lim.per_ip_overrides.get(host, lim.max_per_ip)
        have = self.per_ip.get(host, 0)
        if have >= allowed:
            self.refused_per_ip += 1
            self._warn.warning(f"per-ip {host}", "Refused a connection from %s: it has %d, the most "
                               "max.connections.per.ip%s allows", host, have,
                               " (overrides)" if host in lim.per_ip_overrides else "")
            return False
        self.total += 1
        self.per_ip[host] = have + 1
        return True

    def added(self, conn: Quotaed) -> None:
        conn.last_active = self.now = self.clock()
        self._active[conn] = None
        if self._timer is None:
            self._timer = self.loop.call_later(CHECK_EVERY_S, self._check)

    def removed(self, conn: Quotaed, held: int) -> None:
        if held:
            self.release(held)
        if self._active.pop(conn, _ABSENT) is _ABSENT:
            return  # never counted (or already uncounted)
        self.total -= 1
        n = self.per_ip.get(conn.peer_host, 0) - 1
        if n > 0:
            self.per_ip[conn.peer_host] = n
        else:
            self.per_ip.pop(conn.peer_host, None)
        try:
            self._memory_waiters.remove(conn)
        except ValueError:
            pass
        if self._paused_accept and not self.at_max():
            resume, self._paused_accept = self._paused_accept, []
            for fn in resume:
                fn()

    def pause_accepting(self, resume: Callable[[], None]) -> None:
        """A listener stopped accepting at max.connections: `resume` when one closes."""
        self._paused_accept.append(resume)

    # -- idle -------------------------------------------------------------------------------

    def touch(self, conn: Quotaed) -> None:
        """Activity on `conn` (the hot path: one attribute; connections set theirs directly)."""
        conn.last_active = self.now

    def _check(self) -> None:
        self._timer = None
        lim = self.limits()
        now = self.now = self.clock()
        idle_s = lim.idle_ms / 1000 if lim.idle_ms >= 0 else float("inf")
        stall_s = min(STALL_S, idle_s)
        doomed: list[tuple[Quotaed, str]] = []
        # Every connection, once a second (stamping activity costs the data path one attribute;
        # this scan is ~0.1 us a connection). Stamps are up to one check old: the limits hold
        # to within CHECK_EVERY_S.
        for conn in self._active:
            quiet = now - conn.last_active
            if quiet < stall_s:
                continue
            if quiet >= idle_s:
                doomed.append((conn, "idle"))
            elif conn.stalled_mid_request():
                doomed.append((conn, "stalled"))
        for conn, why in doomed:
            if why == "idle":
                self.closed_idle += 1
                self._warn.info("idle", "Closing connections idle for more than connections.max.idle.ms=%d "
                                "(from %s)", lim.idle_ms, conn.peer_host)
            else:
                self.closed_stalled += 1
                self._warn.info("stalled", "Closing connections that stopped in the middle of a request for "
                                "%.0f s (from %s)", stall_s, conn.peer_host)
            conn.close()
        if self._active:
            self._timer = self.loop.call_later(CHECK_EVERY_S, self._check)

    # -- request memory ---------------------------------------------------------------------

    def memory_available(self) -> bool:
        limit = self.memory_limit
        return limit <= 0 or self.memory_used < limit

    def hold(self, delta: int) -> None:
        """A connection's splitter holds `delta` more bytes (negative: fewer)."""
        if delta >= 0:
            self.memory_used += delta
        else:
            self.release(-delta)

    def release(self, n: int) -> None:
        self.memory_used -= n
        if self._memory_waiters and not self._wake_scheduled and self.memory_available():
            self._wake_scheduled = True
            self.loop.call_soon(self._wake_memory_waiters)

    def wait_for_memory(self, conn: Quotaed) -> None:
        if conn not in self._memory_waiters:
            self._memory_waiters.append(conn)
            self._warn.info("memory", "Requests hold %d bytes, queued.max.request.bytes=%d: connections wait "
                            "before reading large requests", self.memory_used, self.memory_limit)

    def _wake_memory_waiters(self) -> None:
        self._wake_scheduled = False
        while self._memory_waiters and self.memory_available():
            conn = self._memory_waiters.popleft()
            if not conn.closed:
                conn.retry_frames()

    # -- accept errors ----------------------------------------------------------------------

    def accept_failed(self, listener: str, e: OSError, resume: Callable[[], None]) -> None:
        """Out of descriptors or memory: stop accepting for a moment, say so once per interval."""
        self._warn.warning(f"accept {listener}", "Cannot accept connections on %s: %s; pausing accepts for %.1f s "
                           "(raise the open files limit, or lower max.connections)", listener, e, ACCEPT_BACKOFF_S)
        self.loop.call_later(ACCEPT_BACKOFF_S, resume)

    def stats(self) -> dict[str, Any]:
        return {"connections": self.total, "memory_used": self.memory_used, "closed_idle": self.closed_idle,
                "closed_stalled": self.closed_stalled, "refused_per_ip": self.refused_per_ip}
