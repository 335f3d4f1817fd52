"""`LiveState`: the one `PipelineState` shared by the reader thread and the HTTP threads; `Published`:
the broker console's document, shared by its poller and the HTTP threads.

The reader is its only writer (`update`); every change that shows in the snapshot moves a version
number and wakes whoever waits for one (`wait_newer`: the /events streams, `wait_until`: tests and
embedding code). The JSON of each version is rendered once and shared by all readers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from samsa.pipeline.dashboard.state import PipelineState


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class LiveState:
    def __init__(self, state: PipelineState, clock_ms: Callable[[], int] = wall_ms) -> None:
        self._state = state
        self._clock_ms = clock_ms
        self._cond = threading.Condition()
        self._version = 0
        self._rendered: tuple[int, bytes] | None = None
        self._closed = False
        with self._cond:
            state.refresh(clock_ms())

    def update(self, change: Callable[[PipelineState], bool]) -> None:
        """Run `change` on the state (it returns whether the snapshot changed), then recompute
        health at the current time; wake the waiters if anything changed."""
        with self._cond:
            changed = change(self._state)
            changed = self._state.refresh(self._clock_ms()) or changed
            if changed:
                self._version += 1
                self._cond.notify_all()

    def payload(self) -> tuple[int, bytes]:
        """(version, the snapshot as UTF-8 JSON)."""
        with self._cond:
            if self._rendered is None or self._rendered[0] != self._version:
                snap = self._state.snapshot()
                snap["version"] = self._version
                self._rendered = (self._version, json.dumps(snap, separators=(",", ":")).encode())
            return self._rendered

    def snapshot(self) -> dict[str, Any]:
        snap: dict[str, Any] = json.loads(self.payload()[1])
        return snap

    def wait_newer(self, version: int, timeout: float) -> bool:
        """Wait up to `timeout` s for a version after `version`; False on timeout or close."""
        with self._cond:
            self._cond.wait_for(lambda: self._version > version or self._closed, timeout)
            return self._version > version and not self._closed

    def wait_until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The first snapshot satisfying `predicate`; TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            version, body = self.payload()
            snap: dict[str, Any] = json.loads(body)
            if predicate(snap):
                return snap
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed:
                raise TimeoutError(f"the dashboard state did not reach the expected condition in {timeout:g} s")
            self.wait_newer(version, remaining)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Published:
    """A JSON document with a version, for the broker console: one writer (the poller) publishes
    whole documents, many readers wait for newer ones, as with `LiveState`.

    It also counts its watchers (`watch()`: the open console streams, `wait_until` callers), and
    `wanted_for(s)` lets a one-off reader (/api/console) ask for polling a while: the poller asks
    the cluster only while `demanded()`, so a dashboard nobody looks at costs the cluster nothing.
    """

    def __init__(self, initial: dict[str, Any]) -> None:
        self._cond = threading.Condition()
        self._version = 0
        self._body = json.dumps(initial, separators=(",", ":")).encode()
        self._watchers = 0
        self._wanted_until = 0.0
        self._closed = False

    def publish(self, doc: dict[str, Any]) -> None:
        body = json.dumps(doc, separators=(",", ":")).encode()
        with self._cond:
            self._version += 1
            self._body = body
            self._cond.notify_all()

    def payload(self) -> tuple[int, bytes]:
        """(version, the document as UTF-8 JSON); version 0: nothing published yet."""
        with self._cond:
            return self._version, self._body

    def snapshot(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.payload()[1])
        return doc

    def wait_newer(self, version: int, timeout: float) -> bool:
        with self._cond:
            self._cond.wait_for(lambda: self._version > version or self._closed, timeout)
            return self._version > version and not self._closed

    def wait_until(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """The first document satisfying `predicate` (watching meanwhile); TimeoutError after `timeout` s."""
        deadline = time.monotonic() + timeout
        with self.watch():
            while True:
                version, body = self.payload()
                doc: dict[str, Any] = json.loads(body)
                if predicate(doc):
                    return doc
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    raise TimeoutError(f"the console did not reach the expected condition in {timeout:g} s "
                                       f"(last: state {doc.get('state')!r}, error {doc.get('error')!r})")
                self.wait_newer(version, remaining)

    # -- demand ----------------------------------------------------------------------------

    def watch(self) -> _Watch:
        return _Watch(self)

    def _add_watcher(self, n: int) -> None:
        with self._cond:
            self._watchers += n
            self._cond.notify_all()

    def wanted_for(self, seconds: float) -> None:
        with self._cond:
            self._wanted_until = max(self._wanted_until, time.monotonic() + seconds)
            self._cond.notify_all()

    def demanded(self) -> bool:
        return self._watchers > 0 or time.monotonic() < self._wanted_until

    def wait_demand(self, timeout: float) -> bool:
        """Wait up to `timeout` s until someone wants the document; False on timeout or close."""
        with self._cond:
            self._cond.wait_for(lambda: self.demanded() or self._closed, timeout)
            return self.demanded() and not self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class _Watch:
    def __init__(self, published: Published) -> None:
        self._published = published

    def __enter__(self) -> Published:
        self._published._add_watcher(1)
        return self._published

    def __exit__(self, *exc: object) -> None:
        self._published._add_watcher(-1)
