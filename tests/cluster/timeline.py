"""What the cluster looked like from outside, change by change, for failure messages: a thread
that reads the cluster's ZooKeeper state every 100 ms (registered brokers and whether their
sessions are connected, controller, each partition's leader, leader epoch and ISR) and records
each change with its time, next to the harness's own actions (`note`).

It reads through the test's kazoo client with a timeout on every call, so a ZooKeeper outage is
itself recorded ("ZooKeeper unreachable from the test") instead of blocking the thread.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

PERIOD = 0.1  # polling: ZooKeeper's state lives in another process; watches would miss the outages


class Timeline:
    def __init__(self, zk: KazooClient, chroot: str, topic: str, partitions: list[int],
                 connected_sessions: Callable[[], set[int]] | None = None) -> None:
        self.zk = zk
        self.connected_sessions = connected_sessions
        self.chroot = chroot
        self.topic = topic
        self.partitions = partitions
        self.lock = threading.Lock()
        self.events: list[tuple[float, str, str]] = []  # (monotonic, key, text)
        self._last: dict[str, Any] = {}
        self._rounds = 0  # completed reads, under self.lock
        self._round_done = threading.Condition(self.lock)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zk-timeline", daemon=True)

    def start(self) -> Timeline:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def note(self, text: str, at: float | None = None, key: str = "harness") -> None:
        with self.lock:
            self.events.append((time.monotonic() if at is None else at, key, text))

    def sync(self, timeout: float = 3.0) -> None:
        """Until a read that began after this call has been recorded."""
        with self._round_done:
            target = self._rounds + 2
            self._round_done.wait_for(lambda: self._rounds >= target or not self._thread.is_alive(), timeout)

    def between(self, t0: float, end: float, limit: int = 60) -> list[str]:
        """The state just before t0 - 1 s, then the events in [t0 - 1 s, end], as lines
        `+12.34 s  text` relative to t0."""
        with self.lock:
            events = sorted(self.events)
        before: dict[str, tuple[float, str]] = {}
        for t, key, text in events:
            if t < t0 - 1.0 and key not in ("harness", "zk"):
                before[key] = (t, text)
        lines = [f"{t - t0:+7.2f} s  {text}" for t, text in sorted(before.values())]
        lines += [f"{t - t0:+7.2f} s  {text}" for t, _, text in events if t0 - 1.0 <= t <= end]
        if len(lines) > limit:
            lines = lines[: limit // 2] + [f"  ... {len(lines) - limit} more ..."] + lines[-limit // 2:]
        return lines

    # --- reading ---------------------------------------------------------------------------------
    def _get(self, path: str) -> bytes | None:
        try:
            return self.zk.get_async(self.chroot + path).get(timeout=1.0)[0]
        except NoNodeError:
            return None

    def _children(self, path: str) -> list[str]:
        try:
            return list(self.zk.get_children_async(self.chroot + path).get(timeout=1.0))
        except NoNodeError:
            return []

    def _read(self) -> dict[str, Any]:
        registered = sorted(int(c) for c in self._children("/brokers/ids"))
        state: dict[str, Any] = {"registered": registered}
        if self.connected_sessions is not None:
            connected = self.connected_sessions()
            owners = {i: self.zk.exists_async(f"{self.chroot}/brokers/ids/{i}").get(timeout=1.0) for i in registered}
            state["sessions"] = [i for i, st in owners.items() if st is None or st.ephemeralOwner not in connected]
        raw = self._get("/controller")
        epoch = self._get("/controller_epoch")
        state["controller"] = (None if raw is None else int(json.loads(raw)["brokerid"]),
                               None if epoch is None else int(epoch))
        for p in self.partitions:
            raw = self._get(f"/brokers/topics/{self.topic}/partitions/{p}/state")
            s = None if raw is None else json.loads(raw)
            state[f"p{p}"] = None if s is None else (s["leader"], s["leader_epoch"], tuple(s["isr"]))
        return state

    def _describe(self, key: str, old: Any, new: Any) -> str:
        if key == "registered":
            gone, came = sorted(set(old or []) - set(new)), sorted(set(new) - set(old or []))
            parts = ([f"broker {', '.join(map(str, gone))} gone from /brokers/ids"] if gone else []) + \
                    ([f"broker {', '.join(map(str, came))} registered"] if came else [])
            return "; ".join(parts) + f" (registered: {new})"
        if key == "sessions":
            return (f"registered but without a connection to ZooKeeper: broker {', '.join(map(str, new))}" if new
                    else "every registered broker connected to ZooKeeper")
        if key == "controller":
            return "no controller" if new[0] is None else f"controller: broker {new[0]} (epoch {new[1]})"
        if new is None:
            return f"{key}: no state"
        return f"{key}: leader {new[0]} (epoch {new[1]}), ISR {list(new[2])}"

    def _run(self) -> None:
        reachable = True
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                state = self._read()
            except Exception as e:  # noqa: BLE001 - ZooKeeper down or the test's session reconnecting
                if reachable:
                    self.note(f"ZooKeeper unreachable from the test ({type(e).__name__})", t, "zk")
                    reachable = False
            else:
                if not reachable:
                    self.note("ZooKeeper reachable from the test again", t, "zk")
                    reachable = True
                for key, value in state.items():
                    if key not in self._last or self._last[key] != value:
                        self.note(self._describe(key, self._last.get(key), value), t, key)
                        self._last[key] = value
            with self._round_done:
                self._rounds += 1
                self._round_done.notify_all()
            self._stop.wait(PERIOD)
