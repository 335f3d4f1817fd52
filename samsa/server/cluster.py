"""What this broker knows of the cluster: live brokers, topics, partition states, controller.

How it works: the metadata store is the one source of truth and every broker follows it
through watches (ZooKeeper's, or the embedded store's equivalent), as a cache:

    /brokers/ids (children, then each node)   -> live brokers and their endpoints
    /controller (data)                         -> the controller id; when it vanishes, run
    /brokers/topics (children)                 -> topics appear and disappear
    /brokers/topics/<t> (data)                 -> replica assignment (partitions added)
    /brokers/topics/<t>/partitions/<p>/state   -> leader, leader epoch, ISR (role changes)
    /config/topics/<t> (data)                  -> topic config overrides

Why watches and not Kafka's LeaderAndIsr/UpdateMetadata requests: Kafka 4 removed those
ZooKeeper-era RPCs, and with ZooKeeper holding every partition's state under a version, a
broker that reads it directly cannot apply changes out of order (each znode's watch delivers
its latest version) and needs no second channel from the controller. The cost is one
ZooKeeper read per change per broker, which is small next to the data path.

Each change is handed to the broker (`Broker.on_*`), which applies it to its replicas. Tasks
that wait for the cluster to reach a state (a created topic having leaders) use `wait_until`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from samsa.metadata import zkdata
from samsa.metadata.store import StoreError, log_failures

if TYPE_CHECKING:
    from samsa.server.broker import Broker

log = logging.getLogger("samsa.cluster")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None

    @classmethod
    def decode(cls, node_id: int, data: bytes) -> "BrokerInfo":
        doc = zkdata.loads(data)
        eps: dict[str, tuple[str, int]] = {}
        for ep in doc.get("endpoints", []):
            name, _, hostport = ep.partition("://")
            host, _, port = hostport.rpartition(":")
            eps[name] = (host.strip("[]"), int(port))
        return cls(node_id, eps, doc.get("rack"))


guarded = log_failures(log, "Metadata")


class ClusterView:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.states: dict[tuple[str, int], zkdata.PartitionState] = {}
        self._topic_watches: dict[str, list[Any]] = {}
        self._state_watches: dict[tuple[str, int], Any] = {}
        self._watches: list[Any] = []
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[bool]]] = []

    # -- start / stop ---------------------------------------------------------------------------

    def start(self) -> None:
        store = self.broker.store
        assert store is not None
        loop = self.broker.loop
        self._watches.append(store.watch_children(zkdata.BROKER_IDS, self._on_broker_ids, loop=loop))
        self._watches.append(store.watch_data(zkdata.CONTROLLER, self._on_controller, loop=loop))
        self._watches.append(store.watch_children(zkdata.TOPICS, self._on_topics, loop=loop))
        for entity in (str(self.broker.node_id), zkdata.DEFAULT_BROKER):
            self._watches.append(store.watch_data(zkdata.broker_config_path(entity), self._on_broker_config,
                                                  loop=loop))

    def stop(self) -> None:
        for w in self._watches:
            w.cancel()
        for ws in self._topic_watches.values():
            for w in ws:
                w.cancel()
        for w in self._state_watches.values():
            w.cancel()
        self._watches.clear()
        self._topic_watches.clear()
        self._state_watches.clear()
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters.clear()

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

    def topic_ready(self, name: str) -> bool:
        topic = self.broker.topics.get(name)
        if topic is None:
            return False
        for p in topic.partitions:
            st = self.states.get((name, p))
            if st is None or st.leader < 0:
                return False
        return True

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        """True once `predicate()` holds after some change (checked now first), False at timeout."""
        if predicate():
            return True
        fut: asyncio.Future[bool] = self.broker.loop.create_future()
        entry = (predicate, fut)
        self._waiters.append(entry)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        except asyncio.TimeoutError:
            return predicate()
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _changed(self) -> None:
        if not self._waiters:
            return
        for pred, fut in list(self._waiters):
            if not fut.done() and pred():
                fut.set_result(True)

    # -- watch callbacks (on the event loop) ------------------------------------------------------

    @guarded
    def _on_broker_ids(self, ids: list[str]) -> None:
        store = self.broker.store
        assert store is not None
        wanted = sorted(int(i) for i in ids if i.isdigit())
        try:
            nodes = store.get_many([zkdata.broker_path(i) for i in wanted]) if wanted else []
        except StoreError as e:
            log.warning("could not read broker registrations: %s", e)
            return
        old = set(self.brokers)
        fresh = {}
        for i, node in zip(wanted, nodes):
            if node is not None:
                try:
                    fresh[i] = BrokerInfo.decode(i, node[0])
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("ignoring unreadable registration of broker %d: %s", i, e)
        self.brokers = fresh
        me = self.broker.node_id
        if me not in fresh and me in old and not self.broker._closing and store.connected:
            log.warning("The registration of this broker (%d) was removed while it is alive; registering again", me)
            self.broker.register()
            return
        if set(fresh) != old:
            log.info("Live brokers: %s", ",".join(map(str, sorted(fresh))) or "none")
        self._changed()

    @guarded
    def _on_controller(self, data: bytes | None, version: int | None) -> None:
        try:
            self.controller_id = int(zkdata.loads(data)["brokerid"]) if data else -1
        except (ValueError, KeyError, TypeError):
            self.controller_id = -1
        self.broker.on_controller_changed(self.controller_id)
        self._changed()

    @guarded
    def _on_broker_config(self, data: bytes | None, version: int | None) -> None:
        """Dynamic broker configs (this broker's or the cluster default) changed anywhere."""
        self.broker.admin.apply_broker_configs()

    @guarded
    def _on_topics(self, names: list[str]) -> None:
        store = self.broker.store
        assert store is not None
        current = set(names)
        for gone in set(self._topic_watches) - current:
            for w in self._topic_watches.pop(gone):
                w.cancel()
            for key in [k for k in self._state_watches if k[0] == gone]:
                self._state_watches.pop(key).cancel()
                self.states.pop(key, None)
            self.broker.on_topic_deleted(gone)
        loop = self.broker.loop
        for name in sorted(current - set(self._topic_watches)):
            try:
                self._topic_watches[name] = [
                    store.watch_data(zkdata.topic_path(name), lambda d, v, n=name: self._on_assignment(n, d), loop=loop),
                    store.watch_data(zkdata.topic_config_path(name),
                                     lambda d, v, n=name: self._on_topic_config(n, d), loop=loop),
                ]
            except StoreError as e:
                log.warning("could not watch topic %s: %s", name, e)
        self._changed()

    @guarded
    def _on_assignment(self, name: str, data: bytes | None) -> None:
        if not data:
            return
        try:
            assignment = zkdata.TopicAssignment.decode(data)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable assignment of topic %s: %s", name, e)
            return
        self.broker.on_topic_assignment(name, assignment)
        store = self.broker.store
        assert store is not None
        loop = self.broker.loop
        for p in sorted(assignment.partitions):
            key = (name, p)
            if key in self._state_watches:
                continue
            try:
                self._state_watches[key] = store.watch_data(
                    zkdata.partition_state_path(name, p), lambda d, v, k=key: self._on_state(k, d, v), loop=loop)
            except StoreError as e:
                log.warning("could not watch %s-%d: %s", name, p, e)
        self._changed()

    @guarded
    def _on_topic_config(self, name: str, data: bytes | None) -> None:
        configs = zkdata.decode_config(data) if data else {}
        self.broker.on_topic_config(name, configs)

    @guarded
    def _on_state(self, key: tuple[str, int], data: bytes | None, version: int | None) -> None:
        if data is None or version is None:
            return
        try:
            state = zkdata.PartitionState.decode(data, version)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("ignoring unreadable state of %s-%d: %s", key[0], key[1], e)
            return
        old = self.states.get(key)
        if old is not None and old.version > version and old.leader_epoch >= state.leader_epoch:
            return  # a stale delivery
        self.states[key] = state
        self.broker.on_partition_state(key[0], key[1], state)
        self._changed()

    def note_state(self, topic: str, partition: int, state: zkdata.PartitionState) -> None:
        """A state this broker wrote itself (ISR change): known before the watch says so."""
        old = self.states.get((topic, partition))
        if old is None or state.version >= old.version:
            self.states[(topic, partition)] = state
            self._changed()

