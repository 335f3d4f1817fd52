"""The metadata-store contract, run against both engines: EmbeddedStore and a real ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.metadata.store import BadVersion, EmbeddedStore, Fenced, MetadataStore, NodeExists, NoNode, StoreError
from samsa.metadata.zookeeper import ZooKeeperStore
from tests.zk.conftest import ZooKeeperServer


@pytest.fixture(params=["embedded", "zookeeper"])
def store(request: pytest.FixtureRequest, tmp_path: Path, chroot: str) -> Iterator[MetadataStore]:
    s: MetadataStore
    if request.param == "embedded":
        s = EmbeddedStore(tmp_path / "samsa-metadata.db")
    else:
        server: ZooKeeperServer = request.getfixturevalue("zk_server")
        s = ZooKeeperStore(server.connect_string(chroot), session_timeout_ms=6000)
    yield s
    s.close()


def test_create_with_parents_and_get(store: MetadataStore) -> None:
    store.create("/brokers/topics/t/partitions/0/state", b'{"leader":0}')
    assert store.get("/brokers/topics/t/partitions/0/state") == (b'{"leader":0}', 0)
    assert store.get("/brokers/topics/t") is not None
    assert store.get("/nope") is None


def test_create_without_parents_fails(store: MetadataStore) -> None:
    with pytest.raises(NoNode):
        store.create("/a/b/c", b"x", make_parents=False)
    store.create("/a", b"")
    store.create("/a/b", b"x", make_parents=False)
    assert store.get("/a/b") == (b"x", 0)


def test_node_exists(store: MetadataStore) -> None:
    store.create("/controller", b"1")
    with pytest.raises(NodeExists):
        store.create("/controller", b"2")
    assert store.get("/controller") == (b"1", 0)


def test_versioned_set_is_compare_and_set(store: MetadataStore) -> None:
    store.create("/state", b"v0")
    assert store.set("/state", b"v1", 0) == 1
    with pytest.raises(BadVersion):
        store.set("/state", b"stale", 0)
    assert store.get("/state") == (b"v1", 1)
    assert store.set("/state", b"v2") == 2  # -1: any version
    with pytest.raises(NoNode):
        store.set("/missing", b"x", 0)


def test_children(store: MetadataStore) -> None:
    for b in ("2", "0", "10"):
        store.create(f"/brokers/ids/{b}", b"{}")
    store.create("/brokers/ids/0/deeper", b"")
    assert store.children("/brokers/ids") == ["0", "10", "2"]
    assert store.children("/brokers") == ["ids"]
    assert store.children("/absent") == []


def test_delete(store: MetadataStore) -> None:
    store.create("/t/p/0", b"")
    store.create("/t/p/1", b"")
    with pytest.raises(StoreError):
        store.delete("/t/p")  # has children
    store.delete("/t/p/0")
    assert store.children("/t/p") == ["1"]
    store.delete("/t", recursive=True)
    assert store.get("/t") is None and store.get("/t/p/1") is None
    with pytest.raises(NoNode):
        store.delete("/t")
    with pytest.raises(NoNode):
        store.delete("/t", recursive=True)


def test_ephemeral_node(store: MetadataStore) -> None:
    store.create("/brokers/ids/1", b"{}", ephemeral=True)
    assert store.get("/brokers/ids/1") == (b"{}", 0)
    assert store.children("/brokers/ids") == ["1"]


def test_batches_and_guarded_writes(store: MetadataStore) -> None:
    """create_many/set_many/get_many, and a guard node whose version fences stale writers
    (the controller's /controller_epoch)."""
    assert store.create_many([("/b/x", b"1"), ("/b/y", b"2")]) == [None, None]
    assert isinstance(store.create_many([("/b/x", b"again")])[0], NodeExists)
    assert store.get_many(["/b/x", "/b/y", "/b/missing"]) == [(b"1", 0), (b"2", 0), None]
    assert store.set_many([("/b/x", b"3", 0), ("/b/y", b"4", 7)])[0] == 1
    assert isinstance(store.set_many([("/b/y", b"4", 7)])[0], BadVersion)

    store.create("/epoch", b"1")
    assert store.set_many([("/b/x", b"5", 1)], guard=("/epoch", 0)) == [2]
    assert store.create_many([("/b/z", b"z"), ("/c/deep/z", b"z")], guard=("/epoch", 0)) == [None, None]
    assert store.get("/c/deep/z") == (b"z", 0)  # missing parents are made, as unguarded creates do
    store.set("/epoch", b"2", 0)  # a newer controller
    assert isinstance(store.set_many([("/b/x", b"6", 2)], guard=("/epoch", 0))[0], Fenced)
    assert isinstance(store.create_many([("/b/w", b"w")], guard=("/epoch", 0))[0], Fenced)
    assert store.get("/b/x") == (b"5", 2) and store.get("/b/w") is None  # nothing written
