"""The ZooKeeper backend of the metadata store: `MetadataStore` over a real ZooKeeper ensemble.

How it works. One `kazoo` client holds one ZooKeeper session. `zookeeper.connect` is Kafka's
string, `h1:2181,h2:2181/chroot`: we connect to the hosts without the chroot, create the chroot
if it is missing (as Kafka does), then prefix every path with it. Calls are synchronous (kazoo
runs the socket in its own thread; asyncio callers use `loop.run_in_executor`) and each waits at
most `zookeeper.session.timeout.ms`: past that the session is as good as gone anyway. A call
made while disconnected fails at once with `ConnectionLost` rather than queueing, so a broker
can refuse what needs ZooKeeper and keep serving the rest. Versions are znode data versions,
so `set(path, data, version)` is ZooKeeper's own compare-and-set.

kazoo's errors become the store's: NoNodeError -> NoNode, NodeExistsError -> NodeExists,
BadVersionError -> BadVersion, ConnectionLoss / timeouts -> ConnectionLost, SessionExpired
-> SessionLost (both StoreError subclasses), anything else -> StoreError.

Watches (`watch_children`, `watch_data`) and the session listener (`add_session_listener`)
are called from kazoo's thread; given an asyncio `loop`, callbacks are handed to it with
`loop.call_soon_threadsafe`, so the controller's event loop stays the one writer of its state.
ZooKeeper watches are one-shot; kazoo's ChildrenWatch/DataWatch recipes re-arm them, and
re-read after a reconnect or a new session, so a callback always sees the latest state (it may
skip intermediate ones, as with Kafka's watches).

Session states. SUSPENDED: the connection dropped, the session may still live (ephemerals
still there): `on_suspended`. LOST: the session expired; our ephemeral nodes (broker
registration, /controller) are gone and another broker may already be controller: a broker
must stop acting as controller/leader on `on_session_lost`. kazoo then opens a new session by
itself; `on_reconnected(new_session)` says whether ephemerals must be re-created.

Why kazoo and not aiozk: kazoo is the maintained, widely used Python ZooKeeper client (the
python-zk project: 3.8 servers, SASL, read-only mode, tested recipes for watches, locks and
elections, correct session-expiry handling and reconnection across an ensemble). aiozk is
asyncio-native but small, sparsely maintained and has fewer users; its session handling is
where bugs would cost us most (a zombie leader). The price of kazoo is a thread, which is
contained here: results are plain return values and events are marshalled onto the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from samsa.metadata.store import BadVersion, Fenced, NodeExists, NoNode, StoreError

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms default


class ConnectionLost(StoreError):
    """Not connected to ZooKeeper (the session may still be alive); retry later."""


class SessionLost(StoreError):
    """The ZooKeeper session expired or was closed; its ephemeral nodes are gone."""


def parse_connect(connect: str) -> tuple[str, str]:
    """Split `h1:2181,h2:2181/chroot` into (`h1:2181,h2:2181`, `/chroot`); no chroot -> ``""``."""
    connect = connect.strip()
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise StoreError(f"zookeeper.connect {connect!r} names no host")
    chroot = ("/" + chroot.rstrip("/")) if slash and chroot.strip("/") else ""
    if "//" in chroot:
        raise StoreError(f"zookeeper.connect {connect!r} has an invalid chroot")
    return hosts, chroot


@contextlib.contextmanager
def _errors(path: str) -> Iterator[None]:
    try:
        yield
    except NoNodeError:
        raise NoNode(path) from None
    except NodeExistsError:
        raise NodeExists(path) from None
    except BadVersionError:
        raise BadVersion(f"{path} is not at the expected version") from None
    except NotEmptyError:
        raise StoreError(f"{path} has children") from None
    except SessionExpiredError:  # ConnectionClosedError (a closed client) is a subclass
        raise SessionLost(f"ZooKeeper session lost ({path})") from None
    except (ConnectionLoss, OperationTimeoutError, KazooTimeoutError):
        raise ConnectionLost(f"ZooKeeper connection lost ({path})") from None
    except KazooException as e:
        raise StoreError(f"ZooKeeper error on {path}: {type(e).__name__} {e}") from None


def _deliver(loop: asyncio.AbstractEventLoop | None, fn: Callable[..., Any], *args: Any) -> bool:
    """Run fn(*args) here or on `loop`; False if the loop is closed (the watcher should stop)."""
    if loop is None:
        fn(*args)
        return True
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # loop closed
        return False
    return True


@dataclass
class Watch:
    """A registered watch; `cancel()` stops further callbacks (ZooKeeper's own watch lapses)."""

    path: str
    cancelled: bool = False
    _recipe: Any = field(default=None, repr=False)

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class _SessionListener:
    on_session_lost: Callable[[], Any] | None
    on_reconnected: Callable[[bool], Any] | None
    on_suspended: Callable[[], Any] | None
    loop: asyncio.AbstractEventLoop | None


class ZooKeeperStore:
    """`MetadataStore` on ZooKeeper (see the module docstring)."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        connection_timeout_ms: int | None = None,
        client: KazooClient | None = None,
    ) -> None:
        hosts, self.chroot = parse_connect(connect)
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self._timeout = session_timeout_ms / 1000
        conn_timeout = (connection_timeout_ms or session_timeout_ms) / 1000
        self._lock = threading.Lock()
        self._listeners: list[_SessionListener] = []
        self._state = KazooState.LOST
        self._lost_since_connected = False
        self._closed = False
        self._zk = client or KazooClient(hosts=hosts, timeout=self._timeout)
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=conn_timeout)
        except KazooTimeoutError:
            raise ConnectionLost(
                f"could not connect to ZooKeeper at {hosts} within {int(conn_timeout * 1000)} ms"
            ) from None
        except KazooException as e:
            self._zk.close()
            raise StoreError(f"could not connect to ZooKeeper at {hosts}: {e}") from None
        if self.chroot:
            try:
                with _errors(self.chroot):
                    self._zk.ensure_path(self.chroot)
            except StoreError:
                self.close()
                raise
            self._zk.chroot = self.chroot

    # -- the MetadataStore protocol -------------------------------------------------------

    def _check(self, path: str) -> None:
        if self._closed:
            raise SessionLost(f"store is closed ({path})")
        if not self._zk.connected:
            raise ConnectionLost(f"not connected to ZooKeeper ({path})")

    def get(self, path: str) -> tuple[bytes, int] | None:
        self._check(path)
        try:
            with _errors(path):
                data, stat = self._zk.get_async(path).get(timeout=self._timeout)
        except NoNode:
            return None
        return data, stat.version

    def children(self, path: str) -> list[str]:
        self._check(path)
        try:
            with _errors(path):
                kids = self._zk.get_children_async(path).get(timeout=self._timeout)
        except NoNode:
            return []  # as EmbeddedStore: a missing node has no children
        return sorted(kids)

    def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None:
        self._check(path)
        try:
            with _errors(path):
                self._zk.create_async(path, data, ephemeral=ephemeral, makepath=make_parents).get(
                    timeout=self._timeout
                )
        except NoNode:
            raise NoNode(path.rsplit("/", 1)[0] or "/") from None

    def set(self, path: str, data: bytes, version: int = -1) -> int:
        self._check(path)
        with _errors(path):
            stat = self._zk.set_async(path, data, version).get(timeout=self._timeout)
        return int(stat.version)

    def delete(self, path: str, *, recursive: bool = False) -> None:
        self._check(path)
        with _errors(path):
            if not recursive:
                self._zk.delete_async(path).get(timeout=self._timeout)
                return
            if self._zk.exists_async(path).get(timeout=self._timeout) is None:
                raise NoNodeError(path)
            self._zk.delete(path, recursive=True)

    # -- pipelined batches: many requests in flight, one round trip of latency ---------------

    def get_many(self, paths: list[str]) -> list[tuple[bytes, int] | None]:
        self._check(paths[0] if paths else "/")
        pending = [(p, self._zk.get_async(p)) for p in paths]
        out: list[tuple[bytes, int] | None] = []
        for path, res in pending:
            try:
                with _errors(path):
                    data, stat = res.get(timeout=self._timeout)
                out.append((data, stat.version))
            except NoNode:
                out.append(None)
        return out

    def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                    ) -> list[StoreError | None]:
        self._check(items[0][0] if items else "/")
        if guard is None:
            pending = [(p, self._zk.create_async(p, d, makepath=True)) for p, d in items]
            return [self._outcome(p, r) for p, r in pending]
        # A multi cannot create missing parents: make them first (pipelined; existing ones are fine).
        parents = sorted({p.rsplit("/", 1)[0] for p, _ in items if p.count("/") > 1})
        for parent, res in [(q, self._zk.create_async(q, b"", makepath=True)) for q in parents]:
            err = self._outcome(parent, res)
            if err is not None and not isinstance(err, NodeExists):
                return [err for _ in items]
        out: list[StoreError | None] = []
        for path, res in [(p, self._guarded(guard, lambda t, p=p, d=d: t.create(p, d))) for p, d in items]:
            r = self._tx_outcome(path, res, guard)
            out.append(r if isinstance(r, StoreError) else None)
        return out

    def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                 ) -> list[int | StoreError]:
        """Pipelined compare-and-set writes. With `guard` = (path, version), each write happens
        only while that node is still at that version (a ZooKeeper multi: check + set), which
        fences a controller whose epoch has passed: the results are then `Fenced`."""
        self._check(items[0][0] if items else "/")
        if guard is None:
            pending = [(p, self._zk.set_async(p, d, v)) for p, d, v in items]
            out: list[int | StoreError] = []
            for path, res in pending:
                try:
                    with _errors(path):
                        out.append(int(res.get(timeout=self._timeout).version))
                except StoreError as e:
                    out.append(e)
            return out
        results: list[int | StoreError] = []
        for path, res in [(p, self._guarded(guard, lambda t, p=p, d=d, v=v: t.set_data(p, d, v)))
                          for p, d, v in items]:
            r = self._tx_outcome(path, res, guard)
            results.append(r if isinstance(r, StoreError) else int(r.version))
        return results

    def _guarded(self, guard: tuple[str, int], op: Callable[[Any], Any]) -> Any:
        t = self._zk.transaction()
        t.check(guard[0], guard[1])
        op(t)
        return t.commit_async()

    def _tx_outcome(self, path: str, res: Any, guard: tuple[str, int]) -> Any:
        try:
            with _errors(path):
                check, result = res.get(timeout=self._timeout)
        except StoreError as e:
            return e
        if isinstance(check, Exception) and not isinstance(check, RolledBackError):
            return Fenced(f"{guard[0]} is no longer at version {guard[1]}")
        if isinstance(result, Exception):
            try:
                with _errors(path):
                    raise result
            except StoreError as e:
                return e
        return result

    def _outcome(self, path: str, res: Any) -> StoreError | None:
        try:
            with _errors(path):
                res.get(timeout=self._timeout)
        except StoreError as e:
            return e
        return None

    def close(self) -> None:
        """End the session (our ephemeral nodes vanish at once) and stop kazoo's thread."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._zk.stop()
        with contextlib.suppress(Exception):
            self._zk.close()

    # -- beyond the protocol: what the controller needs ------------------------------------

    @property
    def connected(self) -> bool:
        return not self._closed and self._zk.connected

    @property
    def session_id(self) -> int | None:
        cid = self._zk.client_id
        return cid[0] if cid else None

    def ensure_path(self, path: str) -> None:
        self._check(path)
        with _errors(path):
            self._zk.ensure_path(path)

    def watch_children(
        self,
        path: str,
        callback: Callable[[list[str]], Any],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Watch:
        """Call `callback(sorted_children)` now and after every change of `path`'s children.

        The node is created (persistent, with parents) if missing, as Kafka creates its
        top-level paths, since ZooKeeper cannot watch the children of a missing node.
        """
        self.ensure_path(path)
        w = Watch(path)

        def fire(kids: list[str]) -> bool | None:
            if w.cancelled or self._closed:
                return False
            return None if _deliver(loop, callback, sorted(kids)) else False

        with _errors(path):
            w._recipe = ChildrenWatch(self._zk, path, fire)
        return w

    def watch_data(
        self,
        path: str,
        callback: Callable[[bytes | None, int | None], Any],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Watch:
        """Call `callback(data, version)` now and after every change, creation or deletion of
        `path` (`(None, None)` while it does not exist)."""
        self._check(path)
        w = Watch(path)

        def fire(data: bytes | None, stat: Any) -> bool | None:
            if w.cancelled or self._closed:
                return False
            version = None if stat is None else int(stat.version)
            return None if _deliver(loop, callback, data, version) else False

        with _errors(path):
            w._recipe = DataWatch(self._zk, path, fire)
        return w

    def add_session_listener(
        self,
        *,
        on_session_lost: Callable[[], Any] | None = None,
        on_reconnected: Callable[[bool], Any] | None = None,
        on_suspended: Callable[[], Any] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Be told of the session's life: lost (stop acting as controller/leader at once),
        suspended (connection down, session maybe alive), reconnected(new_session)."""
        with self._lock:
            self._listeners.append(_SessionListener(on_session_lost, on_reconnected, on_suspended, loop))

    def _on_state(self, state: str) -> None:
        # Called by kazoo's thread on every state change; must not block or call kazoo.
        with self._lock:
            prev, self._state = self._state, state
            first = prev == KazooState.LOST and not self._lost_since_connected and state == KazooState.CONNECTED
            if state == KazooState.LOST and prev != KazooState.LOST:
                self._lost_since_connected = True
            new_session = self._lost_since_connected
            if state == KazooState.CONNECTED:
                self._lost_since_connected = False
            listeners = list(self._listeners)
        if self._closed or first:
            return
        for li in listeners:
            if state == KazooState.LOST and prev != KazooState.LOST and li.on_session_lost:
                _deliver(li.loop, li.on_session_lost)
            elif state == KazooState.SUSPENDED and li.on_suspended:
                _deliver(li.loop, li.on_suspended)
            elif state == KazooState.CONNECTED and prev != KazooState.CONNECTED and li.on_reconnected:
                _deliver(li.loop, li.on_reconnected, new_session)
