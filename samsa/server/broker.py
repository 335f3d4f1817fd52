"""The broker process: wires config, metadata store, logs, partitions, listeners and timers.

Start-up order: open the metadata store (embedded for a single node, ZooKeeper when
`zookeeper.connect` is set), open every log found in `log.dirs` (recovering after an unclean
stop), bind the listeners, register in /brokers/ids and stand for controller, then follow the
cluster's metadata (`cluster.ClusterView`): each topic's partitions hosted here get their log
and take the role their state gives them (leader, or follower fetching from the leader).
Only then do the listeners accept, and one "started" line is logged.

SIGTERM or SIGINT: with other brokers alive, a controlled shutdown first (the controller
moves this broker's leaderships to other in-sync replicas, so clients switch at once), then
the listeners close, every log is flushed, the checkpoints and the clean-shutdown marker are
written, and the process exits 0.

Losing the ZooKeeper session fences every partition here (no leader, no follower) until the
new session brings the store's view back: a broker that may have been replaced must not
accept writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
import logging
import signal
import time
import uuid
from pathlib import Path

from samsa.config import BrokerConfig, effective_topic_config
from samsa.controller.controller import Controller, probe_until_refused, remove_dead_broker
from samsa.handlers import HANDLER_MODULES
from samsa.metadata import zkdata
from samsa.metadata.store import BadVersion, EmbeddedStore, MetadataStore, NodeExists, StoreError
from samsa.server.admin import AdminManager
from samsa.server.cluster import ClusterView
from samsa.server.dispatch import Dispatcher
from samsa.server.group_manager import OFFSETS_TOPIC, GroupManager
from samsa.server.network import Listener
from samsa.server.producer_ids import ProducerIdManager
from samsa.server.replica_fetcher import ReplicaFetcherManager
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.topics import Topic
from samsa.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets, write_offsets
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import LogManager

log = logging.getLogger("samsa.broker")
METADATA_FILE = "samsa-metadata.db"
LEGACY_METADATA_FILE = "samsa-metadata.json"  # before the journal: imported once, then renamed


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.broker_id()
        self.controller_id = -1
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by run()
        self.log_dirs = [Path(d) for d in config.log_dirs()]
        self.store: MetadataStore | None = None
        self.logs: LogManager | None = None
        self.replicas = ReplicaManager()
        self.topics: dict[str, Topic] = {}
        self.cluster_id = ""
        self.dispatcher = Dispatcher(self, HANDLER_MODULES)
        self.admin = AdminManager(self)
        self.groups = GroupManager(self)
        self.cluster = ClusterView(self)
        self.controller = Controller(self)
        self.fetchers = ReplicaFetcherManager(self)
        self.inter_broker_listener = config.get("inter.broker.listener.name") or (
            config.listeners()[0].name if config.listeners() else "PLAINTEXT")
        self.zk_mode = bool(config.get("zookeeper.connect"))
        self._saved_hw: dict[tuple[str, int], int] = {}
        self.listeners: list[Listener] = []
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]  # set by open_storage()
        self._stopping: asyncio.Event | None = None
        self._closing = False
        self._controller_probe: tuple[int, asyncio.Task[None]] | None = None
        self._timers: list[asyncio.TimerHandle] = []

    # -- start-up -------------------------------------------------------------------------------

    def open_storage(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        zk = self.config.get("zookeeper.connect")
        if zk:
            from samsa.metadata.zookeeper import ZooKeeperStore

            self.store = ZooKeeperStore(
                zk, session_timeout_ms=int(self.config.get("zookeeper.session.timeout.ms")),
                connection_timeout_ms=self.config.get("zookeeper.connection.timeout.ms"))
            log.info("Connected to ZooKeeper at %s", zk)
        else:
            self.store = EmbeddedStore(self.log_dirs[0] / METADATA_FILE,
                                       legacy_json=self.log_dirs[0] / LEGACY_METADATA_FILE)
        self.cluster_id = self._cluster_id()
        self.logs = LogManager(self.log_dirs, self.default_log_config())
        self.logs.startup(broker_id=self.node_id, cluster_id=self.cluster_id)
        for d in self.log_dirs:
            try:
                self._saved_hw.update(read_offsets(d / REPLICATION_OFFSET_CHECKPOINT))
            except (OSError, ValueError) as e:
                log.warning("Ignoring %s: %s", d / REPLICATION_OFFSET_CHECKPOINT, e)
        self.admin.apply_broker_configs()
        self.producer_ids = ProducerIdManager(self.store, self.node_id)

    def _cluster_id(self) -> str:
        assert self.store is not None
        node = self.store.get(zkdata.CLUSTER_ID)
        if node is not None:
            return str(zkdata.loads(node[0])["id"])
        cid = self.config.get("cluster.id") or zkdata.encode_topic_id(uuid.uuid4())
        try:
            self.store.create(zkdata.CLUSTER_ID, zkdata.dumps({"version": "1", "id": cid}))
        except NodeExists:
            return str(zkdata.loads(self.store.get(zkdata.CLUSTER_ID)[0])["id"])  # type: ignore[index]
        return str(cid)

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_topic_configs(effective_topic_config(self.config, {}))

    def log_config_for(self, topic: Topic) -> LogConfig:
        """The topic's log config in force; also refreshes what the produce path reads."""
        effective = effective_topic_config(self.config, topic.configs)
        topic.compression_type = effective.get("compression.type", "producer")
        topic.min_insync_replicas = int(effective.get("min.insync.replicas", "1"))
        return LogConfig.from_topic_configs(effective)

    def topic_config(self, topic: str, key: str) -> object:
        t = self.topics.get(topic)
        return effective_topic_config(self.config, t.configs if t else {}).get(key)

    # -- following the cluster's metadata (called by ClusterView, on the loop) ----------------

    def on_controller_changed(self, controller_id: int) -> None:
        self.controller_id = controller_id
        if controller_id == -1 and not self._closing:
            self.controller.try_elect()
            if self.controller.active:
                self.controller_id = self.node_id
        elif controller_id != self.node_id and self.controller.active:
            self.controller.resign()
        self._watch_controller(self.controller_id)

    def _watch_controller(self, controller_id: int) -> None:
        """Hold a probe connection to the controller (if another broker): when its process is
        gone, remove its nodes so that a new controller is elected without waiting for its
        ZooKeeper session to expire."""
        if self._controller_probe is not None:
            if self._controller_probe[0] == controller_id:
                return
            self._controller_probe[1].cancel()
            self._controller_probe = None
        if controller_id < 0 or controller_id == self.node_id or self._closing:
            return

        async def probe() -> None:
            if await probe_until_refused(self, controller_id, lambda: self.controller_id == controller_id
                                         and not self._closing):
                log.info("Controller %d refuses connections: its process is gone; electing another now",
                         controller_id)
                try:
                    remove_dead_broker(self.store, controller_id, also_controller=True)
                except StoreError as e:
                    log.warning("Could not remove the nodes of controller %d: %s", controller_id, e)

        self._controller_probe = (controller_id, self.loop.create_task(probe(), name="controller-probe"))

    def on_topic_assignment(self, name: str, assignment: zkdata.TopicAssignment) -> None:
        topic = self.topics.get(name)
        if topic is not None and topic.topic_id != assignment.topic_id:
            self.on_topic_deleted(name)  # deleted and created again under the same name
            topic = None
        if topic is None:
            topic = Topic(name, assignment.topic_id, dict(assignment.partitions), {})
            self.topics[name] = topic
            cfg_node = self.store.get(zkdata.topic_config_path(name)) if self.store else None
            topic.configs = zkdata.decode_config(cfg_node[0]) if cfg_node and cfg_node[0] else {}
        else:
            topic.partitions = dict(assignment.partitions)
        cfg = self.log_config_for(topic)
        assert self.logs is not None
        new = [(name, i, cfg) for i, r in sorted(topic.partitions.items())
               if self.node_id in r and self.replicas.get(name, i) is None]
        if len(new) > 1:  # one batch: each log dir fsynced once, not once per partition
            self.logs.add_logs(self.logs.create_logs(new))
        for index, replicas in sorted(topic.partitions.items()):
            part = self.replicas.get(name, index)
            if self.node_id not in replicas:
                if part is not None:  # moved away by a reassignment
                    self.fetchers.unfollow(part)
                    self.replicas.remove(name, index)
                    self.logs.delete_log(name, index)
                    log.info("Replica %s-%d moved off this broker; log deleted", name, index)
                continue
            if part is None:
                lg = self.logs.get_or_create_log(name, index, cfg)
                part = Partition(name, index, topic.topic_id, lg, self.node_id)
                part.isr_writer = self._write_isr
                part.hw = min(self._saved_hw.pop((name, index), 0), lg.log_end_offset)
                if lg.log_end_offset > 0:
                    part.load_producer_state()
                self.replicas.add(part)
            part.removing = list(assignment.removing.get(index, []))
            state = self.cluster.state(name, index)
            if state is not None:
                self.on_partition_state(name, index, state)
        if name == OFFSETS_TOPIC:
            self.groups.num_partitions = len(topic.partitions)

    def on_topic_config(self, name: str, configs: dict[str, str]) -> None:
        topic = self.topics.get(name)
        if topic is None or topic.configs == configs:
            return
        topic.configs = configs
        cfg = self.log_config_for(topic)
        for p in topic.partitions:
            part = self.replicas.get(name, p)
            if part is not None:
                part.log.update_config(cfg)

    def on_topic_deleted(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            return
        assert self.logs is not None
        for p in self.replicas.remove_topic(name):
            self.fetchers.unfollow(p)
            self.logs.delete_log(name, p.index)
        log.info("Topic %s deleted; its logs here are gone", name)

    def on_partition_state(self, topic: str, index: int, state: zkdata.PartitionState) -> None:
        self.controller.on_partition_state(topic, index, state)
        part = self.replicas.get(topic, index)
        t = self.topics.get(topic)
        if part is None or t is None or index not in t.partitions:
            return
        role = part.apply_state(state, t.partitions[index])
        if role == "leader":
            self.fetchers.unfollow(part)
            log.info("Leading %s (leader epoch %d, ISR %s)", part, state.leader_epoch, state.isr)
        elif role == "follower":
            self.fetchers.follow(part, state.leader, state.leader_epoch)
            if state.leader >= 0:
                log.info("Following broker %d for %s (leader epoch %d)", state.leader, part, state.leader_epoch)
        if topic == OFFSETS_TOPIC and role is not None:
            self.groups.on_role(part)

    def _write_isr(self, part: Partition, isr: list[int]) -> bool:
        """Leader side of an ISR change: compare-and-set on the state node, so a leader that
        has been replaced (its version is stale) cannot change it."""
        assert self.store is not None
        new = zkdata.PartitionState(self.node_id, part.leader_epoch, list(isr), part.controller_epoch)
        path = zkdata.partition_state_path(part.topic, part.index)
        try:
            version = self.store.set(path, new.encode(), part.state_version)
        except BadVersion:
            node = self.store.get(path)
            if node is not None:
                self.on_partition_state(part.topic, part.index, zkdata.PartitionState.decode(node[0], node[1]))
            return False
        except StoreError as e:
            log.warning("Could not change the ISR of %s to %s: %s", part, isr, e)
            return False
        old = part.isr
        new.version = version
        part.state_version = version
        part.isr = list(isr)
        self.cluster.note_state(part.topic, part.index, new)
        log.info("ISR of %s %s from %s to %s", part, "expanded" if len(isr) > len(old) else "shrank",
                 ",".join(map(str, old)), ",".join(map(str, isr)))
        part.maybe_increment_hw()
        part.wake()
        return True

    def shrink_isrs(self) -> None:
        lag = int(self.config.get("replica.lag.time.max.ms"))
        for part in self.replicas.leaders():
            out = part.out_of_sync(lag)
            if out:
                part.propose_isr([r for r in part.isr if r not in out])

    def write_high_watermarks(self) -> None:
        for d in self.log_dirs:
            hws = {k: p.hw for k, p in self.replicas.partitions.items() if p.log.dir.parent == d}
            try:
                write_offsets(d / REPLICATION_OFFSET_CHECKPOINT, hws)
            except OSError as e:
                log.warning("Could not write %s: %s", d / REPLICATION_OFFSET_CHECKPOINT, e)

    async def load_cluster(self, timeout_s: float = 30.0) -> None:
        """Follow the store and wait until this broker's view holds every existing topic and
        partition state (so the first client request sees them)."""
        assert self.store is not None
        names = self.store.children(zkdata.TOPICS)
        self.cluster.start()
        keys = []
        for name in names:
            node = self.store.get(zkdata.topic_path(name))
            if node and node[0]:
                keys += [(name, p) for p in zkdata.TopicAssignment.decode(node[0]).partitions]
        nodes = self.store.get_many([zkdata.partition_state_path(t, p) for t, p in keys]) if keys else []
        expected = {k for k, n in zip(keys, nodes) if n is not None}
        ok = await self.cluster.wait_until(
            lambda: all(n in self.topics for n in names) and all(k in self.cluster.states for k in expected), timeout_s)
        if not ok:
            log.warning("The cluster view is still incomplete after %.0f s; serving what is known", timeout_s)

    def auto_create_topic(self, name: str) -> Topic:
        return self.admin.create_topic(
            name, self.config.get("num.partitions"), self.config.get("default.replication.factor"), {}
        )

    def register(self) -> None:
        """Announce this broker: an ephemeral /brokers/ids/<id> with its endpoints (as Kafka's
        ZooKeeper mode does)."""
        assert self.store is not None
        endpoints = [f"{name}://{host}:{port}" for name, _, _ in self.config.advertised_listeners()
                     for _, host, port, _ in self.endpoints(name)]
        doc = {"version": 5, "endpoints": endpoints, "rack": self.config.get("broker.rack"), "jmx_port": -1,
               "timestamp": str(int(time.time() * 1000)), "features": {},
               "listener_security_protocol_map": self.config.security_protocol_map()}
        if endpoints:
            first = endpoints[0].split("://", 1)[1]
            doc["host"], doc["port"] = first.rsplit(":", 1)[0], int(first.rsplit(":", 1)[1])
        path = zkdata.broker_path(self.node_id)
        deadline = time.monotonic() + int(self.config.get("zookeeper.session.timeout.ms")) / 1000 + 5
        while True:
            try:
                self.store.create(path, zkdata.dumps(doc), ephemeral=True)
                return
            except NodeExists:
                node = self.store.get(path)
            if node is None:
                continue
            theirs = zkdata.loads(node[0]).get("endpoints")
            if theirs != endpoints or time.monotonic() > deadline:
                raise StoreError(f"broker.id {self.node_id} is already registered by a live broker "
                                 f"({', '.join(theirs or [])}); give every broker its own broker.id") from None
            # Our own registration from before a crash: its ZooKeeper session has not expired yet.
            log.info("Waiting for the previous session of broker %d to expire in ZooKeeper", self.node_id)
            time.sleep(0.25)

    def _on_session_lost(self) -> None:
        log.warning("ZooKeeper session lost: this broker stops leading and following until it is back")
        self.controller.resign()
        for part in self.replicas.partitions.values():
            self.fetchers.unfollow(part)
            part.fence()
            if part.topic == OFFSETS_TOPIC:
                self.groups.on_role(part)

    def _on_reconnected(self, new_session: bool) -> None:
        if not new_session or self._closing:
            return
        log.info("New ZooKeeper session: registering broker %d again", self.node_id)
        try:
            self.register()
        except StoreError as e:
            log.error("Could not register again: %s", e)
            return
        for (t, p), st in list(self.cluster.states.items()):
            node = self.store.get(zkdata.partition_state_path(t, p)) if self.store else None
            if node is not None:
                self.cluster._on_state((t, p), node[0], node[1])
        if self.cluster.controller_id == -1 or self.store.get(zkdata.CONTROLLER) is None:  # type: ignore[union-attr]
            self.on_controller_changed(-1)

    # -- endpoints ------------------------------------------------------------------------------

    def endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        rack = self.config.get("broker.rack")
        for name, host, port in self.config.advertised_listeners():
            if name == listener_name:
                if not host or host in ("0.0.0.0", "::"):
                    host = self.config.hostname()
                if port == 0:
                    port = next(lst.port for lst in self.listeners if lst.name == name)
                return [(self.node_id, host, port, rack)]
        return []

    # -- run ------------------------------------------------------------------------------------

    def start_listeners(self) -> None:
        max_req = self.config.get("socket.request.max.bytes")
        for name, host, port in self.config.listeners():
            lst = Listener(self.loop, name, host, port, self.dispatcher, max_req)
            lst.start()  # bound; accepting starts once the cluster view is loaded
            self.listeners.append(lst)

    def _every(self, interval_ms: int, fn: Callable[[], object], what: str) -> None:
        interval = max(interval_ms, 10) / 1000

        def tick() -> None:
            try:
                fn()
            except Exception:
                log.exception("%s failed", what)
            self._timers.append(self.loop.call_later(interval, tick))

        self._timers.append(self.loop.call_later(interval, tick))

    def start_timers(self) -> None:
        assert self.logs is not None
        logs = self.logs
        now_ms = lambda: int(time.time() * 1000)  # noqa: E731
        self._every(self.config.get("log.retention.check.interval.ms"), lambda: logs.cleanup(now_ms()), "retention")
        # flush_due also fsyncs rolled segments so the recovery point advances; it is cheap
        # when nothing is due, so it runs at least every second whatever the scheduler says.
        flush_every = min(self.config.get("log.flush.scheduler.interval.ms"), 1000)
        self._every(flush_every, lambda: logs.flush_due(now_ms()), "scheduled flush")
        self._every(self.config.get("log.flush.offset.checkpoint.interval.ms"), logs.checkpoint, "checkpoint")
        self._every(self.config.get("replica.high.watermark.checkpoint.interval.ms"), self.write_high_watermarks,
                    "high watermark checkpoint")
        self._every(max(int(self.config.get("replica.lag.time.max.ms")) // 2, 10), self.shrink_isrs, "ISR check")
        self._every(self.config.get("log.cleaner.backoff.ms"), self.groups.maybe_compact, "__consumer_offsets compaction")

    async def run(self) -> int:
        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stopping.set)
        t0 = time.monotonic()
        self.open_storage()
        self.start_listeners()
        assert self.store is not None
        self.store.add_session_listener(on_session_lost=self._on_session_lost, on_reconnected=self._on_reconnected,
                                        loop=self.loop)
        self.register()
        await self.load_cluster()
        await self.groups.startup()
        for lst in self.listeners:
            lst.serve()
        self.start_timers()
        where = ", ".join(f"{lst.name}://{lst.host or '0.0.0.0'}:{lst.port}" for lst in self.listeners)
        log.info(
            "Samsa broker %d started (cluster %s, %d partitions in %s, listeners %s) in %.0f ms",
            self.node_id, self.cluster_id, len(self.replicas.partitions),
            ",".join(map(str, self.log_dirs)), where, (time.monotonic() - t0) * 1000,
        )
        await self._stopping.wait()
        log.info("Samsa broker %d shutting down", self.node_id)
        await self.controlled_shutdown()
        self.shutdown()
        log.info("Samsa broker %d stopped cleanly", self.node_id)
        return 0

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships to other in-sync replicas and
        wait until it has (each attempt waits controlled.shutdown.retry.backoff.ms)."""
        self._closing = True
        if not self.zk_mode or not self.config.get_bool("controlled.shutdown.enable") or self.store is None:
            return

        def done() -> bool:
            live = set(self.cluster.brokers) - {self.node_id}
            return not any(set(p.isr) & live for p in self.replicas.leaders())

        if done():
            return
        t0 = time.monotonic()
        try:
            self.store.create(zkdata.controlled_shutdown_path(self.node_id), b"", ephemeral=True)
        except NodeExists:
            pass
        except StoreError as e:
            log.warning("Controlled shutdown not possible (%s); stopping anyway", e)
            return
        attempts = max(1, int(self.config.get("controlled.shutdown.max.retries")))
        wait_s = int(self.config.get("controlled.shutdown.retry.backoff.ms")) / 1000
        for _ in range(attempts):
            if await self.cluster.wait_until(done, wait_s):
                log.info("Controlled shutdown: leadership moved away in %.0f ms", (time.monotonic() - t0) * 1000)
                return
        left = [str(p) for p in self.replicas.leaders() if set(p.isr) - {self.node_id}]
        log.warning("Controlled shutdown: still leading %s; stopping anyway", ", ".join(left[:10]))

    def shutdown(self) -> None:
        self._closing = True
        for t in self._timers:
            t.cancel()
        self.fetchers.shutdown()
        if self._controller_probe is not None:
            self._controller_probe[1].cancel()
        self.controller.resign()
        self.cluster.stop()
        for lst in self.listeners:
            lst.close()
        self.groups.shutdown()
        self.write_high_watermarks()
        if self.logs is not None:
            self.logs.shutdown()
        if self.store is not None:
            self.store.close()


def run_broker(config: BrokerConfig) -> int:
    broker = Broker(config)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(broker.run())
    return uvloop.run(broker.run())
