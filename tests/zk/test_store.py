"""The metadata-store contract, run against both engines: EmbeddedStore and a real ZooKeeper.

Every call is a coroutine; each test runs on a fresh event loop with a fresh store."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.metadata.embedded import EmbeddedStore
from samsa.metadata.store import BadVersion, Fenced, MetadataStore, NodeExists, NoNode, StoreError
from samsa.metadata.zookeeper import ZooKeeperStore
from tests.zk.conftest import ZooKeeperServer

Opener = Callable[[], Awaitable[MetadataStore]]


@pytest.fixture(params=["embedded", "zookeeper"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path, chroot: str) -> Opener:
    if request.param == "embedded":
        async def embedded() -> MetadataStore:
            return await EmbeddedStore.open(tmp_path / "samsa-metadata.db")
        return embedded
    server: ZooKeeperServer = request.getfixturevalue("zk_server")

    async def zookeeper() -> MetadataStore:
        return await ZooKeeperStore.connect(server.connect_string(chroot), session_timeout_ms=6000)
    return zookeeper


def contract(body: Callable[[Any], Awaitable[None]]) -> Callable[[Opener], None]:
    """Turn `async def test_x(store)` into a test run on both engines."""

    def test(open_store: Opener) -> None:
        async def main() -> None:
            store = await open_store()
            try:
                await body(store)
            finally:
                await store.close()

        asyncio.run(main())

    test.__name__ = body.__name__
    test.__doc__ = body.__doc__
    return test


@contract
async def test_create_with_parents_and_get(store: MetadataStore) -> None:
    await store.create("/brokers/topics/t/partitions/0/state", b'{"leader":0}')
    assert await store.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":0}', 0)
    assert await store.get("/brokers/topics/t") is not None
    assert await store.get("/nope") is None


@contract
async def test_create_without_parents_fails(store: MetadataStore) -> None:
    with pytest.raises(NoNode):
        await store.create("/a/b/c", b"x", make_parents=False)
    await store.create("/a", b"")
    await store.create("/a/b", b"x", make_parents=False)
    assert await store.get("/a/b") == (b"x", 0)


@contract
async def test_node_exists(store: MetadataStore) -> None:
    await store.create("/controller", b"1")
    with pytest.raises(NodeExists):
        await store.create("/controller", b"2")
    assert await store.get("/controller") == (b"1", 0)


@contract
async def test_versioned_set_is_compare_and_set(store: MetadataStore) -> None:
    await store.create("/state", b"v0")
    assert await store.set("/state", b"v1", 0) == 1
    with pytest.raises(BadVersion):
        await store.set("/state", b"stale", 0)
    assert await store.get("/state") == (b"v1", 1)
    assert await store.set("/state", b"v2") == 2  # -1: any version
    with pytest.raises(NoNode):
        await store.set("/missing", b"x", 0)


@contract
async def test_children(store: MetadataStore) -> None:
    for b in ("2", "0", "10"):
        await store.create(f"/brokers/ids/{b}", b"{}")
    await store.create("/brokers/ids/0/deeper", b"")
    assert await store.children("/brokers/ids") == ["0", "10", "2"]
    assert await store.children("/brokers") == ["ids"]
    assert await store.children("/absent") == []


@contract
async def test_sequential_nodes_count_up_past_deleted_ones(store: MetadataStore) -> None:
    first = await store.create_sequential("/config/changes/config_change_", b"a")
    assert first.startswith("/config/changes/config_change_") and len(first) == len("/config/changes/config_change_") + 10
    second = await store.create_sequential("/config/changes/config_change_", b"b")
    assert int(second[-10:]) > int(first[-10:])
    await store.delete(second)
    third = await store.create_sequential("/config/changes/config_change_", b"c")
    assert int(third[-10:]) > int(second[-10:])  # never a number used before
    assert await store.get(third) == (b"c", 0)
    assert await store.children("/config/changes") == sorted(p.rsplit("/", 1)[1] for p in (first, third))


@contract
async def test_delete(store: MetadataStore) -> None:
    await store.create("/t/p/0", b"")
    await store.create("/t/p/1", b"")
    with pytest.raises(StoreError):
        await store.delete("/t/p")  # has children
    await store.delete("/t/p/0")
    assert await store.children("/t/p") == ["1"]
    await store.delete("/t", recursive=True)
    assert await store.get("/t") is None and await store.get("/t/p/1") is None
    with pytest.raises(NoNode):
        await store.delete("/t")
    with pytest.raises(NoNode):
        await store.delete("/t", recursive=True)


@contract
async def test_versioned_delete_is_compare_and_delete(store: MetadataStore) -> None:
    await store.create("/kafka-acl/Topic/t", b"v0")
    await store.set("/kafka-acl/Topic/t", b"v1", 0)
    with pytest.raises(BadVersion):
        await store.delete("/kafka-acl/Topic/t", version=0)
    assert await store.get("/kafka-acl/Topic/t") == (b"v1", 1)
    await store.delete("/kafka-acl/Topic/t", version=1)
    assert await store.get("/kafka-acl/Topic/t") is None


@contract
async def test_ephemeral_node_and_its_owner(store: MetadataStore) -> None:
    await store.create("/brokers/ids/1", b"{}", ephemeral=True)
    await store.create("/brokers/topics/t", b"{}")
    assert await store.get("/brokers/ids/1") == (b"{}", 0)
    assert await store.children("/brokers/ids") == ["1"]
    assert await store.owner("/brokers/ids/1") == store.session_id != 0
    assert await store.owner("/brokers/topics/t") == 0  # persistent: no owner
    assert await store.owner("/brokers/ids/2") is None
    with pytest.raises(StoreError):
        await store.create("/brokers/ids/1/child", b"")  # ephemerals cannot have children


@contract
async def test_batches_and_guarded_writes(store: MetadataStore) -> None:
    """create_many/set_many/get_many, and a guard node whose version fences stale writers
    (the controller's /controller_epoch)."""
    assert await store.create_many([("/b/x", b"1"), ("/b/y", b"2")]) == [None, None]
    assert isinstance((await store.create_many([("/b/x", b"again")]))[0], NodeExists)
    assert await store.get_many(["/b/x", "/b/y", "/b/missing"]) == [(b"1", 0), (b"2", 0), None]
    assert (await store.set_many([("/b/x", b"3", 0), ("/b/y", b"4", 7)]))[0] == 1
    assert isinstance((await store.set_many([("/b/y", b"4", 7)]))[0], BadVersion)

    await store.create("/epoch", b"1")
    assert await store.set_many([("/b/x", b"5", 1)], guard=("/epoch", 0)) == [2]
    assert await store.create_many([("/b/z", b"z"), ("/c/deep/z", b"z")], guard=("/epoch", 0)) == [None, None]
    assert await store.get("/c/deep/z") == (b"z", 0)  # missing parents are made, as unguarded creates do
    await store.set("/epoch", b"2", 0)  # a newer controller
    assert isinstance((await store.set_many([("/b/x", b"6", 2)], guard=("/epoch", 0)))[0], Fenced)
    assert isinstance((await store.create_many([("/b/w", b"w")], guard=("/epoch", 0)))[0], Fenced)
    assert await store.get("/b/x") == (b"5", 2) and await store.get("/b/w") is None  # nothing written


@contract
async def test_concurrent_writes_each_get_their_answer(store: MetadataStore) -> None:
    """Many writes in flight at once (the embedded engine commits them as one group): each
    compare-and-set sees the one before it, exactly one of two racing writers wins."""
    await store.create("/n", b"0")
    results = await asyncio.gather(*(store.set("/n", str(i + 1).encode(), i) for i in range(50)),
                                   return_exceptions=True)
    assert results == list(range(1, 51))
    racing = await asyncio.gather(store.set("/n", b"a", 50), store.set("/n", b"b", 50), return_exceptions=True)
    assert sorted(type(r).__name__ for r in racing) == ["BadVersion", "int"]
    created = await asyncio.gather(*(store.create(f"/many/{i}", b"") for i in range(200)))
    assert created == [None] * 200
    assert len(await store.children("/many")) == 200


@contract
async def test_watches_deliver_the_latest_state_on_the_loop(store: MetadataStore) -> None:
    """A watch's callback runs on the loop: once at registration with the state then, then
    after changes; a cancelled watch calls nothing more."""
    events: asyncio.Queue[Any] = asyncio.Queue()
    kids_watch = await store.watch_children("/brokers/ids", lambda kids: events.put_nowait(("kids", kids)))
    data_watch = await store.watch_data("/controller", lambda d, v: events.put_nowait(("data", d, v)))

    async def next_event() -> Any:
        return await asyncio.wait_for(events.get(), 10)

    assert [await next_event(), await next_event()] == [("kids", []), ("data", None, None)]
    await store.create("/brokers/ids/7", b"{}", ephemeral=True)
    assert await next_event() == ("kids", ["7"])
    await store.create("/controller", b'{"brokerid":7}', ephemeral=True)
    assert await next_event() == ("data", b'{"brokerid":7}', 0)
    await store.set("/controller", b'{"brokerid":8}', 0)
    assert await next_event() == ("data", b'{"brokerid":8}', 1)
    await store.delete("/controller")
    assert await next_event() == ("data", None, None)
    kids_watch.cancel()
    data_watch.cancel()
    await store.create("/brokers/ids/8", b"{}")
    await store.create("/controller", b"x")
    await store.get("/controller")  # a round trip: a stray delivery would be queued by now
    await asyncio.sleep(0.2)
    assert events.empty()


@contract
async def test_large_guarded_batches_report_each_write(store: MetadataStore) -> None:
    """A guarded batch larger than one ZooKeeper multi, with missing parents and a few writes
    that must fail: each write gets its own outcome, none is lost or applied twice."""
    await store.create("/epoch", b"1")
    await store.create("/t/partitions/7/state", b"already")
    n = 1234
    items = [(f"/t/partitions/{p}/state", b"s%d" % p) for p in range(n)]
    results = await store.create_many(items, guard=("/epoch", 0))
    assert isinstance(results[7], NodeExists)
    assert [r for i, r in enumerate(results) if i != 7] == [None] * (n - 1)
    assert len(await store.children("/t/partitions")) == n
    assert await store.get("/t/partitions/1000/state") == (b"s1000", 0)
    assert await store.get("/t/partitions/7/state") == (b"already", 0)

    sets = [(f"/t/partitions/{p}/state", b"v%d" % p, 1 if p in (5, 900) else 0) for p in range(n)]
    out = await store.set_many(sets, guard=("/epoch", 0))
    assert isinstance(out[5], BadVersion) and isinstance(out[900], BadVersion)
    assert [r for i, r in enumerate(out) if i not in (5, 900)] == [1] * (n - 2)
    assert await store.get("/t/partitions/5/state") == (b"s5", 0)
    assert await store.get("/t/partitions/6/state") == (b"v6", 1)


@contract
async def test_a_guarded_batch_of_writes_that_mostly_fail_is_not_slow(store: MetadataStore) -> None:
    """Creates of nodes that already exist (a controller retrying after a failover): every one
    reports NodeExists, in a bounded number of rounds."""
    await store.create("/epoch", b"1")
    n = 600
    items = [(f"/u/{p}/state", b"x") for p in range(n)]
    assert await store.create_many(items, guard=("/epoch", 0)) == [None] * n
    again = await store.create_many(items, guard=("/epoch", 0))
    assert all(isinstance(r, NodeExists) for r in again)
