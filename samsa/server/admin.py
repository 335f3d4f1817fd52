"""Topic and config administration: the one writer of topic metadata on this broker.

Every change is written to the metadata store first (Kafka's layout, `metadata.zkdata`), then
applied locally: logs are created or deleted and partitions added. With one broker every
replica is this broker; the replica assignment below already spreads replicas round-robin
across the live brokers so the cluster issue can reuse it.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from samsa.config import ConfigError, validate_topic_configs
from samsa.metadata import zkdata
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.topics import Topic, validate_topic_name

if TYPE_CHECKING:
    from samsa.server.broker import Broker

log = logging.getLogger("samsa.admin")


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int, start: int = 0) -> dict[int, list[int]]:
    """Round-robin replica placement: partition p leads on brokers[(start+p) % n], followers next."""
    n = len(brokers)
    return {
        p: [brokers[(start + p + i) % n] for i in range(replication_factor)] for p in range(num_partitions)
    }


class AdminManager:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def live_brokers(self) -> list[int]:
        return [self.broker.node_id]

    def check_topic_configs(self, configs: dict[str, str]) -> dict[str, str]:
        try:
            return validate_topic_configs(configs, self.broker.config)
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def create_topic(
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
        if name in broker.topics:
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
            assignment = assign_replicas(live, num_partitions, replication_factor)
        configs = self.check_topic_configs(configs)
        topic = Topic(name, uuid.uuid4(), assignment, configs)
        if validate_only:
            return topic
        store = broker.store
        assert store is not None
        if configs:
            store.create(zkdata.topic_config_path(name), zkdata.encode_config(configs))
        store.create(zkdata.topic_path(name), zkdata.TopicAssignment(topic.topic_id, assignment).encode())
        for p, reps in assignment.items():
            state = zkdata.PartitionState(leader=reps[0], leader_epoch=0, isr=list(reps))
            store.create(zkdata.partition_state_path(name, p), state.encode())
        broker.host_topic(topic)
        log.info("Created topic %s with %d partitions, replication factor %d%s", name, len(assignment),
                 len(assignment[0]), f", configs {configs}" if configs else "")
        return topic

    def delete_topic(self, name: str) -> None:
        broker = self.broker
        topic = broker.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        if not broker.config.get("delete.topic.enable"):
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED, "delete.topic.enable is false on this broker")
        store = broker.store
        assert store is not None
        store.delete(zkdata.topic_path(name), recursive=True)
        if store.get(zkdata.topic_config_path(name)) is not None:
            store.delete(zkdata.topic_config_path(name))
        del broker.topics[name]
        assert broker.logs is not None
        for p in broker.replicas.remove_topic(name):
            broker.logs.delete_log(name, p.index)
        log.info("Deleted topic %s", name)

    def create_partitions(self, name: str, count: int, assignment: list[list[int]] | None, validate_only: bool) -> None:
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
            new = {p: r for p, r in assign_replicas(live, count, rf).items() if p >= current}
        if validate_only:
            return
        topic.partitions.update(new)
        store = broker.store
        assert store is not None
        store.set(zkdata.topic_path(name), zkdata.TopicAssignment(topic.topic_id, topic.partitions).encode())
        for p, reps in new.items():
            store.create(zkdata.partition_state_path(name, p),
                         zkdata.PartitionState(leader=reps[0], leader_epoch=0, isr=list(reps)).encode())
        broker.host_topic(topic)
        log.info("Topic %s now has %d partitions", name, count)

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool) -> None:
        broker = self.broker
        topic = broker.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist")
        configs = self.check_topic_configs(configs)
        if validate_only:
            return
        store = broker.store
        assert store is not None
        path = zkdata.topic_config_path(name)
        if store.get(path) is None:
            store.create(path, zkdata.encode_config(configs))
        else:
            store.set(path, zkdata.encode_config(configs))
        topic.configs = configs
        cfg = broker.log_config_for(topic)
        for p in topic.partitions:
            part = broker.replicas.get(name, p)
            if part is not None:
                part.log.update_config(cfg)
        log.info("Updated configs of topic %s: %s", name, configs or "(defaults)")

    def set_broker_configs(self, entity: str, changes: dict[str, str | None], validate_only: bool) -> None:
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
        if validate_only:
            return
        store = broker.store
        assert store is not None
        path = zkdata.broker_config_path(entity or zkdata.DEFAULT_BROKER)
        if store.get(path) is None:
            store.create(path, zkdata.encode_config(stored))
        else:
            store.set(path, zkdata.encode_config(stored))
        self.apply_broker_configs()
        log.info("Updated dynamic configs of %s: %s", f"broker {entity}" if entity else "all brokers", changes)

    def apply_broker_configs(self) -> None:
        """Load dynamic broker configs from the store into the config and the logs."""
        broker = self.broker
        store = broker.store
        assert store is not None
        node = store.get(zkdata.broker_config_path(str(broker.node_id)))
        default = store.get(zkdata.broker_config_path(zkdata.DEFAULT_BROKER))
        per_broker = zkdata.decode_config(node[0]) if node else {}
        cluster = zkdata.decode_config(default[0]) if default else {}
        cfg = broker.config
        changes_b: dict[str, str | None] = {k: None for k in cfg.dynamic_broker_configs()} | dict(per_broker)
        changes_d: dict[str, str | None] = {k: None for k in cfg.dynamic_default_configs()} | dict(cluster)
        try:
            broker.config = cfg.with_dynamic(changes_b, default=changes_d)
        except ConfigError as e:
            log.error("ignoring stored dynamic broker configs: %s", e)
            return
        for topic in broker.topics.values():
            lc = broker.log_config_for(topic)
            for p in topic.partitions:
                part = broker.replicas.get(topic.name, p)
                if part is not None:
                    part.log.update_config(lc)
