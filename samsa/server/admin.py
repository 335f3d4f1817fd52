"""Topic and config administration on any broker: requests become writes to the store.

As in Kafka's ZooKeeper mode, a broker handling CreateTopics writes the topic's replica
assignment (Kafka's rack-aware placement over the live brokers) and config; the controller
sees the new topic and gives its partitions leaders; every broker's view then creates the
logs it hosts. DeleteTopics writes /admin/delete_topics/<t> for the controller. The
handlers wait (up to the request's timeout) until this broker's view shows the result, so a
client that gets an answer can use the topic at once.
"""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

from samsa.config import BrokerConfig, ConfigError, validate_topic_configs
from samsa.controller.decisions import AssignmentError
from samsa.controller.decisions import assign_replicas as kafka_assign_replicas
from samsa.metadata import zkdata
from samsa.metadata.store import MetadataStore, NodeExists, NoNode, StoreError
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.cluster import ClusterView
from samsa.server.replica_manager import ReplicaManager
from samsa.server.topics import Topic, validate_topic_name
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import LogManager


class AdminHost(Protocol):
    """What topic and config administration uses of its broker."""

    node_id: int
    config: BrokerConfig
    store: MetadataStore | None
    topics: dict[str, Topic]
    replicas: ReplicaManager
    logs: LogManager | None

    @property
    def cluster(self) -> ClusterView: ...

    def log_config_for(self, topic: Topic) -> LogConfig: ...

    def check_tls(self, new: BrokerConfig) -> str | None: ...

    def refresh_tls(self) -> None: ...

log = logging.getLogger("samsa.admin")


class AdminManager:
    def __init__(self, broker: AdminHost) -> None:
        self.broker = broker

    def live_brokers(self) -> list[int]:
        live = self.broker.cluster.live_brokers
        return live or [self.broker.node_id]

    def place(self, num_partitions: int, replication_factor: int, start_partition: int = 0,
              existing: dict[int, list[int]] | None = None) -> dict[int, list[int]]:
        """Kafka's replica placement over the live brokers (rack-aware when they have racks)."""
        racks = self.broker.cluster.racks() or {self.broker.node_id: self.broker.config.get("broker.rack")}
        if any(r is None for r in racks.values()) and any(r is not None for r in racks.values()):
            racks = {b: None for b in racks}  # mixed: place without racks, as --disable-rack-aware
        try:
            if start_partition == 0:
                return kafka_assign_replicas(racks, num_partitions, replication_factor)
            first = (existing or {}).get(0, [])
            start = sorted(racks).index(first[0]) if first and first[0] in racks else None
            return kafka_assign_replicas(racks, num_partitions, replication_factor, start_index=start,
                                         start_partition_id=start_partition)
        except AssignmentError as e:
            raise KafkaError(e.error_code, str(e)) from None

    def check_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        try:
            return validate_topic_configs(configs, self.broker.config)
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str],
        assignment: dict[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> Topic:
        broker = self.broker
        validate_topic_name(name)
        store = broker.store
        assert store is not None
        if name in broker.topics or await store.get(zkdata.topic_path(name)) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        collision = name.replace(".", "_")
        for other in broker.topics:
            if other.replace(".", "_") == collision:
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic '{other}' ('.' and '_' collide)")
        live = self.live_brokers()
        if assignment:
            parts = sorted(assignment)
            if parts != list(range(len(parts))):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be numbered 0..n-1")
            for p, reps in assignment.items():
                if not reps or len(set(reps)) != len(reps) or any(r not in live for r in reps):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"partition {p}: replicas {reps} must be distinct live brokers {live}")
        else:
            if num_partitions == -1:
                num_partitions = broker.config.get("num.partitions")
            if replication_factor == -1:
                replication_factor = broker.config.get("default.replication.factor")
            if num_partitions <= 0:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            if replication_factor > len(live):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Replication factor: {replication_factor} larger than available brokers: {len(live)}.",
                )
            assignment = self.place(num_partitions, replication_factor)
        configs = self.check_topic_configs(configs)
        topic = Topic(name, uuid.uuid4(), assignment, configs)
        if validate_only:
            return topic
        try:
            # Kafka writes the topic's config node always, empty when there are no overrides.
            await self._put(zkdata.topic_config_path(name), zkdata.encode_config(configs))
            await store.create(zkdata.topic_path(name), zkdata.TopicAssignment(topic.topic_id, assignment).encode())
        except NodeExists:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        except StoreError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"could not write topic {name}: {e}") from None
        log.info("Created topic %s with %d partitions, replication factor %d%s", name, len(assignment),
                 len(assignment[0]), f", configs {configs}" if configs else "")
        return topic

    async def delete_topic(self, name: str) -> None:
        broker = self.broker
        topic = broker.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        if not broker.config.get("delete.topic.enable"):
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
        store = broker.store
        assert store is not None
        try:
            await store.create(zkdata.delete_topic_path(name), b"")
        except NodeExists:
            pass  # already queued
        except StoreError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"could not delete topic {name}: {e}") from None
        log.info("Topic %s marked for deletion", name)

    async def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None,
                                validate_only: bool) -> None:
        broker = self.broker
        topic = broker.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        live = self.live_brokers()
        rf = topic.replication_factor
        if assignment:
            if len(assignment) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignment)} assignments provided.")
            new = {current + i: list(r) for i, r in enumerate(assignment)}
            for p, reps in new.items():
                if len(reps) != rf or len(set(reps)) != rf or any(r not in live for r in reps):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"partition {p}: replicas {reps} must be {rf} distinct live brokers")
        else:
            if rf > len(live):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {rf} larger than available brokers: {len(live)}.")
            new = {p: r for p, r in self.place(count - current, rf, current, topic.partitions).items() if p >= current}
        if validate_only:
            return
        store = broker.store
        assert store is not None
        node = await store.get(zkdata.topic_path(name))
        if node is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        current_assignment = zkdata.TopicAssignment.decode(node[0])
        current_assignment.partitions.update(new)
        try:
            await store.set(zkdata.topic_path(name), current_assignment.encode(), node[1])
        except StoreError as e:
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"the topic changed meanwhile ({e}); retry") from None
        log.info("Topic %s now has %d partitions", name, count)

    async def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        broker = self.broker
        topic = broker.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        configs = self.check_topic_configs(configs)
        if validate_only:
            return
        store = broker.store
        assert store is not None
        await self._put(zkdata.topic_config_path(name), zkdata.encode_config(configs))
        topic.configs = configs
        cfg = broker.log_config_for(topic)
        for p in topic.partitions:
            part = broker.replicas.get(name, p)
            if part is not None:
                part.log.update_config(cfg)
        log.info("Updated configs of topic %s: %s", name, configs or "(defaults)")

    async def set_broker_configs(self, entity: str, changes: dict[str, str | None], validate_only: bool) -> None:
        """Apply dynamic broker config changes (None removes a key) for broker `entity` ("" = all)."""
        broker = self.broker
        if entity and entity != str(broker.node_id):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"broker {entity} is not this broker ({broker.node_id})")
        try:
            if entity:
                new = broker.config.with_dynamic(changes)
                stored = new.dynamic_broker_configs()
            else:
                new = broker.config.with_dynamic(default=changes)
                stored = new.dynamic_default_configs()
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        problem = broker.check_tls(new)  # a new key store must load before it is stored
        if problem:
            raise KafkaError(ErrorCode.INVALID_CONFIG, problem)
        if validate_only:
            return
        store = broker.store
        assert store is not None
        key = entity or zkdata.DEFAULT_BROKER
        await self._put(zkdata.broker_config_path(key), zkdata.encode_config(stored))
        broker.cluster.broker_configs[key] = dict(stored)
        self.apply_broker_configs(broker.cluster.broker_configs.get(str(broker.node_id), {}),
                                  broker.cluster.broker_configs.get(zkdata.DEFAULT_BROKER, {}))
        log.info("Updated dynamic configs of %s: %s", f"broker {entity}" if entity else "all brokers", changes)

    async def _put(self, path: str, data: bytes) -> None:
        """Create or overwrite a config node."""
        store = self.broker.store
        assert store is not None
        try:
            await store.set(path, data)
        except NoNode:
            try:
                await store.create(path, data)
            except NodeExists:
                await store.set(path, data)

    def apply_broker_configs(self, per_broker: dict[str, str], cluster: dict[str, str]) -> None:
        """Apply the dynamic broker configs stored for this broker and for all brokers (as the
        cluster view last read them) to the config and the logs."""
        broker = self.broker
        cfg = broker.config
        changes_b: dict[str, str | None] = {k: None for k in cfg.dynamic_broker_configs()} | dict(per_broker)
        changes_d: dict[str, str | None] = {k: None for k in cfg.dynamic_default_configs()} | dict(cluster)
        try:
            broker.config = cfg.with_dynamic(changes_b, default=changes_d)
        except ConfigError as e:
            log.error("ignoring stored dynamic broker configs: %s", e)
            return
        broker.refresh_tls()
        if broker.logs is not None:
            broker.logs.recovery_threads = int(broker.config.get("num.recovery.threads.per.data.dir"))
        for topic in broker.topics.values():
            lc = broker.log_config_for(topic)
            for p in topic.partitions:
                part = broker.replicas.get(topic.name, p)
                if part is not None:
                    part.log.update_config(lc)
