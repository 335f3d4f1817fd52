"""What only the ZooKeeper engine does: sessions, ephemerals across clients, watches that
survive a new session, chroot, connection errors."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from samsa.metadata.store import ConnectionLost, NoNode, SessionLost, StoreError
from samsa.metadata.zookeeper import ZooKeeperStore, parse_connect
from tests.zk.conftest import ZooKeeperServer, free_port, start_server


async def until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def run(zk_server: ZooKeeperServer, chroot: str, body: Callable[..., Awaitable[None]]) -> None:
    """Run `body(make)` on a fresh loop; `make(**kw)` opens a store in the test's chroot."""

    async def main() -> None:
        made: list[ZooKeeperStore] = []

        async def make(**kw: Any) -> ZooKeeperStore:
            s = await ZooKeeperStore.connect(zk_server.connect_string(chroot), **{"session_timeout_ms": 6000, **kw})
            made.append(s)
            return s

        try:
            await body(make)
        finally:
            for s in made:
                await s.close()

    asyncio.run(main())


def expire(zk_server: ZooKeeperServer, store: ZooKeeperStore) -> None:
    """Expire a session the classic way: a second client takes it over with its id and password."""
    thief = KazooClient(hosts=zk_server.hosts, client_id=store._zk.client_id)
    thief.start(timeout=10)
    thief.stop()
    thief.close()


def test_parse_connect() -> None:
    assert parse_connect("h1:2181,h2:2181/kafka") == ("h1:2181,h2:2181", "/kafka")
    assert parse_connect("h1:2181/a/b/") == ("h1:2181", "/a/b")
    assert parse_connect("h1:2181") == ("h1:2181", "")
    assert parse_connect("h1:2181/") == ("h1:2181", "")
    with pytest.raises(StoreError):
        parse_connect("/chroot")


def test_chroot_is_created_and_contains_everything(zk_server: ZooKeeperServer, chroot: str) -> None:
    root = KazooClient(hosts=zk_server.hosts)
    root.start(timeout=10)

    async def body(make: Any) -> None:
        assert root.exists(f"/{chroot}") is None
        s = await make()
        assert root.exists(f"/{chroot}") is not None
        await s.create("/cluster/id", b"abc")
        assert root.get(f"/{chroot}/cluster/id")[0] == b"abc"
        assert await s.children("/") == ["cluster"]

    try:
        run(zk_server, chroot, body)
    finally:
        root.stop()
        root.close()


def test_ephemeral_vanishes_when_session_closes(zk_server: ZooKeeperServer, chroot: str) -> None:
    async def body(make: Any) -> None:
        broker, observer = await make(), await make()
        await broker.create("/brokers/ids/1", b"{}", ephemeral=True)
        await broker.create("/brokers/topics/t", b"{}")
        assert await observer.children("/brokers/ids") == ["1"]
        assert await observer.owner("/brokers/ids/1") == broker.session_id != observer.session_id
        await broker.close()
        assert await observer.get("/brokers/ids/1") is None
        assert await observer.get("/brokers/topics/t") == (b"{}", 0)
        with pytest.raises(SessionLost):
            await broker.get("/brokers/topics/t")

    run(zk_server, chroot, body)


def test_session_expiry_is_reported_and_watches_follow_the_new_session(zk_server: ZooKeeperServer,
                                                                        chroot: str) -> None:
    async def body(make: Any) -> None:
        broker, observer = await make(session_timeout_ms=2000), await make()
        events: list[str] = []
        broker.add_session_listener(
            on_session_lost=lambda: events.append("lost"),
            on_reconnected=lambda new: events.append(f"reconnected new_session={new}"),
            on_suspended=lambda: events.append("suspended"),
        )
        seen: list[list[str]] = []
        await broker.watch_children("/brokers/ids", seen.append)
        await broker.create("/brokers/ids/1", b"1", ephemeral=True)
        await until(lambda: seen[-1] == ["1"])
        old_session = broker.session_id
        expire(zk_server, broker)
        await until(lambda: "lost" in events)
        assert await observer.get("/brokers/ids/1") is None
        await until(lambda: events[-1] == "reconnected new_session=True")
        assert broker.connected and broker.session_id != old_session
        await until(lambda: seen[-1] == [])  # the watch was re-armed on the new session
        await observer.create("/brokers/ids/2", b"2", ephemeral=True)
        await until(lambda: seen[-1] == ["2"])
        await broker.create("/brokers/ids/1", b"1", ephemeral=True)  # registers again on the new session
        await until(lambda: seen[-1] == ["1", "2"])
        assert await broker.owner("/brokers/ids/1") == broker.session_id

    run(zk_server, chroot, body)


def test_connection_timeout() -> None:
    async def body() -> None:
        t0 = time.monotonic()
        with pytest.raises(ConnectionLost, match="within 500 ms"):
            await ZooKeeperStore.connect(f"127.0.0.1:{free_port()}", connection_timeout_ms=500)
        assert time.monotonic() - t0 < 5

    asyncio.run(body())


def test_errors_map_to_store_exceptions(zk_server: ZooKeeperServer, chroot: str) -> None:
    async def body(make: Any) -> None:
        s = await make()
        with pytest.raises(NoNode):
            await s.set("/x", b"", 3)

    run(zk_server, chroot, body)


def test_calls_never_block_the_loop_while_zookeeper_is_away(tmp_path: Any, chroot: str) -> None:
    """With ZooKeeper stopped (SIGSTOP), a call fails or waits without stalling the loop:
    a ticker on the same loop keeps ticking every 10 ms."""
    (tmp_path / "zk").mkdir()
    server = start_server(tmp_path / "zk")

    async def main() -> None:
        s = await ZooKeeperStore.connect(server.connect_string(chroot), session_timeout_ms=3000)
        stalls: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not stop.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                stalls.append(now - last)
                last = now

        t = asyncio.get_running_loop().create_task(ticker())
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises((ConnectionLost, SessionLost)):
                await s.get_many([f"/x/{i}" for i in range(100)])
            await until(lambda: not s.connected, 10)
            assert s.disconnected_for() > 0
            with pytest.raises(ConnectionLost):
                await s.create("/y", b"")  # fails at once while disconnected
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        await until(lambda: s.connected, 15)
        assert s.disconnected_for() == 0
        stop.set()
        await t
        await s.close()
        # Blocked, the loop would stall for the whole outage (seconds); 1 s leaves room for a
        # loaded machine's scheduling (0.16 s seen with the full suite running beside it).
        assert max(stalls) < 1.0, f"the loop stalled for {max(stalls):.3f} s"

    try:
        asyncio.run(main())
    finally:
        server.stop()


def test_a_batch_bigger_than_kazoos_wakeup_pipe_never_freezes_the_loop(tmp_path: Any, chroot: str) -> None:
    """kazoo wakes its connection thread with one byte per request through a socket pair that
    holds about 280 bytes, and reads one back per request it sends: a caller queueing more
    requests than that waits for the connection thread, indefinitely while ZooKeeper does not
    read. The store's submitter thread takes that wait: with ZooKeeper paused under a batch of
    20,000 creates of 1 KiB (more than every socket buffer between them holds), the loop goes
    on running, and once ZooKeeper is back the batch completes and the store serves."""
    (tmp_path / "zk").mkdir()
    server = start_server(tmp_path / "zk")
    pause_s = 8.0  # (long enough that a loaded machine still ticks in it; a frozen loop never does)

    async def main() -> None:
        s = await ZooKeeperStore.connect(server.connect_string(chroot), session_timeout_ms=10000)
        ticks: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            while not stop.is_set():
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        t = asyncio.get_running_loop().create_task(ticker())
        os.kill(server.proc.pid, signal.SIGSTOP)
        paused = time.monotonic()
        # SIGCONT from a thread: a frozen loop could not run a timer of its own
        resume = threading.Timer(pause_s, os.kill, (server.proc.pid, signal.SIGCONT))
        resume.start()
        try:
            batch = asyncio.ensure_future(s.create_many([(f"/big/n{i}", b"v" * 1024) for i in range(20000)]))
            while not batch.done() and time.monotonic() < paused + pause_s + 60:
                await asyncio.sleep(0.05)
            results = await batch
        finally:
            resume.join()
        stop.set()
        await t
        during = [x for x in ticks if paused + 0.5 <= x <= paused + pause_s - 0.5]
        assert during, "the loop did not run while ZooKeeper was paused under the batch"
        # Requests in flight when kazoo gave up on the stalled connection failed; the rest landed.
        assert all(r is None or isinstance(r, ConnectionLost) for r in results), {type(r) for r in results}
        assert sum(r is None for r in results) > 0
        await until(lambda: s.connected, 30)
        assert await s.get("/big") is not None
        await s.close()

    try:
        asyncio.run(main())
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
