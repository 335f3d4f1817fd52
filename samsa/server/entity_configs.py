"""Users' and client-ids' configs (quotas, SCRAM credentials), kept where Kafka keeps them and
followed the way Kafka's brokers follow them.

    /config/users/<user>                    {"version":1,"config":{"producer_byte_rate":"1024",
    /config/users/<user>/clients/<client>                          "SCRAM-SHA-256":"salt=...,..."}}
    /config/clients/<client>
    /config/changes/config_change_<seq>     {"version":2,"entity_path":"users/alice"}

Names are URL-encoded (zkdata.sanitize), `<default>` is a default entity. A writer changes the
entity's node, then adds a sequential change notification naming it: every broker (this one
included) reloads that entity when it sees the notification. This is Kafka's
ZkConfigManager and ZkNodeChangeNotificationListener, so Kafka's own `kafka-configs
--zookeeper` and Samsa's tools and APIs change the same data in the same way.

`ChangeNotifications` is the listener (also used for ACL changes): it runs each new
notification once, in sequence order, on one task, and deletes notifications it first saw more
than 15 minutes ago, as Kafka's listener purges them. `EntityConfigs` is the cache: a full load
at start-up, then one entity reloaded per notification; listeners (the SCRAM credential cache,
the quota manager) hear of every change.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.controller.event_queue import EventQueue
from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, MetadataStore, NodeExists, NoNode, StoreError, Watch

log = logging.getLogger("samsa.configs")

NOTIFICATION_EXPIRY_S = 15 * 60.0  # Kafka's changeExpirationMs

EntityListener = Callable[[str, dict[str, str]], None]


class ChangeNotifications:
    """Kafka's ZkNodeChangeNotificationListener: `handler(data)` for each child of `root` named
    `prefix<seq>`, in order, each once (see the module doc)."""

    def __init__(self, store: MetadataStore, root: str, prefix: str,
                 handler: Callable[[bytes], Awaitable[None] | None], *, name: str,
                 expire_s: float = NOTIFICATION_EXPIRY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.root = root
        self.prefix = prefix
        self.handler = handler
        self.expire_s = expire_s
        self._clock = clock
        self._last = -1
        self._first_seen: dict[str, float] = {}
        self.events = EventQueue(name, log)
        self._watch: Watch | None = None

    async def start(self) -> None:
        self.events.start()
        self._watch = await self.store.watch_children(self.root, lambda kids: self.events.put(self._process, kids))

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        await self.events.stop()

    async def drained(self) -> None:
        await self.events.drained()

    def _seq(self, name: str) -> int | None:
        tail = name[len(self.prefix):]
        return int(tail) if name.startswith(self.prefix) and tail.isdigit() else None

    async def _process(self, kids: list[str]) -> None:
        now = self._clock()
        numbered = sorted((n, k) for k in kids if (n := self._seq(k)) is not None)
        for n, k in numbered:
            self._first_seen.setdefault(k, now)
            if n <= self._last:
                continue
            node = await self.store.get(f"{self.root}/{k}")
            self._last = n
            if node is None:
                continue  # purged meanwhile (by another broker)
            try:
                done = self.handler(node[0])
                if done is not None:
                    await done
            except StoreError:
                raise
            except Exception as e:  # noqa: BLE001 - one bad notification must not stop the others
                log.warning("Ignoring change notification %s/%s: %s", self.root, k, e)
        present = set(kids)
        for k in [k for k in self._first_seen if k not in present]:
            del self._first_seen[k]
        for k, seen in list(self._first_seen.items()):
            if now - seen > self.expire_s:
                try:
                    await self.store.delete(f"{self.root}/{k}")
                except NoNode:
                    pass
                self._first_seen.pop(k, None)


def _node_path(entity: str) -> str:
    return f"/config/{entity}"


def parse_entity(entity: str) -> tuple[str | None, str | None]:
    """"users/alice/clients/app" -> ("alice", "app") (raw names, `<default>` kept)."""
    parts = entity.split("/")

    def raw(n: str) -> str:
        return n if n == zkdata.DEFAULT_ENTITY else zkdata.desanitize(n)

    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return raw(parts[1]), raw(parts[3])
    if len(parts) == 2 and parts[0] == "users":
        return raw(parts[1]), None
    if len(parts) == 2 and parts[0] == "clients":
        return None, raw(parts[1])
    raise ValueError(f"not a user or client-id entity path: {entity!r}")


async def read_entity_config(store: MetadataStore, entity: str) -> dict[str, str]:
    node = await store.get(_node_path(entity))
    return zkdata.decode_config(node[0]) if node is not None and node[0] else {}


async def alter_entity_config(store: MetadataStore, entity: str,
                              change: Callable[[dict[str, str]], dict[str, str] | None]) -> dict[str, str] | None:
    """Apply `change` (current config -> new config, None for no change) to an entity's node by
    compare-and-set, then notify every broker. Returns the config written (None: unchanged)."""
    path = _node_path(entity)
    for _ in range(20):
        node = await store.get(path)
        current = zkdata.decode_config(node[0]) if node is not None and node[0] else {}
        new = change(dict(current))
        if new is None:
            return None
        try:
            if node is None:
                await store.create(path, zkdata.encode_config(new))
            else:
                await store.set(path, zkdata.encode_config(new), node[1])
        except (BadVersion, NodeExists, NoNode):
            continue  # changed under us: read it again
        await store.create_sequential(f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
                                      zkdata.config_change(entity))
        return new
    raise StoreError(f"{path} kept changing under 20 attempts to change it")


class EntityConfigs:
    """This broker's copy of every user and client-id config (see the module doc)."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.configs: dict[str, dict[str, str]] = {}  # entity path -> config
        self._listeners: list[EntityListener] = []
        self.notifications = ChangeNotifications(store, zkdata.CONFIG_CHANGES, zkdata.CONFIG_CHANGE_PREFIX,
                                                 self._on_notification, name="config changes")

    def add_listener(self, fn: EntityListener) -> None:
        """`fn(entity_path, config)` for every entity at start-up and on every change ({} when
        the entity's node is gone)."""
        self._listeners.append(fn)

    def get(self, entity: str) -> dict[str, str]:
        return self.configs.get(entity, {})

    # -- the store's data, for the admin APIs (read-your-writes: not this broker's copy) -------

    async def read(self, entity: str) -> dict[str, str]:
        return await read_entity_config(self.store, entity)

    async def read_users(self) -> dict[str, dict[str, str]]:
        """Every user's own config as the store has it, by (raw) user name; not the default user's."""
        names = [n for n in await self.store.children(zkdata.USER_CONFIGS) if n != zkdata.DEFAULT_ENTITY]
        nodes = await self.store.get_many([_node_path(f"users/{n}") for n in names])
        return {zkdata.desanitize(n): (zkdata.decode_config(node[0]) if node is not None and node[0] else {})
                for n, node in zip(names, nodes)}

    async def start(self) -> None:
        for entity, config in (await self.read_all()).items():
            self._apply(entity, config)
        await self.notifications.start()

    async def read_all(self) -> dict[str, dict[str, str]]:
        """Every user's, user+client-id's and client-id's config as the store has it now (what
        DescribeClientQuotas reads: this broker's copy may lag a change made elsewhere)."""
        entities: list[str] = []
        for user in await self.store.children(zkdata.USER_CONFIGS):
            entities.append(f"users/{user}")
            for client in await self.store.children(f"{zkdata.USER_CONFIGS}/{user}/clients"):
                entities.append(f"users/{user}/clients/{client}")
        for client in await self.store.children(zkdata.CLIENT_CONFIGS):
            entities.append(f"clients/{client}")
        nodes = await self.store.get_many([_node_path(e) for e in entities])
        return {entity: zkdata.decode_config(node[0]) if node is not None and node[0] else {}
                for entity, node in zip(entities, nodes)}

    async def alter(self, entity: str,
                    change: Callable[[dict[str, str]], dict[str, str] | None]) -> dict[str, str] | None:
        """`alter_entity_config` on this broker's store."""
        return await alter_entity_config(self.store, entity, change)

    async def stop(self) -> None:
        await self.notifications.stop()

    async def _on_notification(self, data: bytes) -> None:
        doc: Any = zkdata.loads(data)
        version = doc.get("version")
        if version == 2:
            entity = str(doc["entity_path"])
        elif version == 1 and doc.get("entity_type") in ("clients", "topics"):
            if doc["entity_type"] == "topics":
                return  # (topic configs are followed by their own watches)
            entity = f"clients/{doc['entity_name']}"
        else:
            raise ValueError(f"unsupported config change notification {data[:200]!r}")
        root = entity.split("/", 1)[0]
        if root not in ("users", "clients"):
            return  # topics, brokers: followed by watches of their own
        parse_entity(entity)  # (a malformed path is refused here)
        self._apply(entity, await read_entity_config(self.store, entity))

    def _apply(self, entity: str, config: dict[str, str]) -> None:
        if config:
            self.configs[entity] = config
        else:
            self.configs.pop(entity, None)
        shown = {k: ("[hidden]" if k.startswith("SCRAM-") else v) for k, v in config.items()}
        log.debug("Config of %s: %s", entity, shown)
        for fn in self._listeners:
            try:
                fn(entity, config)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the others
                log.exception("A listener of %s's config failed", entity)
