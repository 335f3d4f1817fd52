"""Users' and client-ids' configs in Kafka's layout, followed through /config/changes, on both
store engines (a real ZooKeeper and the embedded store)."""

from __future__ import annotations

import asyncio

from samsa.metadata import zkdata
from samsa.metadata.store import MetadataStore
from samsa.server.entity_configs import ChangeNotifications, EntityConfigs, alter_entity_config, parse_entity
from tests.zk.test_store import contract, open_store  # noqa: F401 - the fixture


async def _until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@contract
async def test_a_change_is_written_in_kafkas_layout_and_followed(store: MetadataStore) -> None:
    # One entity there before the cache starts: loaded at start-up.
    await alter_entity_config(store, "users/<default>", lambda c: {**c, "consumer_byte_rate": "2048"})
    cache = EntityConfigs(store)
    heard: list[tuple[str, dict[str, str]]] = []
    cache.add_listener(lambda e, c: heard.append((e, c)))
    await cache.start()
    try:
        assert cache.get("users/<default>") == {"consumer_byte_rate": "2048"}
        user = zkdata.entity_path("User:CN=a b", "app 1")
        assert user == "users/User%3ACN%3Da%20b/clients/app%201"
        await alter_entity_config(store, user, lambda c: {**c, "producer_byte_rate": "1024"})
        await _until(lambda: cache.get(user) == {"producer_byte_rate": "1024"})
        assert parse_entity(user) == ("User:CN=a b", "app 1")
        node = await store.get(f"/config/{user}")
        assert node is not None and node[0] == b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
        kids = await store.children("/config/changes")
        assert kids and all(k.startswith("config_change_") for k in kids)
        last = await store.get(f"/config/changes/{kids[-1]}")
        assert last is not None and last[0] == b'{"version":2,"entity_path":"%s"}' % user.encode()
        # Removing every key leaves an empty config: the cache forgets the entity.
        await alter_entity_config(store, user, lambda c: {})
        await _until(lambda: cache.get(user) == {})
        assert heard[-1] == (user, {})
        # An unchanged config writes nothing and notifies nobody.
        before = await store.children("/config/changes")
        assert await alter_entity_config(store, user, lambda c: None) is None
        assert await store.children("/config/changes") == before
    finally:
        await cache.stop()


@contract
async def test_notifications_run_once_in_order_and_old_ones_are_purged(store: MetadataStore) -> None:
    now = [0.0]
    seen: list[bytes] = []
    listener = ChangeNotifications(store, "/acl-changes", "acl_changes_", seen.append, name="t",
                                   expire_s=60, clock=lambda: now[0])
    first = await store.create_sequential("/acl-changes/acl_changes_", b"1")
    await listener.start()
    try:
        await _until(lambda: seen == [b"1"])
        now[0] = 30.0
        await store.create_sequential("/acl-changes/acl_changes_", b"2")
        await _until(lambda: seen == [b"1", b"2"])
        now[0] = 61.0  # the first is past its expiry at the next notification
        await store.create_sequential("/acl-changes/acl_changes_", b"3")
        await _until(lambda: seen == [b"1", b"2", b"3"])
        await listener.drained()
        assert await store.get(first) is None
        assert len(await store.children("/acl-changes")) == 2
    finally:
        await listener.stop()
