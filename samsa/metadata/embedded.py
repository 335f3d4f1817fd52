"""The embedded engine of the metadata store: one broker, no other process to run.

How it works. Nodes live in memory (`_nodes`, with a children index so listing a node's
children costs what it returns). A write changes memory at once, on the event loop, so the
checks of the next write (compare-and-set, node exists) see it; it is acknowledged once the
journal has made it durable. Writes queue as batches; one commit at a time runs in a thread
of the store's own and takes every batch queued meanwhile (group commit), so a burst of
writes costs one disk sync, and the loop never waits on the disk. Watches fire after the
commit.

If a commit fails (disk full, I/O error), that commit's batches and every batch queued after
it are undone in memory, newest first, and each caller gets a `StoreError`: memory is then
exactly what is on disk, and the next write tries again.

Ephemeral nodes are never journaled and die with the process (the one session,
`SESSION_ID`).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from samsa.metadata.journal import Journal, JournalError
from samsa.metadata.store import (
    BadVersion,
    ChildrenCallback,
    DataCallback,
    Fenced,
    Node,
    NodeExists,
    NoNode,
    StoreError,
    parent_of,
)

log = logging.getLogger("samsa.metadata")

SESSION_ID = 1

_MISSING = object()


@dataclass(eq=False)
class LocalWatch:
    path: str
    children: bool
    callback: Callable[..., Any]
    cancelled: bool = False
    pending: bool = field(default=False, repr=False)
    last: Any = field(default=_MISSING, repr=False)

    def cancel(self) -> None:
        self.cancelled = True


@dataclass(eq=False)
class _Batch:
    undo: list[tuple[str, Node | None, bool]]  # (path, node before, was ephemeral), oldest first
    persistent: set[str]  # paths whose new state must reach the journal
    touched: list[tuple[str, bool]]  # (path, created or deleted: its parent's children changed)
    future: asyncio.Future[None]


class EmbeddedStore:
    """`MetadataStore` in this process, journaled to disk (see the module docstring)."""

    def __init__(self, journal: Journal, nodes: dict[str, Node], loop: asyncio.AbstractEventLoop) -> None:
        self._journal = journal
        self._loop = loop
        self._nodes: dict[str, Node] = {"/": (b"", 0)}
        self._kids: dict[str, set[str]] = {}
        self._sequences: dict[str, int] = {}  # parent -> its next sequential child's number
        self._ephemeral: set[str] = set()
        for p in sorted(nodes):
            self._put(p, nodes[p])
        self._watches: dict[str, list[LocalWatch]] = {}
        self._queued: deque[_Batch] = deque()  # not yet handed to the journal
        self._committing: list[_Batch] = []
        self._commit_task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="samsa-metadata-journal")
        self._closed = False

    @classmethod
    async def open(cls, path: Path, *, legacy_json: Path | None = None) -> EmbeddedStore:
        """Open (or create) the store whose journal is at `path` (importing `legacy_json`, the
        file of earlier versions, if present); reading it happens off the loop."""
        loop = asyncio.get_running_loop()

        def load() -> tuple[Journal, dict[str, Node]]:
            journal = Journal.open(path, legacy_json=legacy_json)
            try:
                return journal, journal.load()
            except BaseException:
                journal.close()
                raise

        try:
            journal, nodes = await loop.run_in_executor(None, load)
        except JournalError as e:
            raise StoreError(str(e)) from None
        return cls(journal, nodes, loop)

    # -- reads --------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return not self._closed

    @property
    def session_id(self) -> int:
        return SESSION_ID

    def disconnected_for(self) -> float:
        return 0.0

    @property
    def session_timeout(self) -> float:
        return float("inf")

    async def get(self, path: str) -> Node | None:
        self._check_open()
        return self._nodes.get(path)

    async def get_many(self, paths: list[str]) -> list[Node | None]:
        self._check_open()
        return [self._nodes.get(p) for p in paths]

    async def children(self, path: str) -> list[str]:
        self._check_open()
        return sorted(self._kids.get(path.rstrip("/") or "/", ()))

    async def owner(self, path: str) -> int | None:
        self._check_open()
        if path not in self._nodes:
            return None
        return SESSION_ID if path in self._ephemeral else 0

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the metadata store is closed")

    # -- memory ---------------------------------------------------------------------------

    def _put(self, path: str, node: Node) -> None:
        if path not in self._nodes and path != "/":
            parent = parent_of(path)
            self._kids.setdefault(parent, set()).add(path[len(parent.rstrip("/")) + 1:])
        self._nodes[path] = node

    def _drop(self, path: str) -> None:
        del self._nodes[path]
        self._ephemeral.discard(path)
        parent = parent_of(path)
        kids = self._kids.get(parent)
        if kids is not None:
            kids.discard(path[len(parent.rstrip("/")) + 1:])
            if not kids:
                del self._kids[parent]

    def _restore(self, path: str, node: Node | None, ephemeral: bool) -> None:
        if node is None:
            if path in self._nodes:
                self._drop(path)
            return
        self._put(path, node)
        if ephemeral:
            self._ephemeral.add(path)
        else:
            self._ephemeral.discard(path)

    # -- writes: each op changes memory and records how to undo it --------------------------

    def _do_create(self, b: _Batch, path: str, data: bytes, ephemeral: bool, make_parents: bool) -> None:
        if path in self._nodes:
            raise NodeExists(path)
        parent = parent_of(path)
        missing = []
        while parent not in self._nodes:
            missing.append(parent)
            parent = parent_of(parent)
        if missing and not make_parents:
            raise NoNode(parent_of(path))
        if parent in self._ephemeral:
            raise StoreError(f"{parent} is ephemeral and cannot have children")
        for p in reversed(missing):
            self._put(p, (b"", 0))
            b.undo.append((p, None, False))
            b.persistent.add(p)
            b.touched.append((p, True))
        self._put(path, (data, 0))
        b.undo.append((path, None, False))
        if ephemeral:
            self._ephemeral.add(path)
        else:
            b.persistent.add(path)
        b.touched.append((path, True))

    def _do_set(self, b: _Batch, path: str, data: bytes, version: int) -> int:
        cur = self._nodes.get(path)
        if cur is None:
            raise NoNode(path)
        if version != -1 and cur[1] != version:
            raise BadVersion(f"{path} is at version {cur[1]}, not {version}")
        self._nodes[path] = (data, cur[1] + 1)
        b.undo.append((path, cur, path in self._ephemeral))
        if path not in self._ephemeral:
            b.persistent.add(path)
        b.touched.append((path, False))
        return cur[1] + 1

    def _do_delete(self, b: _Batch, path: str, recursive: bool) -> None:
        if path not in self._nodes:
            raise NoNode(path)
        if path in self._kids and not recursive:
            raise StoreError(f"{path} has children")
        for kid in sorted(self._kids.get(path, ())):
            self._do_delete(b, f"{path.rstrip('/')}/{kid}", True)
        was_ephemeral = path in self._ephemeral
        b.undo.append((path, self._nodes[path], was_ephemeral))
        self._drop(path)
        if not was_ephemeral:
            b.persistent.add(path)
        b.touched.append((path, True))

    def _guard_ok(self, guard: tuple[str, int] | None) -> bool:
        return guard is None or (guard[0] in self._nodes and self._nodes[guard[0]][1] == guard[1])

    def _new_batch(self) -> _Batch:
        if self._closed:
            raise StoreError("the metadata store is closed")
        return _Batch([], set(), [], self._loop.create_future())

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None:
        b = self._new_batch()
        self._do_create(b, path, data, ephemeral, make_parents)
        await self._submit(b)

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        """(see store.py) The counter is the parent's: one above the largest sequence its
        children have had since the store opened (or have now)."""
        parent = parent_of(prefix)
        n = self._sequences.get(parent)
        if n is None:
            n = 1 + max((int(k[-10:]) for k in self._kids.get(parent, ()) if k[-10:].isdigit()), default=-1)
        path = f"{prefix}{n:010d}"
        while path in self._nodes:  # (a child named so by hand)
            n += 1
            path = f"{prefix}{n:010d}"
        self._sequences[parent] = n + 1
        b = self._new_batch()
        self._do_create(b, path, data, False, True)
        await self._submit(b)
        return path

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        b = self._new_batch()
        v = self._do_set(b, path, data, version)
        await self._submit(b)
        return v

    async def delete(self, path: str, *, recursive: bool = False, version: int = -1) -> None:
        b = self._new_batch()
        cur = self._nodes.get(path)
        if version != -1 and cur is not None and cur[1] != version:
            raise BadVersion(f"{path} is at version {cur[1]}, not {version}")
        self._do_delete(b, path, recursive)
        await self._submit(b)

    async def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                          ) -> list[StoreError | None]:
        if not self._guard_ok(guard):
            return [Fenced(f"{guard[0]} moved on") for _ in items]  # type: ignore[index]
        b = self._new_batch()
        out: list[StoreError | None] = []
        for path, data in items:
            try:
                self._do_create(b, path, data, False, True)
                out.append(None)
            except StoreError as e:
                out.append(e)
        await self._submit(b)
        return out

    async def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                       ) -> list[int | StoreError]:
        if not self._guard_ok(guard):
            return [Fenced(f"{guard[0]} moved on") for _ in items]  # type: ignore[index]
        b = self._new_batch()
        out: list[int | StoreError] = []
        for path, data, version in items:
            try:
                out.append(self._do_set(b, path, data, version))
            except StoreError as e:
                out.append(e)
        await self._submit(b)
        return out

    # -- durability: group commit in the journal's thread ---------------------------------

    async def _submit(self, b: _Batch) -> None:
        if not b.undo:
            return
        if not b.persistent and not self._queued and not self._committing:
            self._fire(b.touched)
            return
        self._queued.append(b)
        if self._commit_task is None:
            self._commit_task = self._loop.create_task(self._commit_loop(), name="metadata-journal")
        await asyncio.shield(b.future)

    async def _commit_loop(self) -> None:
        try:
            while self._queued:
                group = list(self._queued)
                self._queued.clear()
                self._committing = group
                paths = set().union(*(b.persistent for b in group))
                changes = []
                for p in sorted(paths):
                    node = self._nodes.get(p)
                    changes.append((p, None, -1) if node is None else (p, node[0], node[1]))
                error: BaseException | None = None
                if changes:
                    try:
                        await self._loop.run_in_executor(self._executor, self._journal.commit, changes)
                    except Exception as e:  # disk full, I/O error: undo in memory, callers are told
                        error = e
                self._committing = []
                if error is None:
                    for b in group:
                        self._fire(b.touched)
                        if not b.future.done():
                            b.future.set_result(None)
                    continue
                failed = group + list(self._queued)
                self._queued.clear()
                for b in reversed(failed):
                    for path, node, ephemeral in reversed(b.undo):
                        self._restore(path, node, ephemeral)
                log.error("Could not write the metadata journal %s: %s; %d changes undone", self._journal.path,
                          error, sum(len(b.undo) for b in failed))
                for b in failed:
                    if not b.future.done():
                        b.future.set_exception(StoreError(f"metadata journal write failed: {error}"))
        finally:
            self._commit_task = None

    # -- watches --------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: ChildrenCallback) -> LocalWatch:
        self._check_open()
        if path not in self._nodes:
            try:
                await self.create(path, b"")
            except NodeExists:
                pass
        return self._add_watch(LocalWatch(path, True, callback))

    async def watch_data(self, path: str, callback: DataCallback) -> LocalWatch:
        self._check_open()
        return self._add_watch(LocalWatch(path, False, callback))

    def _add_watch(self, w: LocalWatch) -> LocalWatch:
        self._watches.setdefault(w.path, []).append(w)
        self._deliver(w)  # the state now, before the caller goes on
        return w

    def _fire(self, touched: list[tuple[str, bool]]) -> None:
        if not self._watches:
            return
        for path, structural in touched:
            for w in self._watches.get(path, ()):
                if not w.children:
                    self._schedule(w)
            if structural:
                for w in self._watches.get(parent_of(path), ()):
                    if w.children:
                        self._schedule(w)

    def _schedule(self, w: LocalWatch) -> None:
        if not w.pending and not w.cancelled:  # coalesce: the callback gets the state when it runs
            w.pending = True
            self._loop.call_soon(self._deliver, w)

    def _deliver(self, w: LocalWatch) -> None:
        w.pending = False
        if w.cancelled:
            ws = self._watches.get(w.path)
            if ws is not None and w in ws:
                ws.remove(w)
                if not ws:
                    del self._watches[w.path]
            return
        if w.children:
            kids = sorted(self._kids.get(w.path, ()))
            if kids != w.last:
                w.last = kids
                w.callback(kids)
        else:
            node = self._nodes.get(w.path)
            state = node if node is not None else (None, None)
            if state != w.last:
                w.last = state
                w.callback(*state)

    def add_session_listener(self, **_: Any) -> None:
        """An in-process store has no session to lose."""

    async def close(self) -> None:
        if self._closed:
            return
        while self._commit_task is not None:
            await asyncio.shield(self._commit_task)
        self._closed = True
        for ws in self._watches.values():
            for w in ws:
                w.cancel()
        self._watches.clear()
        await self._loop.run_in_executor(self._executor, self._journal.close)
        self._executor.shutdown(wait=False)
