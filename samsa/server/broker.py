"""The broker process: wires config, metadata store, logs, partitions, listeners and timers.

Start-up order: open the metadata store (embedded for a single node, ZooKeeper when
`zookeeper.connect` is set; retried within `zookeeper.connection.timeout.ms` if ZooKeeper is
away), open every log found in `log.dirs` (recovering after an unclean stop; in a worker
thread), bind the listeners, register in /brokers/ids, then follow the cluster's metadata
(`cluster.ClusterView`): each topic's partitions hosted here get their log and take the role
their state gives them (leader, or follower fetching from the leader). Only then do the
listeners accept, and one "started" line is logged. With `prometheus.listener` set, the
metrics endpoint (`metrics_http.py`, `prometheus.py`) listens from just before the listeners
are bound.

Nothing here waits on the metadata store or the disk on the event loop: store calls are
awaited (the store is asynchronous), logs are opened and created in worker threads, the
controller and the cluster view each consume their own event queue, ISR changes are written
in the background (`isr_manager`), and `session_guard` handles ZooKeeper's sessions. A loop
monitor logs any stall of the loop over 100 ms.

SIGTERM or SIGINT: with other brokers alive, a controlled shutdown first (the controller
moves this broker's leaderships to other in-sync replicas, so clients switch at once), then
the listeners close, every log is flushed, the checkpoints and the clean-shutdown marker are
written, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import signal
import ssl
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from samsa.config import DYNAMIC_PER_LISTENER, BrokerConfig, ConfigError, effective_topic_config
from samsa.controller.context import ControllerContext
from samsa.controller.controller import Controller, probe_until_refused, remove_dead_broker
from samsa.handlers import HANDLER_MODULES
from samsa.metadata import zkdata
from samsa.metadata.embedded import EmbeddedStore
from samsa.metadata.store import ConnectionLost, MetadataStore, NodeExists, StoreError
from samsa.protocol.errors import ErrorCode
from samsa.ratelimit import BurstLog
from samsa.server import sasl, tls
from samsa.server.admin import AdminManager
from samsa.server.alter_log_dirs import ReplicaAlterLogDirsManager
from samsa.server.authorizer import Authorizer, AuthorizerConfigError, api_names, authorizer_settings
from samsa.server.cluster import ClusterView
from samsa.server.connection_quotas import ConnectionQuotas, Limits, parse_overrides
from samsa.server.context import BrokerServices
from samsa.server.dispatch import Dispatcher, supported_versions
from samsa.server.entity_configs import EntityConfigs
from samsa.server.fetch_sessions import FetchSessionCache
from samsa.server.group_manager import OFFSETS_TOPIC, GroupManager
from samsa.server.isr_manager import IsrManager
from samsa.server.log_cleaner import LogCleaner
from samsa.server.loop_monitor import LoopMonitor
from samsa.server.metrics_http import MetricsServer
from samsa.server.network import Listener
from samsa.server.producer_ids import ProducerIdManager
from samsa.server.prometheus import Exposition, ScrapeSources
from samsa.server.purgatory import Purgatory
from samsa.server.quotas import ClientQuotas
from samsa.server.replica_fetcher import ReplicaFetcherManager
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.sasl_client import CLIENT_MECHANISMS, SaslLogin
from samsa.server.scram import ScramCredentials
from samsa.server.session_guard import SessionGuard
from samsa.server.topics import Topic
from samsa.server.txn_manager import TXN_TOPIC, TransactionManager
from samsa.server.txn_markers import TxnMarker, write_markers
from samsa.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets, write_offsets
from samsa.storage.config import LogConfig
from samsa.storage.errors import StorageError, is_log_dir_failure
from samsa.storage.log_manager import (
    PARTITION_METADATA,
    LogManager,
    sync_and_close,
    write_checkpoints,
    write_topic_id,
)

log = logging.getLogger("samsa.broker")
METADATA_FILE = "samsa-metadata.db"
LEGACY_METADATA_FILE = "samsa-metadata.json"  # before the journal: imported once, then renamed
T = TypeVar("T")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id: int = config.broker_id()
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]  # set by run()
        self.log_dirs = [Path(d) for d in config.log_dirs()]
        self.store: MetadataStore | None = None
        self.logs: LogManager | None = None
        self.cleaner: LogCleaner | None = None
        self.log_dir_moves: ReplicaAlterLogDirsManager | None = None  # set by open_storage()
        self.purgatory: Purgatory = None  # type: ignore[assignment]  # set by run(): it runs on the loop
        self.fetch_sessions = FetchSessionCache(int(config.get("max.incremental.fetch.session.cache.slots")))
        self.replicas = ReplicaManager()
        self.topics: dict[str, Topic] = {}
        self.cluster_id = ""
        self.services: BrokerServices = None  # type: ignore[assignment]  # set by open_storage()
        self.dispatcher: Dispatcher = None  # type: ignore[assignment]  # set by open_storage()
        self.admin = AdminManager(self)
        self.groups = GroupManager(self)
        self.transactions = TransactionManager(self)
        self.cluster: ClusterView = None  # type: ignore[assignment]  # set by open_storage()
        self.entity_configs: EntityConfigs = None  # type: ignore[assignment]  # set by open_storage()
        self.scram = ScramCredentials()  # SCRAM users, from entity_configs (SASL listeners read it)
        try:  # (a class other than the ACL authorizer is refused before anything starts)
            self._super_users = authorizer_settings(config.get("authorizer.class.name"), config.get("super.users"))
        except AuthorizerConfigError as e:
            raise ConfigError(str(e)) from None
        self.authorizer: Authorizer | None = None  # set by open_storage() when authorizer.class.name is set
        self.client_quotas: ClientQuotas = None  # type: ignore[assignment]  # set by open_storage()
        self.controller: Controller = None  # type: ignore[assignment]  # set by open_storage()
        self.isr: IsrManager = None  # type: ignore[assignment]  # set by open_storage()
        self.session = SessionGuard(self)
        self.fetchers = ReplicaFetcherManager(self)
        self.inter_broker_listener = inter_broker_listener(config)
        self.inter_broker_ssl: ssl.SSLContext | None = None  # set by start_listeners (TLS between brokers)
        self.inter_broker_sasl: SaslLogin | None = None  # set by start_listeners (SASL between brokers)
        self._tls_ids: dict[str, tuple[Any, ...]] = {}  # TLS listener -> what its context was made of
        self.zk_mode = bool(config.get("zookeeper.connect"))
        self.exit_code = 0
        self._saved_hw: dict[tuple[str, int], int] = {}
        self.listeners: list[Listener] = []
        self.quotas: ConnectionQuotas | None = None
        self._limits: tuple[BrokerConfig, Limits] | None = None
        self.producer_ids: ProducerIdManager = None  # type: ignore[assignment]  # set by open_storage()
        self.monitor: LoopMonitor | None = None
        self.metrics_server: MetricsServer | None = None  # prometheus.listener set: the /metrics endpoint
        self._stopping: asyncio.Event | None = None
        self.closing = False
        self._controller_probe: tuple[int, asyncio.Task[None]] | None = None
        self._timers: list[asyncio.TimerHandle] = []
        self.role_log = BurstLog(log)
        self._background: set[asyncio.Future[None]] = set()  # checkpoint writes in worker threads
        self._started = time.monotonic()

    @property
    def controller_id(self) -> int:
        return self.cluster.controller_id if self.cluster is not None else -1

    # -- start-up -------------------------------------------------------------------------------

    async def _retrying(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Start-up's store calls: retried while ZooKeeper is unreachable, for up to
        zookeeper.connection.timeout.ms in all (then the broker gives up with a clear error)."""
        limit_ms = int(self.config.get("zookeeper.connection.timeout.ms")
                       or self.config.get("zookeeper.session.timeout.ms"))
        deadline = self._started + limit_ms / 1000
        told = False
        while True:
            try:
                return await call()
            except ConnectionLost as e:
                if time.monotonic() >= deadline:
                    raise ConnectionLost(f"{e} while {what}; gave up after zookeeper.connection.timeout.ms="
                                         f"{limit_ms}") from None
                if not told:
                    log.warning("ZooKeeper unreachable while %s (%s); retrying for up to %d ms", what, e, limit_ms)
                    told = True
                await asyncio.sleep(0.2)

    async def open_storage(self) -> None:
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        zk = self.config.get("zookeeper.connect")
        if zk:
            from samsa.metadata.zookeeper import ZooKeeperStore

            session_ms = int(self.config.get("zookeeper.session.timeout.ms"))
            # Attempts of at most 2 s each, retried (and said so) within zookeeper.connection.timeout.ms.
            self.store = await self._retrying("connecting", lambda: ZooKeeperStore.connect(
                zk, session_timeout_ms=session_ms, connection_timeout_ms=2000))
            log.info("Connected to ZooKeeper at %s", zk)
        else:
            self.store = await EmbeddedStore.open(self.log_dirs[0] / METADATA_FILE,
                                                  legacy_json=self.log_dirs[0] / LEGACY_METADATA_FILE)
        store = self.store
        self.cluster_id = await self._retrying("reading the cluster id", self._cluster_id)
        self.cluster = ClusterView(store, self, self.purgatory)
        self.entity_configs = EntityConfigs(store)
        self.entity_configs.add_listener(self.scram.on_entity)
        if self._super_users is not None:
            allow_if_no_acl = self.config.get_bool("allow.everyone.if.no.acl.found")
            self.authorizer = Authorizer(store, self._super_users, allow_if_no_acl, api_names(HANDLER_MODULES))
        self.client_quotas = ClientQuotas(int(self.config.get("quota.window.num")),
                                          float(self.config.get("quota.window.size.seconds")))
        self.entity_configs.add_listener(self.client_quotas.on_entity_config)
        self.controller = Controller(ControllerContext(
            node_id=self.node_id, store=store, view=self.cluster, config=self._config_value,
            topic_config=self.topic_config, inter_broker_listener=self.inter_broker_listener))
        self.isr = IsrManager(store, self.node_id, on_state_read=self._on_state_read,
                              on_written=self.cluster.note_state)
        self.producer_ids = ProducerIdManager(store, self.node_id)
        self.logs = LogManager(self.log_dirs, self.default_log_config(),
                               recovery_threads=int(self.config.get("num.recovery.threads.per.data.dir")))
        logs = self.logs
        logs.on_error = self.on_storage_error
        self.replicas.on_storage_error = self.on_storage_error
        self.replicas.flusher = self._flush_partition

        cleaner = self.cleaner = LogCleaner(self.loop, self._current_config, lambda: self.replicas.partitions.values(),
                                            lambda: logs.online_dirs)

        def load() -> dict[tuple[str, int], int]:
            logs.startup(broker_id=self.node_id, cluster_id=self.cluster_id)
            cleaner.load_checkpoints()
            saved: dict[tuple[str, int], int] = {}
            for d in self.log_dirs:
                try:
                    # (the highest: a partition moved between log dirs may be in both files a while)
                    for tp, hw in read_offsets(d / REPLICATION_OFFSET_CHECKPOINT).items():
                        saved[tp] = max(hw, saved.get(tp, hw))
                except (OSError, ValueError) as e:
                    log.warning("Ignoring %s: %s", d / REPLICATION_OFFSET_CHECKPOINT, e)
            return saved

        self._saved_hw = await self.loop.run_in_executor(None, load)
        self.log_dir_moves = ReplicaAlterLogDirsManager(self.loop, logs, self.replicas, self._current_config, cleaner,
                                                        self.on_storage_error)
        self.services = self._services()
        self.dispatcher = Dispatcher(self.services, HANDLER_MODULES)
        self.transactions.write_local_markers = self._write_local_marker

    def _services(self) -> BrokerServices:
        """What request handlers may use (their `RequestContext`): built once, here."""
        return BrokerServices(
            node_id=self.node_id, cluster_id=self.cluster_id, current_config=self._current_config, topics=self.topics,
            replicas=self.replicas, cluster=self.cluster, admin=self.admin, groups=self.groups,
            controller=self.controller, producer_ids=self.producer_ids, purgatory=self.purgatory,
            fetch_sessions=self.fetch_sessions, entity_configs=self.entity_configs, quotas=self.client_quotas,
            api_versions=supported_versions(HANDLER_MODULES),
            endpoints=self.endpoints, topic_ready=self.topic_ready, auto_create_topic=self.auto_create_topic,
            persist_log_start_offsets=self.persist_log_start_offsets, transactions=self.transactions,
            authorizer=self.authorizer, offline_log_dirs=self.offline_log_dirs,
            describe_log_cleaner=self.cleaner.describe if self.cleaner is not None else dict,
            log_dir_moves=self.log_dir_moves)

    async def _write_local_marker(self, marker: dict[str, Any]) -> dict[tuple[str, int], ErrorCode]:
        """The transaction coordinator's markers for partitions this broker leads: written in
        process, as WriteTxnMarkers would (server/txn_markers.py)."""
        parts = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
        done = await write_markers(self.services, [TxnMarker(marker["producer_id"], marker["producer_epoch"],
                                                             marker["transaction_result"], marker["coordinator_epoch"],
                                                             parts)],
                                   timeout_ms=int(self.config.get("request.timeout.ms")))
        return done[0]

    def offline_log_dirs(self) -> list[Path]:
        """The log dirs that failed since the start (offline until a restart)."""
        return list(self.logs.offline_dirs) if self.logs is not None else []

    def persist_log_start_offsets(self) -> asyncio.Future[None]:
        """Write the log dirs' checkpoints as they are now (DeleteRecords waits for it)."""
        assert self.logs is not None
        return self.loop.run_in_executor(None, write_checkpoints, self.logs.checkpoint_snapshot())

    def _config_value(self, key: str) -> Any:
        return self.config.get(key)

    def _current_config(self) -> BrokerConfig:
        return self.config  # replaced whole when dynamic broker configs change

    async def _cluster_id(self) -> str:
        store = self.store
        assert store is not None
        node = await store.get(zkdata.CLUSTER_ID)
        if node is not None:
            return str(zkdata.loads(node[0])["id"])
        cid = self.config.get("cluster.id") or zkdata.encode_topic_id(uuid.uuid4())
        try:
            await store.create(zkdata.CLUSTER_ID, zkdata.dumps({"version": "1", "id": cid}))
        except NodeExists:
            node = await store.get(zkdata.CLUSTER_ID)
            assert node is not None
            return str(zkdata.loads(node[0])["id"])
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

    def topic_ready(self, name: str) -> bool:
        topic = self.topics.get(name)
        return topic is not None and self.cluster.topic_ready(name, topic.partitions)

    # -- following the cluster's metadata (called by ClusterView, on its task) ------------------

    def on_controller_changed(self, controller_id: int) -> None:
        self.controller.controller_changed(controller_id)
        self._watch_controller(controller_id)

    def on_broker_configs(self, per_broker: dict[str, str], cluster_default: dict[str, str]) -> None:
        self.admin.apply_broker_configs(per_broker, cluster_default)

    def on_registration_missing(self) -> None:
        if not self.closing:
            log.warning("The registration of this broker (%d) is missing while it is alive; registering again",
                        self.node_id)
            self.session.on_registration_missing()

    def _watch_controller(self, controller_id: int) -> None:
        """Hold a probe connection to the controller (if another broker): when its process is
        gone, remove its nodes so that a new controller is elected without waiting for its
        ZooKeeper session to expire."""
        if self._controller_probe is not None:
            if self._controller_probe[0] == controller_id:
                return
            self._controller_probe[1].cancel()
            self._controller_probe = None
        if controller_id < 0 or controller_id == self.node_id or self.closing:
            return

        async def probe() -> None:
            listener = self.inter_broker_listener
            if await probe_until_refused(lambda: self.cluster.endpoint(controller_id, listener),
                                         lambda: self.controller_id == controller_id and not self.closing):
                log.info("Controller %d refuses connections: its process is gone; electing another now",
                         controller_id)
                assert self.store is not None
                try:
                    await remove_dead_broker(self.store, controller_id, also_controller=True)
                except StoreError as e:
                    log.warning("Could not remove the nodes of controller %d: %s", controller_id, e)

        self._controller_probe = (controller_id, self.loop.create_task(probe(), name="controller-probe"))

    async def on_topic_assignment(self, name: str, assignment: zkdata.TopicAssignment) -> None:
        topic = self.topics.get(name)
        if topic is not None and topic.topic_id != assignment.topic_id:
            self.on_topic_deleted(name)  # deleted and created again under the same name
            topic = None
        if topic is None:
            topic = Topic(name, assignment.topic_id, dict(assignment.partitions),
                          dict(self.cluster.topic_configs.get(name, {})))
            self.topics[name] = topic
        else:
            topic.partitions = dict(assignment.partitions)
        cfg = self.log_config_for(topic)
        logs = self.logs
        assert logs is not None
        gone, new = [], []
        for index, replicas in sorted(topic.partitions.items()):
            part = self.replicas.get(name, index)
            if self.node_id not in replicas:
                if part is not None:  # moved away by a reassignment
                    gone.append(index)
            elif part is None and (name, index) not in self.replicas.offline:  # (its dir failed: not until a restart)
                new.append(index)
        for index in gone:
            self._stop_log_dir_move((name, index), "its replica moved off this broker")
            part = self.replicas.remove(name, index)
            if part is not None:
                self.fetchers.unfollow(part)
                self.on_coordinator_role(part)  # fenced: its groups or transactions are unloaded
            if self.cleaner is not None:
                self.cleaner.on_log_removed((name, index))
            logs.delete_log(name, index)
            log.info("Replica %s-%d moved off this broker; log deleted", name, index)
        if new:
            topic_id = zkdata.encode_topic_id(topic.topic_id)
            # A log left here by an earlier topic of the same name (deleted while this broker
            # was down) is not this topic's: moved aside, and this topic's created empty.
            earlier = []
            for index in new:
                stored = logs.topic_id_of((name, index))
                if stored is not None and stored != topic_id:
                    lg = logs.detach((name, index))
                    if lg is not None:
                        earlier.append((lg, f"it belongs to topic id {stored}, {name} is now {topic_id}"))

            # Creating logs touches the disk: a worker thread does it, for all of them in one
            # go (each log dir fsynced once); they are registered here, on the loop. Their
            # partition.metadata files (two fsyncs each) are written afterwards, in the
            # background, as Kafka flushes them: a partition leads without waiting for them.
            unwritten: list[tuple[Path, tuple[int, int]]] = []

            def open_logs() -> list[Partition]:
                for lg, why in earlier:
                    logs.move_aside(lg, why)
                out = []
                for index, lg in zip(new, logs.create_logs([(name, index, cfg) for index in new])):
                    if logs.record_topic_id(lg, topic_id):
                        st = os.stat(lg.dir)
                        unwritten.append((lg.dir, (st.st_dev, st.st_ino)))
                    part = Partition(name, index, topic.topic_id, lg, self.node_id)
                    if lg.log_end_offset > 0:
                        part.load_producer_state()
                    out.append(part)
                return out

            opened = await self.loop.run_in_executor(None, open_logs)
            if unwritten:
                self._write_topic_ids(unwritten, topic_id)
            if self.topics.get(name) is not topic:
                for part in opened:  # deleted meanwhile: these were never registered
                    part.log.close()
                return
            registered = logs.add_logs([part.log for part in opened])
            for part, lg in zip(opened, registered):
                part.log = lg
                part.isr_writer = self.isr.propose
                part.hw = min(self._saved_hw.pop((name, part.index), 0), lg.log_end_offset)
                self.replicas.add(part)
        for index in sorted(topic.partitions):
            part = self.replicas.get(name, index)
            if part is None:
                continue
            part.removing = list(assignment.removing.get(index, []))
            state = self.cluster.state(name, index)
            if state is not None:
                self.on_partition_state(name, index, state)
        if name == OFFSETS_TOPIC:
            self.groups.num_partitions = len(topic.partitions)
        elif name == TXN_TOPIC:
            self.transactions.num_partitions = len(topic.partitions)

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
            self._stop_log_dir_move((name, p.index), "its topic was deleted")
            self.fetchers.unfollow(p)
            if self.cleaner is not None:
                self.cleaner.on_log_removed((name, p.index))
            self.logs.delete_log(name, p.index)
        log.info("Topic %s deleted; its logs here are gone", name)

    def _stop_log_dir_move(self, tp: tuple[str, int], why: str) -> None:
        if self.log_dir_moves is not None:
            self.log_dir_moves.abort(tp, why)

    # -- log dir failure (Kafka's LogDirFailureChannel and handleLogDirFailure) ------------------

    def on_storage_error(self, d: Path, e: OSError) -> None:
        """An OSError met in log dir `d`. A full disk is answered per request and retried; an
        I/O error, a read-only or vanished file system takes the whole dir offline."""
        if is_log_dir_failure(e) and self.logs is not None and d not in self.logs.offline_dirs:
            self.loop.call_soon(self._fail_log_dir, d, e)  # (not in the middle of an append)

    def _fail_log_dir(self, d: Path, e: OSError) -> None:
        logs = self.logs
        assert logs is not None
        if d in logs.offline_dirs:  # (reported twice before the first report ran)
            return
        why = f"{e.strerror or e} (errno {e.errno})"
        if self.log_dir_moves is not None:
            self.log_dir_moves.on_log_dir_failed(d)
        gone = logs.fail_dir(d, why)
        for tp, _ in gone:
            part = self.replicas.remove(*tp)
            self.replicas.offline[tp] = d
            if self.cleaner is not None:
                self.cleaner.on_log_removed(tp)
            if part is not None:
                self.fetchers.unfollow(part)
                self.on_coordinator_role(part)
        names = [f"{t}-{p}" for t, p in sorted(self.replicas.offline)]
        log.error("Log dir %s failed: %s. It is offline until this broker restarts; its %d partitions here answer "
                  "KAFKA_STORAGE_ERROR: %s%s", d, why, len(gone), ", ".join(names[:10]),
                  " ..." if len(names) > 10 else "")
        if not self.zk_mode and d == self.log_dirs[0]:
            log.error("Log dir %s also holds this broker's metadata store (%s): topics and configs cannot be "
                      "created, changed or deleted until the disk is repaired and the broker restarted", d,
                      METADATA_FILE)
        if logs.online_dirs:
            if self.zk_mode:
                self.loop.create_task(self._report_offline_replicas([tp for tp, _ in gone]),
                                      name="log-dir-event")
            return
        if self.zk_mode:
            log.critical("Every log dir of broker %d is offline (%s): shutting down, as Kafka does, so that the "
                         "other brokers lead its partitions. Repair or replace the disk, then start it again.",
                         self.node_id, ", ".join(map(str, self.log_dirs)))
            self.exit_code = 1
            self.stop()
        else:
            log.critical("The log dir of this broker (%s) is offline: every partition answers KAFKA_STORAGE_ERROR "
                         "until the disk is repaired or replaced and the broker restarted. Other requests are "
                         "still served.", ", ".join(map(str, self.log_dirs)))

    async def _report_offline_replicas(self, tps: list[tuple[str, int]]) -> None:
        """Tell the controller (Kafka's /log_dir_event_notification, with the partitions) so
        that it moves leadership and ISR membership of these partitions off this broker."""
        assert self.store is not None
        data = zkdata.dumps({"version": 1, "broker": self.node_id, "event": 1,
                             "offline_partitions": [[t, p] for t, p in tps]})
        path = zkdata.log_dir_event_path(self.node_id, uuid.uuid4().hex[:12])
        try:
            await self.store.create(path, data)
        except StoreError as e:
            log.error("Could not tell the controller about the offline partitions (%s); they fail over when "
                      "this broker stops", e)

    def on_partition_state(self, topic: str, index: int, state: zkdata.PartitionState) -> None:
        self.controller.on_partition_state(topic, index, state)
        part = self.replicas.get(topic, index)
        t = self.topics.get(topic)
        if part is None or t is None or index not in t.partitions:
            return
        role = part.apply_state(state, t.partitions[index])
        if role == "leader":
            self.fetchers.unfollow(part)
            self.role_log.note("leaderships", "Leading %s (leader epoch %d, ISR %s)", part, state.leader_epoch,
                               state.isr)
        elif role == "follower":
            self.fetchers.follow(part, state.leader, state.leader_epoch)
            if state.leader >= 0:
                self.role_log.note("followings", "Following broker %d for %s (leader epoch %d)", state.leader, part,
                                   state.leader_epoch)
        if role is not None:
            self.on_coordinator_role(part)

    def on_coordinator_role(self, part: Partition) -> None:
        """A partition's role changed: if it is one of the coordinators' internal topics, its
        groups or transactions are loaded here or dropped."""
        if part.topic == OFFSETS_TOPIC:
            self.groups.on_role(part)
        elif part.topic == TXN_TOPIC:
            self.transactions.on_role(part)

    def _on_state_read(self, topic: str, index: int, state: zkdata.PartitionState) -> None:
        self.cluster.apply_state((topic, index), state)

    def shrink_isrs(self) -> None:
        lag = int(self.config.get("replica.lag.time.max.ms"))
        for part in self.replicas.leaders():
            out = part.out_of_sync(lag)
            if out:
                part.propose_isr([r for r in part.isr if r not in out])

    def high_watermarks(self) -> list[tuple[Path, dict[tuple[str, int], int]]]:
        by_dir: dict[Path, dict[tuple[str, int], int]] = {d: {} for d in self.log_dirs}
        for k, p in self.replicas.partitions.items():
            by_dir.setdefault(p.log.dir.parent, {})[k] = p.hw
        return [(d / REPLICATION_OFFSET_CHECKPOINT, hws) for d, hws in by_dir.items()]

    def _flush_partition(self, part: Partition) -> None:
        """flush.messages reached in `part`'s log: a worker thread fdatasyncs its segments (the
        event loop never waits for a disk), then `part.flush_done` on the loop moves the
        recovery point and answers the produces that waited for it. Tracked with the checkpoint
        writes, so that a shutdown waits for it."""
        lg = part.log
        try:
            target, fds = lg.flush_fds()
        except (OSError, StorageError) as e:
            part.flush_done(lg, -1, e)
            return
        fut = self.loop.run_in_executor(None, sync_and_close, fds, True)
        self._background.add(fut)

        def done(f: asyncio.Future[None]) -> None:
            self._background.discard(f)
            part.flush_done(lg, target, None if f.cancelled() else f.exception())

        fut.add_done_callback(done)

    def _write_topic_ids(self, dirs: list[tuple[Path, tuple[int, int]]], topic_id: str) -> None:
        """Write partition.metadata into each of `dirs` (with its inode when created) in a
        worker thread, tracked with the checkpoint writes so that a shutdown waits for it. A
        log deleted meanwhile (even if its partition exists again) is skipped; any other error
        is the log dir's."""
        def write() -> None:
            for d, inode in dirs:
                try:
                    write_topic_id(d, topic_id, inode)
                except FileNotFoundError:  # the log was deleted or moved aside meanwhile
                    continue
                except OSError as e:
                    log.error("Cannot write %s: %s", d / PARTITION_METADATA, e)
                    self.loop.call_soon_threadsafe(self.on_storage_error, d.parent, e)

        fut = self.loop.run_in_executor(None, write)
        self._background.add(fut)
        fut.add_done_callback(self._background.discard)

    def _in_background(self, snapshot: Callable[[], Any], write: Callable[[Any], None],
                       what: str) -> Callable[[], None]:
        """A timer body that takes `snapshot()` on the loop and has a worker thread `write` it
        (skipped while the previous write of the same kind still runs)."""
        running: list[bool] = [False]

        def tick() -> None:
            if running[0]:
                return
            data = snapshot()
            running[0] = True
            fut = self.loop.run_in_executor(None, write, data)
            self._background.add(fut)

            def done(f: asyncio.Future[None]) -> None:
                running[0] = False
                self._background.discard(f)
                if not f.cancelled() and f.exception() is not None:
                    log.warning("%s failed: %s", what, f.exception())

            fut.add_done_callback(done)

        return tick

    async def load_cluster(self, timeout_s: float = 30.0) -> None:
        """Follow the store and wait until this broker's view holds every existing topic and
        partition state (so the first client request sees them)."""
        # Watching a node delivers its state first: once the view's queue has run everything
        # the first deliveries caused (topics, then their assignments, then their partition
        # states), the view holds every topic and partition state there is.
        await self.cluster.start()
        try:
            await asyncio.wait_for(self.cluster.events.drained(), timeout_s)
        except TimeoutError:
            log.warning("The cluster view is still incomplete after %.0f s; serving what is known "
                        "(stray logs are looked for at the next start)", timeout_s)
        else:
            await self._move_strays_aside()
        self.cluster.mark_loaded()

    async def _move_strays_aside(self) -> None:
        """Kafka's stray logs: with the whole metadata known, every log loaded from disk that
        no partition of this broker took (its topic is gone, or the partition is no longer
        assigned here) is moved aside, kept but never served."""
        logs = self.logs
        assert logs is not None
        strays = []
        for tp in list(logs.logs()):
            if self.replicas.get(*tp) is not None:
                continue
            topic = self.topics.get(tp[0])
            if topic is None:
                why = f"topic {tp[0]} does not exist"
            elif tp[1] not in topic.partitions:
                why = f"topic {tp[0]} has no partition {tp[1]}"
            else:
                why = f"the partition's replicas are {topic.partitions[tp[1]]}, not this broker ({self.node_id})"
            lg = logs.detach(tp)
            if lg is not None:
                strays.append((lg, why))
        if strays:
            def move() -> None:
                for lg, why in strays:
                    logs.move_aside(lg, why)

            await self.loop.run_in_executor(None, move)

    async def auto_create_topic(self, name: str) -> Topic:
        return await self.admin.create_topic(
            name, self.config.get("num.partitions"), self.config.get("default.replication.factor"), {}
        )

    # -- endpoints ------------------------------------------------------------------------------

    def endpoints(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        rack = self.config.get("broker.rack")
        for name, host, port in self.config.advertised_listeners():
            if name == listener_name:
                if not host or host in ("0.0.0.0", "::"):  # (advertised_listeners already replaces these)
                    host = self.config.hostname
                if port == 0:
                    port = next(lst.port for lst in self.listeners if lst.name == name)
                return [(self.node_id, host, port, rack)]
        return []

    # -- run ------------------------------------------------------------------------------------

    def start_listeners(self) -> None:
        cfg = self.config
        max_req = cfg.get("socket.request.max.bytes")
        self.quotas = ConnectionQuotas(self.loop, self._connection_limits)
        names = [lst.name for lst in cfg.listeners()]
        if self.inter_broker_listener not in names:
            raise ConfigError(f"inter.broker.listener.name / security.inter.broker.protocol: "
                              f"{self.inter_broker_listener} is not one of the listeners ({', '.join(names)})")
        inter = cfg.protocol_of(self.inter_broker_listener)
        if inter.startswith("SASL") and self.zk_mode:  # (one broker alone has no inter-broker traffic)
            self.inter_broker_sasl = inter_broker_login(cfg, self.inter_broker_listener)
        if inter in ("SSL", "SASL_SSL"):
            self.inter_broker_ssl = tls.client_context(cfg, self.inter_broker_listener)
        for name, host, port in cfg.listeners():
            protocol = cfg.protocol_of(name)
            auth = None
            if protocol.startswith("SASL"):
                mechanisms = [str(m).upper() for m in cfg.for_listener(name, "sasl.enabled.mechanisms")]
                try:
                    auth = sasl.listener_sasl(name, mechanisms, {m: cfg.jaas_config(name, m) for m in mechanisms},
                                              self.scram)
                except sasl.SaslConfigError as e:
                    raise ConfigError(str(e)) from None
                auth.max_receive = int(cfg.get("sasl.server.max.receive.size"))
            context = tls.server_context(cfg, name) if protocol in ("SSL", "SASL_SSL") else None
            try:
                rules = tls.parse_mapping_rules(str(cfg.for_listener(name, "ssl.principal.mapping.rules")))
            except ValueError as e:
                raise ConfigError(f"listener {name}: {e}") from None
            lst = Listener(self.loop, name, host, port, self.dispatcher, max_req, quotas=self.quotas,
                           max_pending=int(cfg.get("queued.max.requests")),
                           backlog=int(cfg.get("socket.listen.backlog.size")), ssl_context=context,
                           principal_rules=rules, sasl=auth, timed=self.dispatcher.metrics.enabled,
                           send_buffer=int(cfg.get("socket.send.buffer.bytes")),
                           receive_buffer=int(cfg.get("socket.receive.buffer.bytes")))
            lst.start()  # bound; accepting starts once the cluster view is loaded
            self.listeners.append(lst)
            if context is not None:
                self._tls_ids[name] = self._tls_identity(cfg, name)

    # -- TLS key stores that change at runtime (listener.name.<l>.ssl.keystore.* by AlterConfigs) --

    def _tls_identity(self, cfg: BrokerConfig, listener: str) -> tuple[Any, ...]:
        """What a listener's TLS context is made of: its store settings and the files' mtimes
        (a store replaced in place is loaded again when its setting is written again)."""
        values = tuple(cfg.for_listener(listener, k) for k in sorted(DYNAMIC_PER_LISTENER))
        stamps = []
        for k in ("ssl.keystore.location", "ssl.truststore.location"):
            path = cfg.for_listener(listener, k)
            try:
                stamps.append(os.stat(path).st_mtime_ns if path else None)
            except OSError:
                stamps.append(None)
        return values + tuple(stamps)

    def check_tls(self, new: BrokerConfig) -> str | None:
        """Why `new` cannot serve a TLS listener whose stores it changes (None: it can)."""
        for lst in self.listeners:
            if lst.ssl_context is None or self._tls_identity(new, lst.name) == self._tls_ids.get(lst.name):
                continue
            try:
                tls.server_context(new, lst.name)
            except (tls.TlsConfigError, ssl.SSLError, OSError, ValueError) as e:
                return f"listener {lst.name}: {e}"
        return None

    def refresh_tls(self) -> None:
        """Load the TLS listeners' stores again where the config (or a store file) changed:
        new connections use the new certificate, established ones keep theirs."""
        for lst in self.listeners:
            if lst.ssl_context is None:
                continue
            ident = self._tls_identity(self.config, lst.name)
            if ident == self._tls_ids.get(lst.name):
                continue
            try:
                lst.ssl_context = tls.server_context(self.config, lst.name)
            except (tls.TlsConfigError, ssl.SSLError, OSError, ValueError) as e:
                log.error("Listener %s keeps its TLS key store: the new one does not load (%s)", lst.name, e)
                continue
            self._tls_ids[lst.name] = ident
            log.info("Listener %s: TLS key and trust stores loaded again; new connections use them", lst.name)

    async def start_metrics(self) -> None:
        """Listen on prometheus.listener (when set) for GET /metrics."""
        where = self.config.prometheus_listener()
        if where is None:
            return
        self.dispatcher.metrics.enabled = True
        host, port = where
        exposition = Exposition(ScrapeSources(
            node_id=self.node_id, replicas=self.replicas, topics=self.topics, listeners=self.listeners,
            requests=self.dispatcher.metrics, isr=self.isr, controller=self.controller, cluster=self.cluster,
            groups=self.groups, purgatory=self.purgatory, loop_monitor=self.monitor))
        server = MetricsServer(self.loop, host, port, exposition.render)
        try:
            await server.start()
        except OSError as e:
            why = os.strerror(e.errno) if e.errno else str(e)
            raise ConfigError(f"prometheus.listener={host}:{port}: cannot listen there: {why}") from None
        self.metrics_server = server
        log.info("Serving metrics at http://%s:%d/metrics", host or "0.0.0.0", server.port)

    def _connection_limits(self) -> Limits:
        """The connection limits in force (max.connections* are dynamic: the config of now)."""
        cfg = self.config
        if self._limits is None or self._limits[0] is not cfg:
            self._limits = (cfg, Limits(
                max_connections=int(cfg.get("max.connections")), max_per_ip=int(cfg.get("max.connections.per.ip")),
                per_ip_overrides=parse_overrides(cfg.get("max.connections.per.ip.overrides") or ""),
                idle_ms=int(cfg.get("connections.max.idle.ms")),
                max_request_bytes_queued=int(cfg.get("queued.max.request.bytes"))))
        return self._limits[1]

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

        def now_ms() -> int:
            return int(time.time() * 1000)

        self._every(self.config.get("log.retention.check.interval.ms"), lambda: logs.cleanup(now_ms()), "retention")
        self._every(1000, lambda: logs.release_due(now_ms()), "deleted files")
        # flush_due also fsyncs rolled segments so the recovery point advances; it is cheap
        # when nothing is due, so it runs at least every second whatever the scheduler says.
        # The data it would fdatasync (a rolled segment: up to segment.bytes of dirty pages) is
        # synced first in a worker thread; flush_due then runs on the loop with little left.
        flush_every = min(self.config.get("log.flush.scheduler.interval.ms"), 1000)
        presyncing = False

        def scheduled_flush() -> None:
            nonlocal presyncing
            if presyncing:
                return
            fds = logs.presync_due(now_ms())
            if not fds:
                logs.flush_due(now_ms())
                return
            presyncing = True

            def synced(_: object) -> None:
                nonlocal presyncing
                presyncing = False
                try:
                    logs.flush_due(now_ms())
                except Exception:
                    log.exception("scheduled flush failed")

            try:
                self.loop.run_in_executor(None, sync_and_close, fds).add_done_callback(synced)
            except RuntimeError:  # (the executor is shutting down with the broker)
                presyncing = False
                for fd in fds:
                    os.close(fd)

        self._every(flush_every, scheduled_flush, "scheduled flush")
        self._every(self.config.get("log.flush.offset.checkpoint.interval.ms"),
                    self._in_background(logs.checkpoint_snapshot, write_checkpoints, "checkpoint"), "checkpoint")
        self._every(self.config.get("replica.high.watermark.checkpoint.interval.ms"),
                    self._in_background(self.high_watermarks, _write_checkpoints, "high watermark checkpoint"),
                    "high watermark checkpoint")
        self._every(max(int(self.config.get("replica.lag.time.max.ms")) // 2, 10), self.shrink_isrs, "ISR check")
        self._every(1000, self.role_log.flush, "role change summary")
        self._every(1000, self.isr.flush_log, "ISR change summary")
        if self.cleaner is not None:
            self.cleaner.start()
        self.transactions.start_timers(self.loop)

    async def run(self) -> int:
        self.loop = asyncio.get_running_loop()
        self.purgatory = self.replicas.purgatory = Purgatory(self.loop)
        self._stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stopping.set)
        self.monitor = LoopMonitor(self.loop)
        self.monitor.start()
        t0 = self._started = time.monotonic()
        await self.open_storage()
        await self.start_metrics()  # (first: a port it cannot have stops the start before clients connect)
        self.start_listeners()
        assert self.store is not None
        self.session.install()
        self.controller.start()
        await self._retrying("registering", self.session.register)
        await self._retrying("loading the cluster metadata", self.load_cluster)
        if self.log_dir_moves is not None and self.logs is not None:
            self.log_dir_moves.resume(self.logs.interrupted_moves)
        await self._retrying("reading the SCRAM secret", lambda: self.scram.load_secret(self.entity_configs.store))
        await self._retrying("loading user and client configs", self.entity_configs.start)
        if self.authorizer is not None:
            await self._retrying("loading the ACLs", self.authorizer.start)
        await self.groups.startup()
        await self.transactions.startup()
        for lst in self.listeners:
            lst.serve()
        self.start_timers()
        self.session.start()
        where = ", ".join(f"{lst.name}://{lst.host or '0.0.0.0'}:{lst.port}" for lst in self.listeners)
        log.info(
            "Samsa broker %d started (cluster %s, %d partitions in %s, listeners %s) in %.0f ms",
            self.node_id, self.cluster_id, len(self.replicas.partitions),
            ",".join(map(str, self.log_dirs)), where, (time.monotonic() - t0) * 1000,
        )
        await self._stopping.wait()
        log.info("Samsa broker %d shutting down", self.node_id)
        _stall_report(SHUTDOWN_STALL_S)
        await self.controlled_shutdown()
        await self.shutdown()
        log.info("Samsa broker %d stopped %s", self.node_id, "cleanly" if not self.exit_code else
                 "(its log dirs failed)")
        return self.exit_code

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships to other in-sync replicas and
        wait until it has (each attempt waits controlled.shutdown.retry.backoff.ms)."""
        self.closing = True
        self.controller.closing = True
        if not self.zk_mode or not self.config.get_bool("controlled.shutdown.enable") or self.store is None:
            return

        def done() -> bool:
            # Leadership can move only to an in-sync replica that is not stopping too.
            others = set(self.cluster.brokers) - self.cluster.shutting_down - {self.node_id}
            return not any(set(p.isr) & others for p in self.replicas.leaders())

        if done():
            return
        t0 = time.monotonic()
        try:
            await self.store.create(zkdata.controlled_shutdown_path(self.node_id), b"", ephemeral=True)
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

    async def shutdown(self) -> None:
        self.closing = True
        for t in self._timers:
            t.cancel()
        self.session.stop()
        self.fetchers.shutdown()
        if self._controller_probe is not None:
            self._controller_probe[1].cancel()
        if self.isr is not None:
            self.isr.close()
        if self.controller is not None:
            await self.controller.stop()
        if self.cluster is not None:
            await self.cluster.stop()
        if self.entity_configs is not None:
            await self.entity_configs.stop()
        if self.authorizer is not None:
            await self.authorizer.stop()
        for lst in self.listeners:
            lst.close()
        if self.metrics_server is not None:
            self.metrics_server.close()
        self.groups.shutdown()
        self.transactions.shutdown()
        if self.cleaner is not None:
            await self.cleaner.shutdown()
        if self.log_dir_moves is not None:
            await self.log_dir_moves.shutdown()
        if self._background:  # a checkpoint being written: the final ones must come after it
            await asyncio.wait(list(self._background))
        if self.purgatory is not None:
            self.purgatory.close()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _write_checkpoints, self.high_watermarks())
        if self.logs is not None:
            # Flushing every log is disk work (11 s for 11,000 partitions): a worker thread's,
            # while the loop still runs the store's last callbacks and the loop-lag monitor.
            await loop.run_in_executor(None, self.logs.shutdown)
        if self.store is not None:
            await self.store.close()
        if self.monitor is not None:
            self.monitor.stop()


def inter_broker_listener(config: BrokerConfig) -> str:
    """Kafka's rule: inter.broker.listener.name, else the listener named by
    security.inter.broker.protocol when that is set; Samsa's default otherwise is the first
    listener (Kafka's would be PLAINTEXT)."""
    name = config.get("inter.broker.listener.name")
    if name:
        return str(name).upper()
    if config.is_set("security.inter.broker.protocol"):
        return str(config.get("security.inter.broker.protocol")).upper()
    return config.listeners()[0].name if config.listeners() else "PLAINTEXT"


def inter_broker_login(config: BrokerConfig, listener: str) -> SaslLogin:
    """What this broker authenticates with towards the others on a SASL inter-broker listener:
    sasl.mechanism.inter.broker.protocol, with the username and password of that listener's
    JAAS config for the mechanism (Kafka's rule)."""
    mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
    enabled = [str(m).upper() for m in config.for_listener(listener, "sasl.enabled.mechanisms")]
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if mechanism not in CLIENT_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism}: brokers authenticate to each other with "
                          f"{', '.join(CLIENT_MECHANISMS)} (GSSAPI, Kafka's default, is not supported)")
    if mechanism not in enabled:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the inter-broker "
                          f"listener {listener} (sasl.enabled.mechanisms: {', '.join(enabled) or 'none'})")
    text = config.jaas_config(listener, mechanism)
    try:
        _, options = sasl.parse_jaas(text or "")
    except sasl.SaslConfigError as e:
        raise ConfigError(f"{key}: {e}") from None
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"{key} needs username=\"...\" password=\"...\": what this broker logs in with to the "
                          "other brokers")
    return SaslLogin(mechanism, options["username"], options["password"])


def _write_checkpoints(snapshot: list[tuple[Path, dict[tuple[str, int], int]]]) -> None:
    for path, offsets in snapshot:
        try:
            write_offsets(path, offsets)
        except OSError as e:
            log.warning("Could not write %s: %s", path, e.strerror or e)


# A shutdown is bounded by controlled.shutdown.* and the flush of the logs; one still running
# after this long is stuck somewhere, and every thread's stack says where.
SHUTDOWN_STALL_S = 15.0


def _stall_report(after_s: float) -> None:
    try:
        sys.stderr.flush()
        faulthandler.dump_traceback_later(after_s, file=sys.stderr)
    except (ValueError, OSError, AttributeError):
        pass  # (no real stderr: nothing to write the report to)


def run_broker(config: BrokerConfig) -> int:
    broker = Broker(config)
    try:
        try:
            import uvloop
        except ImportError:
            return asyncio.run(broker.run())
        return uvloop.run(broker.run())
    finally:
        faulthandler.cancel_dump_traceback_later()
