"""The ZooKeeper engine of the metadata store: `MetadataStore` over a real ZooKeeper ensemble.

How it works. One `kazoo` client holds one ZooKeeper session; kazoo runs the socket in a
thread of its own. Every call uses kazoo's asynchronous API, and its result comes back as an
asyncio future (`_call`: kazoo's completion callback hands it to the loop with
`call_soon_threadsafe`). So the event loop never waits on ZooKeeper, and a batch (`get_many`,
`set_many`, ...) is pipelined: many requests in flight, one round trip. Opening the session
(`ZooKeeperStore.connect`) runs in a worker thread.

The loop does not call kazoo itself: it queues each request to a submitter thread of the
store's own (`_Submitter`), which calls kazoo. kazoo's asynchronous calls are not always
asynchronous: each writes one byte to a socket pair to wake its connection thread, which
reads one back per request it sends, and that socket pair holds about 280 bytes. A batch
bigger than that blocks the caller until the connection thread catches up (1.4 s of frozen
loop for 5,000 creates on a healthy ZooKeeper), and for as long as the connection thread is
stuck (connecting, or writing to a ZooKeeper that does not read) it blocks indefinitely. The
submitter absorbs that wait; the order of requests is kept (one thread, first in first out).

`zookeeper.connect` is Kafka's string, `h1:2181,h2:2181/chroot`: we connect to the hosts
without the chroot, create the chroot if it is missing (as Kafka does), then prefix every
path with it. A call made while disconnected fails at once with `ConnectionLost` rather
than queueing, so a broker refuses what needs ZooKeeper and keeps serving the rest; one in
flight when the connection drops fails the same way. Versions are znode data versions, so
`set(path, data, version)` is ZooKeeper's own compare-and-set; a guarded write is a multi
(check the guard's version + the write).

kazoo's errors become the store's: NoNodeError -> NoNode, NodeExistsError -> NodeExists,
BadVersionError -> BadVersion, ConnectionLoss / timeouts -> ConnectionLost, SessionExpired
-> SessionLost, anything else -> StoreError.

Watches. ZooKeeper's watches are one-shot: each `_ZkWatch` re-arms itself (a read with a
watch) whenever it fires, and after every reconnection (kazoo drops its watchers when the
connection drops; a new session has none). Results come back through kazoo's single
completion thread in request order; a sequence number drops any that a newer read has
overtaken, and a state equal to the last one delivered is not delivered again. Callbacks
run on the loop.

Session states. SUSPENDED: the connection dropped, the session may still live (ephemerals
still there): `on_suspended`; `disconnected_for()` says for how long. LOST: the session
expired; our ephemerals are gone and another broker may already be controller:
`on_session_lost`. kazoo opens a new session by itself; `on_reconnected(new_session)` says
whether ephemerals must be created again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import select
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
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
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import EventType
from kazoo.retry import KazooRetry

from samsa.metadata.store import (
    BadVersion,
    ChildrenCallback,
    ConnectionLost,
    DataCallback,
    Fenced,
    Node,
    NodeExists,
    NoNode,
    SessionLost,
    StoreError,
    parent_of,
)

DEFAULT_SESSION_TIMEOUT_MS = 18000  # Kafka's zookeeper.session.timeout.ms default
MULTI_OPS = 500  # writes per guarded multi (well under jute.maxbuffer for partition states)

__all__ = ["ConnectionLost", "SessionLost", "ZooKeeperStore", "parse_connect"]


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


def _convert(path: str, e: BaseException) -> BaseException:
    if isinstance(e, NoNodeError):
        return NoNode(path)
    if isinstance(e, NodeExistsError):
        return NodeExists(path)
    if isinstance(e, BadVersionError):
        return BadVersion(f"{path} is not at the expected version")
    if isinstance(e, NotEmptyError):
        return StoreError(f"{path} has children")
    if isinstance(e, SessionExpiredError):  # ConnectionClosedError (a closed client) is a subclass
        return SessionLost(f"ZooKeeper session lost ({path})")
    if isinstance(e, (ConnectionLoss, OperationTimeoutError, KazooTimeoutError)):
        return ConnectionLost(f"ZooKeeper connection lost ({path})")
    if isinstance(e, KazooException):
        return StoreError(f"ZooKeeper error on {path}: {type(e).__name__} {e}")
    return e


@contextlib.contextmanager
def _errors(path: str) -> Iterator[None]:
    try:
        yield
    except KazooException as e:
        raise _convert(path, e) from None


def _post(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> bool:
    """Run fn(*args) on `loop` (from kazoo's threads); False once the loop is closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


def _settle(fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def _node(v: Any) -> Node:
    return v[0], int(v[1].version)


def _version(stat: Any) -> int:
    return int(stat.version)


class _Submitter:
    """The thread that makes the store's kazoo requests, in the order the loop asked for them
    (see "How it works" above): the loop only appends to a queue, which never blocks."""

    def __init__(self, name: str) -> None:
        self._q: queue.SimpleQueue[Callable[[], None] | list[Callable[[], None]] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._q.put(job)

    def submit_all(self, jobs: list[Callable[[], None]]) -> None:
        if jobs:
            self._q.put(jobs)

    run = submit  # (for callers that read better as "run this there")

    def stop(self) -> None:
        self._q.put(None)

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            for n, job in enumerate(item if isinstance(item, list) else (item,)):
                if n % 64 == 63:
                    time.sleep(0)  # hand the GIL over now and then: the loop must not starve
                try:
                    job()
                except Exception:  # noqa: BLE001 - a job settles its own future; this thread must live
                    logging.getLogger("samsa.metadata").exception("A ZooKeeper request could not be made")


@dataclass
class _SessionListener:
    on_session_lost: Callable[[], Any] | None
    on_reconnected: Callable[[bool], Any] | None
    on_suspended: Callable[[], Any] | None


class _ZkWatch:
    """A self re-arming watch on one path (see "Watches" in the module docstring)."""

    def __init__(self, store: ZooKeeperStore, path: str, children: bool, callback: Callable[..., Any]) -> None:
        self.store = store
        self.path = path
        self.children = children
        self.callback = callback
        self.cancelled = False
        self._lock = threading.Lock()
        self._seq = 0
        self._delivered_seq = 0
        self._last: Any = None
        self._has_last = False
        self.first: asyncio.Future[None] = store._loop.create_future()

    def cancel(self) -> None:
        self.cancelled = True
        self.store._watches.discard(self)

    def arm(self) -> None:
        """Read the node with a watch set (any thread: the submitter makes the request)."""
        if self.cancelled or self.store._closed:
            return
        self.store._submitter.run(self._arm_now)

    def _arm_now(self) -> None:
        if self.cancelled or self.store._closed:
            return
        with self._lock:
            self._seq += 1
            seq = self._seq
        zk = self.store._zk
        try:
            if self.children:
                res = zk.get_children_async(self.path, watch=self._on_event)
            else:
                res = zk.get_async(self.path, watch=self._on_event)
        except Exception as e:  # the client is closed or not connected: re-armed on reconnect
            self._fail_first(e)
            return
        res.rawlink(lambda r: self._on_result(seq, r))

    def _on_event(self, event: Any) -> None:
        if event.type == EventType.NONE:  # connection state change: re-armed when connected
            return
        self.arm()

    def _on_result(self, seq: int, res: Any) -> None:
        try:
            value = res.get_nowait()
        except NoNodeError:
            if not self.children:
                # Missing: watch for its creation; if it appeared meanwhile, read it again.
                self.store._submitter.run(lambda: self._watch_creation(seq))
                return
            self._deliver(seq, [])
            return
        except Exception as e:  # connection lost: re-armed on reconnect
            self._fail_first(e)
            return
        if self.children:
            self._deliver(seq, sorted(value))
        else:
            data, stat = value
            self._deliver(seq, (data, int(stat.version)))

    def _watch_creation(self, seq: int) -> None:
        try:
            ex = self.store._zk.exists_async(self.path, watch=self._on_event)
        except Exception as e:
            self._fail_first(e)
            return
        ex.rawlink(lambda r: self._on_exists(seq, r))

    def _on_exists(self, seq: int, res: Any) -> None:
        try:
            stat = res.get_nowait()
        except Exception as e:
            self._fail_first(e)
            return
        if stat is not None:
            self.arm()
        else:
            self._deliver(seq, (None, None))

    def _deliver(self, seq: int, state: Any) -> None:
        with self._lock:
            if seq < self._delivered_seq or self.cancelled:
                return
            self._delivered_seq = seq
            if self._has_last and state == self._last:
                same = True
            else:
                same = False
                self._last, self._has_last = state, True
        loop = self.store._loop
        if not same:
            if self.children:
                _post(loop, self._call, state)
            else:
                _post(loop, self._call, *state)
        _post(loop, _settle, self.first, None, None)

    def _call(self, *args: Any) -> None:
        if not self.cancelled:
            self.callback(*args)

    def _fail_first(self, e: BaseException) -> None:
        _post(self.store._loop, _settle, self.first, None, _convert(self.path, e))


class ZooKeeperStore:
    """`MetadataStore` on ZooKeeper (see the module docstring)."""

    def __init__(self, client: KazooClient, hosts: str, chroot: str, session_timeout_ms: int,
                 loop: asyncio.AbstractEventLoop) -> None:
        self._zk = client
        self.hosts = hosts
        self.chroot = chroot
        self.session_timeout_ms = session_timeout_ms
        self._loop = loop
        self._lock = threading.Lock()
        self._listeners: list[_SessionListener] = []
        self._watches: set[_ZkWatch] = set()
        self._state = KazooState.CONNECTED
        self._lost_since_connected = False
        self._disconnected_at: float | None = None
        self._closed = False
        self.negotiated_timeout_ms = session_timeout_ms
        self._completed: deque[tuple[asyncio.Future[Any], Any, BaseException | None]] = deque()
        self._drain_scheduled = False
        self._known: set[str] = {"/"}  # nodes known to exist (parents of guarded creates)
        self._submitter = _Submitter(f"zk-submit-{hosts}")
        client.add_listener(self._on_state)

    @classmethod
    async def connect(cls, connect: str, *, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
                      connection_timeout_ms: int | None = None) -> ZooKeeperStore:
        """Open a session (in a worker thread), create the chroot if missing."""
        hosts, chroot = parse_connect(connect)
        conn_timeout = (connection_timeout_ms or session_timeout_ms) / 1000
        loop = asyncio.get_running_loop()
        # Reconnect at least every second (kazoo's default backoff grows to a minute, which
        # would keep a broker away long after ZooKeeper is back).
        retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_jitter=0.1, max_delay=1.0)
        zk = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000, connection_retry=retry, handler=_Handler())
        _record_negotiated_timeout(zk)
        try:
            await loop.run_in_executor(None, lambda: zk.start(timeout=conn_timeout))
        except KazooTimeoutError:
            await loop.run_in_executor(None, _stop_quietly, zk)
            raise ConnectionLost(
                f"could not connect to ZooKeeper at {hosts} within {int(conn_timeout * 1000)} ms") from None
        except KazooException as e:
            await loop.run_in_executor(None, _stop_quietly, zk)
            raise StoreError(f"could not connect to ZooKeeper at {hosts}: {e}") from None
        store = cls(zk, hosts, chroot, session_timeout_ms, loop)
        store._note_negotiated(getattr(zk._connection, "_samsa_negotiated_ms", None))
        if chroot:
            try:
                await store._ensure_path(chroot)
            except StoreError:
                await store.close()
                raise
            zk.chroot = chroot
        return store

    # -- plumbing ---------------------------------------------------------------------------

    def _check(self, path: str) -> None:
        if self._closed:
            raise SessionLost(f"store is closed ({path})")
        if not self._zk.connected:
            raise ConnectionLost(f"not connected to ZooKeeper ({path})")

    def _call(self, path: str, make: Callable[[], Any], transform: Callable[[Any], Any] = lambda v: v,
              absent: Any = NoNode) -> asyncio.Future[Any]:
        """An asyncio future of the kazoo request `make()` (a call of kazoo's asynchronous API,
        made by the submitter thread), its result passed through `transform`, errors
        converted; `absent` is what NoNode becomes: an exception class to raise, or a value to
        return."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._submitter.submit(self._request(path, make, fut, transform, absent))
        return fut

    def _calls(self, requests: list[tuple[str, Callable[[], Any]]], transform: Callable[[Any], Any] = lambda v: v,
               absent: Any = NoNode) -> list[asyncio.Future[Any]]:
        """`_call` for a batch: one hand-off to the submitter for all of them."""
        futs: list[asyncio.Future[Any]] = [self._loop.create_future() for _ in requests]
        self._submitter.submit_all([self._request(path, make, fut, transform, absent)
                                    for (path, make), fut in zip(requests, futs)])
        return futs

    def _request(self, path: str, make: Callable[[], Any], fut: asyncio.Future[Any],
                 transform: Callable[[Any], Any], absent: Any) -> Callable[[], None]:
        """What the submitter runs for one request: make it, and hand its outcome to the loop."""

        def done(r: Any) -> None:
            try:
                value, error = transform(r.get_nowait()), None
            except NoNodeError:
                if isinstance(absent, type) and issubclass(absent, BaseException):
                    value, error = None, absent(path)
                else:
                    value, error = absent, None
            except BaseException as e:
                value, error = None, _convert(path, e)
            self._complete(fut, value, error)

        def submit() -> None:
            try:
                res = make()
            except BaseException as e:  # kazoo refused it at once (closed client, bad argument)
                self._complete(fut, None, _convert(path, e))
                return
            res.rawlink(done)

        return submit

    def _complete(self, fut: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
        """From any thread: settle `fut` on the loop (results of a burst in one wake-up)."""
        self._completed.append((fut, value, error))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            _post(self._loop, self._drain)

    def _drain(self) -> None:
        """Settle every result kazoo has completed (one wake-up of the loop for a burst)."""
        self._drain_scheduled = False
        completed = self._completed
        while completed:
            fut, value, error = completed.popleft()
            _settle(fut, value, error)

    async def _ensure_path(self, path: str) -> None:
        self._check(path)
        try:
            await self._call(path, lambda: self._zk.create_async(path, b"", makepath=True))
        except NodeExists:
            pass

    # -- reads ------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return not self._closed and self._zk.connected

    def _note_negotiated(self, ms: float | None) -> None:
        if ms:
            self.negotiated_timeout_ms = int(ms)

    @property
    def session_timeout(self) -> float:
        """The session timeout ZooKeeper granted, in seconds (a server bounds what a client
        asks for between 2 and 20 of its ticks)."""
        ms = getattr(self._zk._connection, "_samsa_negotiated_ms", None) or self.negotiated_timeout_ms
        return float(ms) / 1000

    @property
    def session_id(self) -> int:
        cid = self._zk.client_id
        return int(cid[0]) if cid else 0

    def disconnected_for(self) -> float:
        at = self._disconnected_at
        return 0.0 if at is None else time.monotonic() - at

    async def get(self, path: str) -> Node | None:
        self._check(path)
        return await self._call(path, lambda: self._zk.get_async(path), _node, absent=None)

    async def get_many(self, paths: list[str]) -> list[Node | None]:
        if not paths:
            return []
        self._check(paths[0])
        get = self._zk.get_async
        futs = self._calls([(p, partial(get, p)) for p in paths], _node, absent=None)
        return list(await asyncio.gather(*futs))

    async def children(self, path: str) -> list[str]:
        self._check(path)
        kids = await self._call(path, lambda: self._zk.get_children_async(path), absent=[])
        return sorted(kids)

    async def owner(self, path: str) -> int | None:
        self._check(path)
        stat = await self._call(path, lambda: self._zk.exists_async(path), absent=None)
        return None if stat is None else int(stat.ephemeralOwner)

    # -- writes -----------------------------------------------------------------------------

    async def create(self, path: str, data: bytes, *, ephemeral: bool = False, make_parents: bool = True) -> None:
        self._check(path)
        try:
            await self._call(path, lambda: self._zk.create_async(path, data, ephemeral=ephemeral,
                                                                 makepath=make_parents))
        except NoNode:
            raise NoNode(parent_of(path)) from None

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        self._check(prefix)
        return str(await self._call(prefix, lambda: self._zk.create_async(prefix, data, sequence=True,
                                                                          makepath=True)))

    async def set(self, path: str, data: bytes, version: int = -1) -> int:
        self._check(path)
        return int(await self._call(path, lambda: self._zk.set_async(path, data, version), _version))

    async def delete(self, path: str, *, recursive: bool = False, version: int = -1) -> None:
        self._check(path)
        if not recursive:
            await self._call(path, lambda: self._zk.delete_async(path, version))
            return
        if await self.owner(path) is None:
            raise NoNode(path)
        await self._delete_tree(path)

    async def _delete_tree(self, path: str) -> None:
        kids = await self.children(path)
        if kids:
            await asyncio.gather(*(self._delete_tree(f"{path.rstrip('/')}/{k}") for k in kids))
        try:
            await self._call(path, lambda: self._zk.delete_async(path))
        except NoNode:
            pass

    async def create_many(self, items: list[tuple[str, bytes]], *, guard: tuple[str, int] | None = None
                          ) -> list[StoreError | None]:
        if not items:
            return []
        self._check(items[0][0])
        if guard is None:
            create = self._zk.create_async
            futs = self._calls([(p, partial(create, p, d, makepath=True)) for p, d in items])
            created = await asyncio.gather(*futs, return_exceptions=True)
            for r in created:
                if isinstance(r, BaseException) and not isinstance(r, StoreError):
                    raise r
            return [r if isinstance(r, StoreError) else None for r in created]
        # Guarded: multis of up to MULTI_OPS writes, each behind one check of the guard, with
        # the missing parents created in the same multi (it applies its operations in order).
        ops: list[tuple[str, bytes, int]] = [(p, d, -1) for p, d in items]
        return [r if isinstance(r, StoreError) else None for r in await self._guarded_many(ops, guard, create=True)]

    async def set_many(self, items: list[tuple[str, bytes, int]], *, guard: tuple[str, int] | None = None
                       ) -> list[int | StoreError]:
        """Pipelined compare-and-set writes. With `guard` = (path, version), each write happens
        only while that node is still at that version (ZooKeeper multis: check + sets), which
        fences a controller whose epoch has passed: the results are then `Fenced`."""
        if not items:
            return []
        self._check(items[0][0])
        if guard is None:
            set_data = self._zk.set_async
            futs = self._calls([(p, partial(set_data, p, d, v)) for p, d, v in items], _version)
            out = await asyncio.gather(*futs, return_exceptions=True)
            for r in out:
                if isinstance(r, BaseException) and not isinstance(r, StoreError):
                    raise r
            return list(out)  # type: ignore[arg-type]
        return [r if isinstance(r, StoreError) else int(r.version)
                for r in await self._guarded_many(items, guard, create=False)]

    async def _guarded_many(self, items: list[tuple[str, bytes, int]], guard: tuple[str, int], *,
                            create: bool) -> list[Any]:
        """Guarded creates (`create`) or compare-and-set writes, in multis of up to MULTI_OPS
        operations. A multi is all or nothing: when one of its writes fails, that write gets
        its error and the others, rolled back, go again in the next round (a parent that
        turned out to exist is remembered). Returns, per item, kazoo's result or a StoreError."""
        results: list[Any] = [None] * len(items)
        todo = list(range(len(items)))
        single: set[int] = set()  # items to write alone: their multi failed on another write
        for _ in range(8):
            if not todo:
                break
            chunks: list[tuple[Any, list[tuple[str, Any]]]] = []
            plan: list[tuple[str, Any]] = []
            t = None
            for i in todo:
                if t is None or len(plan) >= MULTI_OPS or i in single or plan[-1][1] in single:
                    if t is not None:
                        chunks.append((t, plan))
                    t, plan = self._zk.transaction(), [("check", None)]
                    t.check(guard[0], guard[1])
                    made: set[str] = set()
                path, data, version = items[i]
                if create:
                    for a in _ancestors(path):
                        if a not in self._known and a not in made:
                            t.create(a, b"")
                            plan.append(("parent", a))
                            made.add(a)
                    t.create(path, data)
                else:
                    t.set_data(path, data, version)
                plan.append(("item", i))
            if t is not None:
                chunks.append((t, plan))
            outcomes = await asyncio.gather(*self._calls([(items[plan[-1][1]][0], t.commit_async)
                                                          for t, plan in chunks]), return_exceptions=True)
            retry: list[int] = []
            for (_, plan), outcome in zip(chunks, outcomes):
                mine = [v for kind, v in plan if kind == "item"]
                failed_here = False
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, StoreError):
                        raise outcome
                    for i in mine:
                        results[i] = outcome
                    continue
                if isinstance(outcome[0], Exception) and not isinstance(outcome[0], (RolledBackError,
                                                                                     RuntimeInconsistency)):
                    for i in mine:
                        results[i] = Fenced(f"{guard[0]} is no longer at version {guard[1]}")
                    continue
                for (kind, v), res in zip(plan[1:], outcome[1:]):
                    if kind == "parent":
                        if not isinstance(res, Exception):
                            self._remember(v)
                        elif isinstance(res, NodeExistsError):
                            self._remember(v)
                        elif isinstance(res, NoNodeError):
                            self._forget(v)
                    elif isinstance(res, (RolledBackError, RuntimeInconsistency)):
                        retry.append(v)  # not applied: another operation of the multi failed
                        failed_here = True
                    elif isinstance(res, Exception):
                        if create and isinstance(res, NoNodeError):
                            self._forget(items[v][0])  # an ancestor we thought was there is gone
                            retry.append(v)
                        else:
                            results[v] = _convert(items[v][0], res)
                        failed_here = True
                    else:
                        results[v] = res
                        if create:
                            for a in _ancestors(items[v][0]):
                                self._remember(a)
                if failed_here and len(mine) > 1:
                    # Every other write of this multi goes again alone (pipelined), so that
                    # many failing writes cost one more round, not one round each.
                    single.update(mine)
            todo = retry
        for i in todo:
            results[i] = StoreError(f"could not write {items[i][0]}: too much contention")
        return results

    def _remember(self, path: str) -> None:
        if len(self._known) >= 100_000:
            self._known.clear()
        self._known.add(path)

    def _forget(self, path: str) -> None:
        for a in [path, *_ancestors(path)]:
            self._known.discard(a)

    # -- watches ----------------------------------------------------------------------------

    async def watch_children(self, path: str, callback: ChildrenCallback) -> _ZkWatch:
        """Call `callback(sorted_children)` now and after every change of `path`'s children.
        The node is created (persistent, with parents) if missing, as Kafka creates its
        top-level paths, since ZooKeeper cannot watch the children of a missing node."""
        await self._ensure_path(path)
        return await self._watch(_ZkWatch(self, path, True, callback))

    async def watch_data(self, path: str, callback: DataCallback) -> _ZkWatch:
        """Call `callback(data, version)` now and after every change, creation or deletion of
        `path` (`(None, None)` while it does not exist)."""
        self._check(path)
        return await self._watch(_ZkWatch(self, path, False, callback))

    async def _watch(self, w: _ZkWatch) -> _ZkWatch:
        self._watches.add(w)
        w.arm()
        try:
            await w.first
        except StoreError:
            w.cancel()
            raise
        return w

    def _rearm_all(self) -> None:
        self._submitter.submit_all([w._arm_now for w in list(self._watches)])

    # -- sessions ---------------------------------------------------------------------------

    def add_session_listener(
        self,
        *,
        on_session_lost: Callable[[], Any] | None = None,
        on_reconnected: Callable[[bool], Any] | None = None,
        on_suspended: Callable[[], Any] | None = None,
    ) -> None:
        """Be told (on the loop) of the session's life: lost (stop acting as controller or
        leader), suspended (connection down, session maybe alive), reconnected(new_session)."""
        with self._lock:
            self._listeners.append(_SessionListener(on_session_lost, on_reconnected, on_suspended))

    def _on_state(self, state: str) -> None:
        # Called by kazoo's thread on every state change; must not block.
        with self._lock:
            prev, self._state = self._state, state
            if state == KazooState.LOST and prev != KazooState.LOST:
                self._lost_since_connected = True
            new_session = self._lost_since_connected
            if state == KazooState.CONNECTED:
                self._lost_since_connected = False
                self._disconnected_at = None
            elif self._disconnected_at is None:
                self._disconnected_at = time.monotonic()
            listeners = list(self._listeners)
        if self._closed:
            return
        if state == KazooState.CONNECTED and prev != KazooState.CONNECTED:
            self._zk.handler.spawn(self._rearm_all)
        loop = self._loop
        for li in listeners:
            if state == KazooState.LOST and prev != KazooState.LOST and li.on_session_lost:
                _post(loop, li.on_session_lost)
            elif state == KazooState.SUSPENDED and li.on_suspended:
                _post(loop, li.on_suspended)
            elif state == KazooState.CONNECTED and prev != KazooState.CONNECTED and li.on_reconnected:
                _post(loop, li.on_reconnected, new_session)

    async def close(self) -> None:
        """End the session (our ephemeral nodes vanish at once) and stop kazoo's thread."""
        if self._closed:
            return
        self._closed = True
        for w in list(self._watches):
            w.cancel()
        await self._loop.run_in_executor(None, _stop_quietly, self._zk)
        self._submitter.stop()  # (what is queued after kazoo stopped fails at once: closed client)


class _Handler(SequentialThreadingHandler):
    """kazoo's threading handler, with a cheaper `select` for its connection thread.

    kazoo's own builds a new epoll selector (epoll_create, register, close) at every turn of
    its connection loop, and a turn handles one request and one response: a burst of 10,000
    requests (a new topic's partition states) spent most of its time there. Its two sockets
    are low-numbered descriptors, for which select(2) is one system call."""

    def select(self, *args: Any, **kwargs: Any) -> Any:
        rlist, wlist, xlist = args[0], args[1], args[2]
        timeout = args[3] if len(args) > 3 else kwargs.get("timeout")
        try:
            if all(_fd(f) < 1024 for f in (*rlist, *wlist, *xlist)):
                return select.select(rlist, wlist, xlist, timeout)
        except (TypeError, ValueError):
            pass
        return super().select(*args, **kwargs)


def _fd(f: Any) -> int:
    return f if isinstance(f, int) else int(f.fileno())


def _ancestors(path: str) -> list[str]:
    """`/a/b/c` -> [`/a`, `/a/b`] (root first; the root itself is never created)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _record_negotiated_timeout(zk: KazooClient) -> None:
    """Keep the session timeout each connection negotiates on kazoo's connection object.

    kazoo uses it (its read timeout is two thirds of it) but does not keep it; a broker needs
    it to know when its session may have expired. Wraps kazoo's `_connect`, which returns
    (read timeout, connect timeout); if kazoo changes, the configured timeout is used."""
    conn = getattr(zk, "_connection", None)
    original = getattr(conn, "_connect", None)
    if conn is None or original is None:
        return

    def connect(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            conn._samsa_negotiated_ms = float(result[0]) * 1.5  # read timeout = 2/3 of the session
        except (TypeError, ValueError, IndexError):
            pass
        return result

    conn._connect = connect


def _stop_quietly(zk: KazooClient) -> None:
    with contextlib.suppress(Exception):
        zk.stop()
    with contextlib.suppress(Exception):
        zk.close()
