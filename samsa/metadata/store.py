"""The metadata store: a small tree of versioned nodes, as ZooKeeper keeps Kafka's metadata.

One interface, two backends. `EmbeddedStore` (this module) serves a single broker with no
other process to run: nodes live in memory and the persistent ones changed by each call (or
batch) are committed to the journal (`journal.py`: SQLite, one transaction per batch, durable
when the call returns). The ZooKeeper backend (a later module) maps the same calls onto
znodes. Versions give compare-and-set: `set(path, data, version)` fails with `BadVersion`
unless the node is still at `version`.

Files: `samsa-metadata.db` (see journal.py); a `samsa-metadata.json` from an earlier version
is imported into it on first start.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from samsa.metadata.journal import Journal, JournalError


class StoreError(Exception):
    pass


def log_failures(logger: logging.Logger, what: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorate an event handler (a watch callback) so that it logs, rather than raises, what
    goes wrong: a store error is a warning (the watch fires again once the store is back), a
    bug is logged with its traceback. Either way the event loop carries on."""

    def wrap(fn: Callable[..., None]) -> Callable[..., None]:
        def run(*args: Any) -> None:
            try:
                fn(*args)
            except StoreError as e:
                logger.warning("%s event %s not handled: %s", what, fn.__name__, e)
            except Exception:
                logger.exception("%s event %s failed", what, fn.__name__)

        run.__name__ = fn.__name__
        return run

    return wrap


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


class Fenced(StoreError):
    """A guarded write found its guard node moved on (e.g. a newer controller epoch)."""


class MetadataStore(Protocol):
    connected: bool

    def get(self, path: str) -> tuple[bytes, int] | None: ...
    def get_many(self, paths: list[str]) -> list[tuple[bytes, int] | None]: ...
    def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                    ) -> list[StoreError | None]: ...
    def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                 ) -> list[int | StoreError]: ...
    def children(self, path: str) -> list[str]: ...
    def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None: ...
    def set(self, path: str, data: bytes, version: int = -1) -> int: ...
    def delete(self, path: str, *, recursive: bool = False) -> None: ...
    def close(self) -> None: ...
    def watch_children(self, path: str, callback: Callable[[list[str]], Any], *,
                       loop: asyncio.AbstractEventLoop | None = None) -> Any: ...
    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], Any], *,
                   loop: asyncio.AbstractEventLoop | None = None) -> Any: ...
    def add_session_listener(self, *, on_session_lost: Callable[[], Any] | None = None,
                             on_reconnected: Callable[[bool], Any] | None = None,
                             on_suspended: Callable[[], Any] | None = None,
                             loop: asyncio.AbstractEventLoop | None = None) -> None: ...


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


@dataclass(eq=False)
class LocalWatch:
    """A watch on the embedded store: `callback` gets the node's latest state after changes."""

    path: str
    children: bool
    callback: Callable[..., Any]
    loop: asyncio.AbstractEventLoop | None
    cancelled: bool = False
    pending: bool = field(default=False, repr=False)

    def cancel(self) -> None:
        self.cancelled = True


class EmbeddedStore:
    """An in-process store persisted to a journal; ephemeral nodes die with the process."""

    def __init__(self, path: Path, *, legacy_json: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self._ephemeral: set[str] = set()
        self._watches: list[LocalWatch] = []
        self._batch = 0  # > 0 inside create_many: persist once at the end
        self._dirty: set[str] = set()  # paths changed since the last commit to the journal
        self.connected = True
        try:
            self._journal = Journal.open(path, legacy_json=legacy_json)
            self._nodes.update(self._journal.load())
        except JournalError as e:
            raise StoreError(str(e)) from None

    def _persist(self) -> None:
        """Commit the nodes changed since the last commit (one transaction)."""
        if self._batch or not self._dirty:
            return
        nodes, ephemeral = self._nodes, self._ephemeral
        changes = []
        for p in sorted(self._dirty):
            node = nodes.get(p)
            changes.append((p, None, 0) if node is None or p in ephemeral else (p, node[0], node[1]))
        self._journal.commit(changes)
        self._dirty.clear()

    def get(self, path: str) -> tuple[bytes, int] | None:
        return self._nodes.get(path)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self._nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None:
        with self._lock:
            if path in self._nodes:
                raise NodeExists(path)
            parent = _parent(path)
            missing = []
            while parent not in self._nodes:
                missing.append(parent)
                parent = _parent(parent)
            if missing and not make_parents:
                raise NoNode(_parent(path))
            for p in reversed(missing):
                self._nodes[p] = (b"", 0)
            self._nodes[path] = (data, 0)
            self._dirty.update(missing)
            if ephemeral:
                self._ephemeral.add(path)
            else:
                self._dirty.add(path)
                self._persist()
        self._changed([path, *missing])

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        with self._lock:
            cur = self._nodes.get(path)
            if cur is None:
                raise NoNode(path)
            if version != -1 and cur[1] != version:
                raise BadVersion(f"{path} is at version {cur[1]}, not {version}")
            self._nodes[path] = (data, cur[1] + 1)
            if path not in self._ephemeral:
                self._dirty.add(path)
                self._persist()
        self._changed([path], created=False)
        return cur[1] + 1

    def delete(self, path: str, *, recursive: bool = False) -> None:
        with self._lock:
            if path not in self._nodes:
                raise NoNode(path)
            prefix = path + "/"
            kids = [p for p in self._nodes if p.startswith(prefix)]
            if kids and not recursive:
                raise StoreError(f"{path} has children")
            for p in kids + [path]:
                del self._nodes[p]
                if p in self._ephemeral:
                    self._ephemeral.discard(p)
                else:
                    self._dirty.add(p)
            self._persist()
        self._changed(kids + [path])

    # -- batches: one file write for many nodes (the ZooKeeper backend pipelines them) ----------

    def get_many(self, paths: list[str]) -> list[tuple[bytes, int] | None]:
        return [self._nodes.get(p) for p in paths]

    def _guard_ok(self, guard: tuple[str, int] | None) -> bool:
        return guard is None or (guard[0] in self._nodes and self._nodes[guard[0]][1] == guard[1])

    def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                    ) -> list[StoreError | None]:
        if not self._guard_ok(guard):
            return [Fenced(f"{guard[0]} moved on") for _ in items]  # type: ignore[index]
        out: list[StoreError | None] = []
        self._batch += 1
        try:
            for path, data in items:
                try:
                    self.create(path, data)
                    out.append(None)
                except StoreError as e:
                    out.append(e)
        finally:
            self._batch -= 1
        self._persist()
        return out

    def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                 ) -> list[int | StoreError]:
        if not self._guard_ok(guard):
            return [Fenced(f"{guard[0]} moved on") for _ in items]  # type: ignore[index]
        out: list[int | StoreError] = []
        self._batch += 1
        try:
            for path, data, version in items:
                try:
                    out.append(self.set(path, data, version))
                except StoreError as e:
                    out.append(e)
        finally:
            self._batch -= 1
        self._persist()
        return out

    # -- watches, as the ZooKeeper backend's: the latest state, delivered after each change ------

    def watch_children(self, path: str, callback: Callable[[list[str]], Any], *,
                       loop: asyncio.AbstractEventLoop | None = None) -> LocalWatch:
        if path not in self._nodes:
            self.create(path, b"")
        w = LocalWatch(path, True, callback, loop)
        self._watches.append(w)
        self._fire(w)
        return w

    def watch_data(self, path: str, callback: Callable[[bytes | None, int | None], Any], *,
                   loop: asyncio.AbstractEventLoop | None = None) -> LocalWatch:
        w = LocalWatch(path, False, callback, loop)
        self._watches.append(w)
        self._fire(w)
        return w

    def add_session_listener(self, **_: Any) -> None:
        """An in-process store has no session to lose."""

    def _changed(self, paths: list[str], created: bool = True) -> None:
        if not self._watches:
            return
        self._watches = [w for w in self._watches if not w.cancelled]
        touched = set(paths)
        parents = {_parent(p) for p in paths} if created else set()
        for w in self._watches:
            if (w.path in parents) if w.children else (w.path in touched):
                self._fire(w)

    def _fire(self, w: LocalWatch) -> None:
        if w.loop is None:
            self._deliver(w)
        elif not w.pending:  # coalesce: the callback reads the state when it runs
            w.pending = True
            w.loop.call_soon(self._deliver, w)

    def _deliver(self, w: LocalWatch) -> None:
        w.pending = False
        if w.cancelled:
            return
        if w.children:
            w.callback(self.children(w.path))
        else:
            node = self._nodes.get(w.path)
            w.callback(*(node if node is not None else (None, None)))

    def close(self) -> None:
        for w in self._watches:
            w.cancel()
        self._journal.close()
