"""Run a Samsa broker that times its own share of end-to-end latency.

For every read callback that sends a response on another connection (a produce whose append
answers a waiting fetch), it records the time from the callback's start to that response
written. At exit (SIGTERM) it prints one `TRACE` line to stderr: how many, p10/p50/p90 in us,
leaving out the first fifth as warm-up.

    .venv/bin/python bench/trace_fetch_path.py broker start server.properties &
    .venv/bin/python bench/latency_split.py --bootstrap 127.0.0.1:9092
    kill -TERM %1        # -> TRACE n=... produce read -> fetch response sent us p10 .. p50 .. p90 ..

The hooks cost about a microsecond per callback. This is a measuring tool, not a way to run
a broker.
"""

from __future__ import annotations

import atexit
import bisect
import sys
import time

from samsa.cli.main import main
from samsa.server import network

_reads: list[tuple[int, int, int]] = []  # (start, end, fd) of each read callback
_writes: list[tuple[int, int]] = []  # (time written, fd)
_on_readable = network.Connection._on_readable
_on_writable = network.Connection._on_writable
_now = time.monotonic_ns


def _timed_readable(self: network.Connection) -> None:
    start = _now()
    _on_readable(self)
    _reads.append((start, _now(), self.fd))


def _timed_writable(self: network.Connection) -> None:
    _on_writable(self)
    _writes.append((_now(), self.fd))


def _report() -> None:
    times = [t for t, _ in _writes]
    spans = []
    for start, end, fd in _reads:
        k = bisect.bisect_left(times, start)
        while k < len(_writes) and _writes[k][0] <= end:
            if _writes[k][1] != fd:
                spans.append((_writes[k][0] - start) / 1e3)
                break
            k += 1
    spans = sorted(spans[len(spans) // 5:])
    if not spans:
        sys.stderr.write("TRACE no read callback answered another connection\n")
        return
    q = lambda f: spans[int(f * (len(spans) - 1))]  # noqa: E731
    sys.stderr.write(f"TRACE n={len(spans)} produce read -> fetch response sent us "
                     f"p10 {q(.1):.0f} p50 {q(.5):.0f} p90 {q(.9):.0f}\n")


network.Connection._on_readable = _timed_readable  # type: ignore[method-assign]
network.Connection._on_writable = _timed_writable  # type: ignore[method-assign]
atexit.register(_report)

if __name__ == "__main__":
    sys.exit(main())
