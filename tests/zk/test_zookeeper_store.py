"""What only the ZooKeeper backend does: sessions, ephemerals across clients, watches, chroot."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from kazoo.client import KazooClient

from samsa.metadata.store import NoNode, StoreError
from samsa.metadata.zookeeper import ConnectionLost, SessionLost, ZooKeeperStore, parse_connect
from tests.zk.conftest import ZooKeeperServer, free_port


def wait_for(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


@pytest.fixture
def stores(zk_server: ZooKeeperServer, chroot: str) -> Any:
    made: list[ZooKeeperStore] = []

    def make(**kw: Any) -> ZooKeeperStore:
        s = ZooKeeperStore(zk_server.connect_string(chroot), **{"session_timeout_ms": 6000, **kw})
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


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
    try:
        assert root.exists(f"/{chroot}/deep") is None
        s = ZooKeeperStore(zk_server.connect_string(f"{chroot}/deep"))
        try:
            assert root.exists(f"/{chroot}/deep") is not None
            s.create("/cluster/id", b"abc")
            assert root.get(f"/{chroot}/deep/cluster/id")[0] == b"abc"
            assert s.children("/") == ["cluster"]
        finally:
            s.close()
    finally:
        root.stop()
        root.close()


def test_ephemeral_vanishes_when_session_closes(stores: Any) -> None:
    broker, observer = stores(), stores()
    broker.create("/brokers/ids/1", b"{}", ephemeral=True)
    broker.create("/brokers/topics/t", b"{}")
    assert observer.children("/brokers/ids") == ["1"]
    broker.close()
    assert observer.get("/brokers/ids/1") is None
    assert observer.get("/brokers/topics/t") == (b"{}", 0)
    with pytest.raises(SessionLost):
        broker.get("/brokers/topics/t")


def test_children_watch_fires_on_change(stores: Any) -> None:
    controller, broker = stores(), stores()
    seen: list[list[str]] = []
    changed = threading.Event()

    def on_children(kids: list[str]) -> None:
        seen.append(kids)
        changed.set()

    w = controller.watch_children("/brokers/ids", on_children)
    assert seen == [[]]  # called at once with the current children
    changed.clear()
    broker.create("/brokers/ids/7", b"{}", ephemeral=True)
    assert changed.wait(5)
    assert seen[-1] == ["7"]
    changed.clear()
    broker.close()  # registration expires with the session
    assert changed.wait(5)
    assert seen[-1] == []
    w.cancel()
    n = len(seen)
    controller.create("/brokers/ids/8", b"{}")
    time.sleep(0.3)
    assert len(seen) == n  # a cancelled watch calls nothing more


def test_data_watch_on_asyncio_loop(stores: Any) -> None:
    watcher, writer = stores(), stores()

    async def main() -> list[tuple[bytes | None, int | None, bool]]:
        loop = asyncio.get_running_loop()
        q: asyncio.Queue[tuple[bytes | None, int | None, bool]] = asyncio.Queue()
        loop_thread = threading.get_ident()

        def cb(data: bytes | None, version: int | None) -> None:
            q.put_nowait((data, version, threading.get_ident() == loop_thread))

        watcher.watch_data("/controller", cb, loop=loop)
        got = [await asyncio.wait_for(q.get(), 5)]
        await loop.run_in_executor(None, lambda: writer.create("/controller", b'{"brokerid":1}', ephemeral=True))
        got.append(await asyncio.wait_for(q.get(), 5))
        await loop.run_in_executor(None, lambda: writer.set("/controller", b'{"brokerid":2}', 0))
        got.append(await asyncio.wait_for(q.get(), 5))
        await loop.run_in_executor(None, lambda: writer.delete("/controller"))
        got.append(await asyncio.wait_for(q.get(), 5))
        return got

    got = asyncio.run(main())
    assert got == [
        (None, None, True),
        (b'{"brokerid":1}', 0, True),
        (b'{"brokerid":2}', 1, True),
        (None, None, True),
    ]


def test_session_expiry_is_reported_and_ephemerals_go(zk_server: ZooKeeperServer, stores: Any) -> None:
    broker, observer = stores(session_timeout_ms=2000), stores()
    events: list[str] = []
    broker.add_session_listener(
        on_session_lost=lambda: events.append("lost"),
        on_reconnected=lambda new: events.append(f"reconnected new_session={new}"),
        on_suspended=lambda: events.append("suspended"),
    )
    broker.create("/controller", b"1", ephemeral=True)
    # Expire the session the classic way: a second client takes it over with its id and password.
    thief = KazooClient(hosts=zk_server.hosts, client_id=broker._zk.client_id)
    thief.start(timeout=10)
    thief.stop()
    thief.close()
    wait_for(lambda: "lost" in events)
    assert observer.get("/controller") is None
    wait_for(lambda: events[-1] == "reconnected new_session=True")
    assert broker.connected
    broker.create("/controller", b"1", ephemeral=True)  # re-registers on the new session


def test_connection_timeout() -> None:
    t0 = time.monotonic()
    with pytest.raises(ConnectionLost, match="within 500 ms"):
        ZooKeeperStore(f"127.0.0.1:{free_port()}", connection_timeout_ms=500)
    assert time.monotonic() - t0 < 5


def test_errors_map_to_store_exceptions(stores: Any) -> None:
    s = stores()
    with pytest.raises(NoNode):
        s.set("/x", b"", 3)
    s.create("/e", b"", ephemeral=True)
    with pytest.raises(StoreError):
        s.create("/e/child", b"")  # ephemerals cannot have children
