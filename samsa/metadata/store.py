"""The metadata store: a small tree of versioned nodes, as ZooKeeper keeps Kafka's metadata.

One asynchronous interface, two engines: `EmbeddedStore` (`embedded.py`) serves a single
broker with no other process to run; `ZooKeeperStore` (`zookeeper.py`) maps the same calls
onto znodes of a real ensemble. Both keep one contract (`tests/zk/test_store.py` runs it on
each).

Every call that reads or writes is a coroutine, so nothing here ever blocks the event loop:
the ZooKeeper engine hands kazoo's asynchronous results back as asyncio futures, the
embedded engine makes its writes durable in a thread of its own. Versions give
compare-and-set: `set(path, data, version)` fails with `BadVersion` unless the node is still
at `version`. A write returns once it is durable (ZooKeeper's quorum, or the embedded
journal on disk).

Watches (`watch_children`, `watch_data`) call their callback on the store's event loop with
the node's latest state: once at registration, then after changes (intermediate states may
be skipped, as with ZooKeeper's one-shot watches re-armed). A callback must only record or
enqueue what it got: the work it causes belongs to the task that consumes the queue (the
controller's, the cluster view's).

`create_sequential(prefix, data)` is ZooKeeper's sequential create: the node is `prefix`
followed by a 10-digit number larger than any its parent has had (Kafka's change
notifications, `/config/changes/config_change_0000000042`); it returns the path.

Sessions: ephemeral nodes belong to the session that created it (`session_id`; `owner(path)`
names a node's). The session listener says when the connection is suspended, when the
session is lost (its ephemerals are gone), and when it is back (`new_session`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

Node = tuple[bytes, int]  # (data, version)


class StoreError(Exception):
    pass


class NoNode(StoreError):
    pass


class NodeExists(StoreError):
    pass


class BadVersion(StoreError):
    pass


class Fenced(StoreError):
    """A guarded write found its guard node moved on (e.g. a newer controller epoch)."""


class ConnectionLost(StoreError):
    """Not connected to the store (the session may still be alive); retry later."""


class SessionLost(StoreError):
    """The session expired or the store was closed; its ephemeral nodes are gone."""


def log_failures(logger: logging.Logger, what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an event handler so that it logs, rather than raises, what goes wrong: a store
    error is a warning (the event comes again once the store is back), a bug is logged with
    its traceback. Either way the caller (an event loop, a queue consumer) carries on. Works
    on plain functions and on coroutine functions."""
    import inspect

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(fn):
            async def run_async(*args: Any) -> None:
                try:
                    await fn(*args)
                except StoreError as e:
                    logger.warning("%s event %s not handled: %s", what, fn.__name__, e)
                except Exception:
                    logger.exception("%s event %s failed", what, fn.__name__)

            run_async.__name__ = fn.__name__
            return run_async

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


class Watch(Protocol):
    path: str

    def cancel(self) -> None: ...


ChildrenCallback = Callable[[list[str]], Any]
DataCallback = Callable[[bytes | None, int | None], Any]


class MetadataStore(Protocol):
    """What the broker and the controller use of a metadata store (see the module docstring)."""

    @property
    def connected(self) -> bool: ...

    @property
    def session_id(self) -> int: ...

    async def get(self, path: str) -> Node | None: ...
    async def get_many(self, paths: list[str]) -> list[Node | None]: ...
    async def children(self, path: str) -> list[str]: ...
    async def owner(self, path: str) -> int | None: ...
    async def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None: ...
    async def create_sequential(self, prefix: str, data: bytes) -> str: ...
    async def set(self, path: str, data: bytes, version: int = -1) -> int: ...
    async def delete(self, path: str, *, recursive: bool = False, version: int = -1) -> None: ...  # BadVersion
    async def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                          ) -> list[StoreError | None]: ...
    async def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                       ) -> list[int | StoreError]: ...
    async def watch_children(self, path: str, callback: ChildrenCallback) -> Watch: ...
    async def watch_data(self, path: str, callback: DataCallback) -> Watch: ...
    def add_session_listener(self, *, on_session_lost: Callable[[], Any] | None = None,
                             on_reconnected: Callable[[bool], Any] | None = None,
                             on_suspended: Callable[[], Any] | None = None) -> None: ...
    def disconnected_for(self) -> float: ...

    @property
    def session_timeout(self) -> float: ...  # seconds; what the server granted
    async def close(self) -> None: ...


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"
