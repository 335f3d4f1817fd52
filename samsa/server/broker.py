"""The broker process: wires config, metadata store, logs, partitions, listeners and timers.

Start-up order: open the metadata store (embedded, single node), open every log found in
`log.dirs` (recovering after an unclean stop), build the partitions of every known topic,
then open the listeners and log one "started" line. SIGTERM or SIGINT stops the listeners,
flushes every log, writes the checkpoints and the clean-shutdown marker, and exits 0.
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
from samsa.handlers import HANDLER_MODULES
from samsa.metadata import zkdata
from samsa.metadata.store import EmbeddedStore, MetadataStore, NodeExists, StoreError
from samsa.server.admin import AdminManager
from samsa.server.dispatch import Dispatcher
from samsa.server.group_manager import GroupManager
from samsa.server.network import Listener
from samsa.server.producer_ids import ProducerIdManager
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.topics import Topic
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import LogManager

log = logging.getLogger("samsa.broker")
METADATA_FILE = "samsa-metadata.json"


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.broker_id()
        self.controller_id = self.node_id
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
        self.listeners: list[Listener] = []
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]  # set by open_storage()
        self._stopping: asyncio.Event | None = None
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
            self.store = EmbeddedStore(self.log_dirs[0] / METADATA_FILE)
        self.cluster_id = self._cluster_id()
        self.logs = LogManager(self.log_dirs, self.default_log_config())
        self.logs.startup(broker_id=self.node_id, cluster_id=self.cluster_id)
        for name in self.store.children(zkdata.TOPICS):
            node = self.store.get(zkdata.topic_path(name))
            if node is None or not node[0]:
                continue
            assignment = zkdata.TopicAssignment.decode(node[0])
            cfg_node = self.store.get(zkdata.topic_config_path(name))
            configs = zkdata.decode_config(cfg_node[0]) if cfg_node else {}
            topic = Topic(name, assignment.topic_id, assignment.partitions, configs)
            self.host_topic(topic)
        self.admin.apply_broker_configs()
        self.producer_ids = ProducerIdManager(self.store, self.node_id)
        known = {(t.name, p) for t in self.topics.values() for p in t.partitions}
        for (t, p) in list(self.logs.logs()):
            if (t, p) not in known:
                log.warning("log dir for %s-%d belongs to no known topic; leaving it untouched", t, p)

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

    def host_topic(self, topic: Topic) -> None:
        """Open (or create) the logs of every partition of `topic` that this broker holds."""
        assert self.logs is not None
        self.topics[topic.name] = topic
        cfg = self.log_config_for(topic)
        for index, replicas in topic.partitions.items():
            if self.node_id not in replicas or self.replicas.get(topic.name, index) is not None:
                continue
            lg = self.logs.get_or_create_log(topic.name, index, cfg)
            partition = Partition(topic.name, index, topic.topic_id, lg)
            if lg.log_end_offset > 0:
                partition.load_producer_state()
            self.replicas.add(partition)

    def auto_create_topic(self, name: str) -> Topic:
        return self.admin.create_topic(
            name, self.config.get("num.partitions"), self.config.get("default.replication.factor"), {}
        )

    def register(self) -> None:
        """Announce this broker: an ephemeral /brokers/ids/<id> with its endpoints (as Kafka's
        ZooKeeper mode does), then stand for controller through the ephemeral /controller node."""
        assert self.store is not None
        endpoints = [f"{name}://{host}:{port}" for name, _, _ in self.config.advertised_listeners()
                     for _, host, port, _ in self.endpoints(name)]
        doc = {"version": 5, "endpoints": endpoints, "rack": self.config.get("broker.rack"), "jmx_port": -1,
               "timestamp": str(int(time.time() * 1000)), "features": {},
               "listener_security_protocol_map": self.config.security_protocol_map()}
        if endpoints:
            first = endpoints[0].split("://", 1)[1]
            doc["host"], doc["port"] = first.rsplit(":", 1)[0], int(first.rsplit(":", 1)[1])
        try:
            self.store.create(zkdata.broker_path(self.node_id), zkdata.dumps(doc), ephemeral=True)
        except NodeExists:
            raise StoreError(f"broker.id {self.node_id} is already registered by a live broker; "
                             "give every broker its own broker.id") from None
        try:
            self.store.create(zkdata.CONTROLLER, zkdata.dumps(
                {"version": 2, "brokerid": self.node_id, "timestamp": str(int(time.time() * 1000))}), ephemeral=True)
            node = self.store.get(zkdata.CONTROLLER_EPOCH)
            epoch = int(node[0]) + 1 if node and node[0] else 1
            if node is None:
                self.store.create(zkdata.CONTROLLER_EPOCH, str(epoch).encode())
            else:
                self.store.set(zkdata.CONTROLLER_EPOCH, str(epoch).encode(), node[1])
            self.controller_id = self.node_id
            log.info("Broker %d is the controller (epoch %d)", self.node_id, epoch)
        except NodeExists:
            node = self.store.get(zkdata.CONTROLLER)
            self.controller_id = int(zkdata.loads(node[0])["brokerid"]) if node else -1

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
            lst.start()
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
        self._every(self.config.get("log.cleaner.backoff.ms"), self.groups.maybe_compact, "__consumer_offsets compaction")

    async def run(self) -> int:
        self.loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stopping.set)
        t0 = time.monotonic()
        self.open_storage()
        self.groups.startup()
        self.start_listeners()
        self.register()
        self.start_timers()
        where = ", ".join(f"{lst.name}://{lst.host or '0.0.0.0'}:{lst.port}" for lst in self.listeners)
        log.info(
            "Samsa broker %d started (cluster %s, %d partitions in %s, listeners %s) in %.0f ms",
            self.node_id, self.cluster_id, len(self.replicas.partitions),
            ",".join(map(str, self.log_dirs)), where, (time.monotonic() - t0) * 1000,
        )
        await self._stopping.wait()
        log.info("Samsa broker %d shutting down", self.node_id)
        self.shutdown()
        log.info("Samsa broker %d stopped cleanly", self.node_id)
        return 0

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    def shutdown(self) -> None:
        for t in self._timers:
            t.cancel()
        for lst in self.listeners:
            lst.close()
        self.groups.shutdown()
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
