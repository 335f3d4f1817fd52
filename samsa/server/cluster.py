"""What this broker knows of the cluster: live brokers, topics, partition states, controller.

How it works: the metadata store is the one source of truth and every broker follows it
through watches (ZooKeeper's, or the embedded store's equivalent), as a cache:

    /brokers/ids (children, then each node)   -> live brokers and their endpoints
    /controller (data)                         -> the controller id; when it vanishes, run
    /brokers/topics (children)                 -> topics appear and disappear
    /config/topics/<t> (data)                  -> topic config overrides
    /brokers/topics/<t> (data)                 -> replica assignment (partitions added)
    /brokers/topics/<t>/partitions/<p>/state   -> leader, leader epoch, ISR (role changes)
    /config/brokers/<id>, /<default> (data)    -> dynamic broker configs

Watch callbacks only put an event on the view's queue (`EventQueue`); one task applies them
in order and hands each change to the broker (`ViewListener`), which applies it to its
replicas. Reads the events need (the registrations of new brokers) and new watches are
awaited on that task, never on the callback. A topic's config is watched before its
assignment, so its logs are created with their config. After each change, the requests
waiting for the cluster to reach a state (CreateTopics: the new topics have leaders) are
checked: delayed operations of the purgatory under the key `CLUSTER_METADATA`. `wait_until`
does the same for coroutines (the broker's own start-up and shutdown steps, the controller's),
never for a request.

Why watches and not Kafka's LeaderAndIsr/UpdateMetadata requests: Kafka 4 removed those
ZooKeeper-era RPCs, and with ZooKeeper holding every partition's state under a version, a
broker that reads it directly cannot apply changes out of order (each znode's watch delivers
its latest version) and needs no second channel from the controller. The cost is one
ZooKeeper read per change per broker, which is small next to the data path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.controller.event_queue import EventQueue
from samsa.metadata import zkdata
from samsa.metadata.store import DataCallback, MetadataStore, StoreError
from samsa.server.purgatory import CLUSTER_METADATA, Purgatory

log = logging.getLogger("samsa.cluster")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None

    @classmethod
    def decode(cls, node_id: int, data: bytes) -> BrokerInfo:
        doc = zkdata.loads(data)
        eps: dict[str, tuple[str, int]] = {}
        for ep in doc.get("endpoints", []):
            name, _, hostport = ep.partition("://")
            host, _, port = hostport.rpartition(":")
            eps[name] = (host.strip("[]"), int(port))
        return cls(node_id, eps, doc.get("rack"))


class ViewListener(Protocol):
    """What the broker does with each change the view sees."""

    node_id: int

    async def on_topic_assignment(self, name: str, assignment: zkdata.TopicAssignment) -> None: ...
    def on_topic_config(self, name: str, configs: dict[str, str]) -> None: ...
    def on_topic_deleted(self, name: str) -> None: ...
    def on_partition_state(self, topic: str, index: int, state: zkdata.PartitionState) -> None: ...
    def on_controller_changed(self, controller_id: int) -> None: ...
    def on_broker_configs(self, per_broker: dict[str, str], cluster_default: dict[str, str]) -> None: ...
    def on_registration_missing(self) -> None: ...


class ClusterView:
    def __init__(self, store: MetadataStore, listener: ViewListener, purgatory: Purgatory | None = None) -> None:
        self.store = store
        self.listener = listener
        self.purgatory = purgatory
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.states: dict[tuple[str, int], zkdata.PartitionState] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.shutting_down: set[int] = set()  # brokers in a controlled shutdown
        self.events = EventQueue("cluster view", log)
        self._topic_watches: dict[str, list[Any]] = {}
        self._state_watches: dict[tuple[str, int], Any] = {}
        self._watches: list[Any] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[bool]]] = []
        self._stopped = False
        self._check_scheduled = False
        self._loaded = asyncio.Event()
        self._seen: set[int] = set()  # every broker registered at some point since start-up

    # -- start / stop ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Watch the cluster; the first state of every watched node is queued before this returns."""
        self.events.start()
        store, put = self.store, self.events.put
        self._watches.append(await store.watch_children(zkdata.BROKER_IDS, lambda ids: put(self._on_broker_ids, ids)))
        self._watches.append(await store.watch_data(zkdata.CONTROLLER, lambda d, v: put(self._on_controller, d)))

        def on_broker_config(entity: str) -> DataCallback:
            return lambda d, v: put(self._on_broker_config, entity, d)

        for entity in (str(self.listener.node_id), zkdata.DEFAULT_BROKER):
            self._watches.append(await store.watch_data(zkdata.broker_config_path(entity), on_broker_config(entity)))
        self._watches.append(await store.watch_children(zkdata.CONTROLLED_SHUTDOWN,
                                                        lambda ids: put(self._on_shutting_down, ids)))
        self._watches.append(await store.watch_children(zkdata.TOPICS, lambda names: put(self._on_topics, names)))

    async def stop(self) -> None:
        self._stopped = True
        for w in self._watches:
            w.cancel()
        for ws in self._topic_watches.values():
            for w in ws:
                w.cancel()
        for w in self._state_watches.values():
            if w is not None:
                w.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        self._state_watches.clear()
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()
        await self.events.stop()

    # -- queries ----------------------------------------------------------------------------------

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.brokers)

    def racks(self) -> dict[int, str | None]:
        return {b.node_id: b.rack for b in self.brokers.values()}

    def state(self, topic: str, partition: int) -> zkdata.PartitionState | None:
        return self.states.get((topic, partition))

    def endpoint(self, node_id: int, listener: str) -> tuple[str, int] | None:
        info = self.brokers.get(node_id)
        return None if info is None else info.endpoints.get(listener)

    def mark_loaded(self) -> None:
        """The broker's start-up has loaded every topic and partition state there was."""
        self._loaded.set()

    async def wait_loaded(self, timeout_s: float) -> bool:
        try:
            await asyncio.wait_for(self._loaded.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    def was_seen(self, node_id: int) -> bool:
        return node_id in self._seen

    def topic_ready(self, name: str, partitions: Any) -> bool:
        for p in partitions:
            st = self.states.get((name, p))
            if st is None or st.leader < 0:
                return False
        return True

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """True once `predicate()` holds after some change (checked now first), False at timeout."""
        if predicate():
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            return predicate()
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def changed(self) -> None:
        """Re-check the waiters and the delayed operations waiting on the cluster's metadata
        after any change this view or the broker made: once per turn of the loop, however
        many changes it brought (a CreateTopics of 10,000 partitions would otherwise walk them
        all at each of their 10,000 states)."""
        if (self._waiters or self.purgatory is not None) and not self._check_scheduled:
            self._check_scheduled = True
            asyncio.get_running_loop().call_soon(self._check_waiters)

    def _check_waiters(self) -> None:
        self._check_scheduled = False
        if self.purgatory is not None:
            self.purgatory.check_and_complete(CLUSTER_METADATA)
        for pred, fut in list(self._waiters):
            if not fut.done() and pred():
                fut.set_result(True)

    # -- events, applied on the view's task -------------------------------------------------------

    async def _on_broker_ids(self, ids: list[str]) -> None:
        wanted = sorted(int(i) for i in ids if i.isdigit())
        nodes = await self.store.get_many([zkdata.broker_path(i) for i in wanted])
        old = set(self.brokers)
        fresh = {}
        for i, node in zip(wanted, nodes):
            if node is not None:
                try:
                    fresh[i] = BrokerInfo.decode(i, node[0])
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("ignoring unreadable registration of broker %d: %s", i, e)
        self.brokers = fresh
        self._seen.update(fresh)
        if self.listener.node_id not in fresh and self.listener.node_id in old:
            self.listener.on_registration_missing()
        if set(fresh) != old:
            log.info("Live brokers: %s", ",".join(map(str, sorted(fresh))) or "none")
        self.changed()

    def _on_controller(self, data: bytes | None) -> None:
        try:
            self.controller_id = int(zkdata.loads(data)["brokerid"]) if data else -1
        except (ValueError, KeyError, TypeError):
            self.controller_id = -1
        self.listener.on_controller_changed(self.controller_id)
        self.changed()

    def _on_shutting_down(self, ids: list[str]) -> None:
        self.shutting_down = {int(i) for i in ids if i.isdigit()}
        self.changed()

    def _on_broker_config(self, entity: str, data: bytes | None) -> None:
        self.broker_configs[entity] = zkdata.decode_config(data) if data else {}
        self.listener.on_broker_configs(self.broker_configs.get(str(self.listener.node_id), {}),
                                        self.broker_configs.get(zkdata.DEFAULT_BROKER, {}))

    async def _on_topics(self, names: list[str]) -> None:
        current = set(names)
        for gone in set(self._topic_watches) - current:
            for w in self._topic_watches.pop(gone):
                w.cancel()
            for key in [k for k in self._state_watches if k[0] == gone]:
                w = self._state_watches.pop(key)
                if w is not None:
                    w.cancel()
                self.states.pop(key, None)
            self.topic_configs.pop(gone, None)
            self.listener.on_topic_deleted(gone)
        put = self.events.put
        new = sorted(current - set(self._topic_watches))
        for name in new:
            self._topic_watches[name] = []

        async def watch(name: str) -> None:
            try:
                # The config first: its event is queued before the assignment's.
                cw = await self.store.watch_data(zkdata.topic_config_path(name),
                                                 lambda d, v: put(self._on_topic_config, name, d))
                aw = await self.store.watch_data(zkdata.topic_path(name),
                                                 lambda d, v: put(self._on_assignment, name, d))
            except StoreError as e:
                log.warning("could not watch topic %s: %s", name, e)
                self._topic_watches.pop(name, None)
                return
            if name in self._topic_watches and not self._stopped:
                self._topic_watches[name] = [cw, aw]
            else:
                cw.cancel()
                aw.cancel()

        await asyncio.gather(*(watch(n) for n in new))
        self.changed()

    def _on_topic_config(self, name: str, data: bytes | None) -> None:
        if name not in self._topic_watches:
            return
        configs = zkdata.decode_config(data) if data else {}
        self.topic_configs[name] = configs
        self.listener.on_topic_config(name, configs)

    async def _on_assignment(self, name: str, data: bytes | None) -> None:
        if not data or name not in self._topic_watches:
            return
        try:
            assignment = zkdata.TopicAssignment.decode(data)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable assignment of topic %s: %s", name, e)
            return
        await self.listener.on_topic_assignment(name, assignment)
        put = self.events.put
        new = [(name, p) for p in sorted(assignment.partitions) if (name, p) not in self._state_watches]
        for key in new:
            self._state_watches[key] = None

        async def watch(key: tuple[str, int]) -> None:
            try:
                w = await self.store.watch_data(zkdata.partition_state_path(*key),
                                                lambda d, v: put(self._on_state, key, d, v))
            except StoreError as e:
                log.warning("could not watch %s-%d: %s", key[0], key[1], e)
                self._state_watches.pop(key, None)
                return
            if key in self._state_watches and not self._stopped:
                self._state_watches[key] = w
            else:
                w.cancel()

        await asyncio.gather(*(watch(k) for k in new))
        self.changed()

    def _on_state(self, key: tuple[str, int], data: bytes | None, version: int | None) -> None:
        if data is None or version is None or key not in self._state_watches:
            return
        try:
            state = zkdata.PartitionState.decode(data, version)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable state of %s-%d: %s", key[0], key[1], e)
            return
        self.apply_state(key, state)

    def apply_state(self, key: tuple[str, int], state: zkdata.PartitionState) -> None:
        """A partition state read from the store (by a watch, or re-read after a reconnection)."""
        old = self.states.get(key)
        if old is not None and old.version > state.version and old.leader_epoch >= state.leader_epoch:
            return  # a stale delivery
        self.states[key] = state
        self.listener.on_partition_state(key[0], key[1], state)
        self.changed()

    def note_state(self, topic: str, partition: int, state: zkdata.PartitionState) -> None:
        """A state this broker wrote itself (ISR change): known before the watch says so."""
        old = self.states.get((topic, partition))
        if old is None or state.version >= old.version:
            self.states[(topic, partition)] = state
            self.changed()

    async def reread_states(self) -> int:
        """Read every known partition state again and apply it (after a reconnection: a watch
        delivers only what changed, and this broker may have fenced itself meanwhile)."""
        keys = list(self.states)
        if not keys:
            return 0
        nodes = await self.store.get_many([zkdata.partition_state_path(t, p) for t, p in keys])
        for key, node in zip(keys, nodes):
            if node is not None and node[0]:
                self.apply_state(key, zkdata.PartitionState.decode(node[0], node[1]))
        return len(keys)
