"""Admin APIs through confluent-kafka's AdminClient against a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient


def admin(b: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap})


def produce_n(b: BrokerProcess, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 1})
    for i in range(n):
        p.produce(topic, b"%d" % i, partition=partition)
    assert p.flush(10) == 0


def test_create_partitions_and_describe_cluster(broker: BrokerProcess, topic_name: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    a.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(10)
    md = a.list_topics(topic_name, timeout=10)
    assert sorted(md.topics[topic_name].partitions) == [0, 1, 2, 3, 4]
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        a.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(10)
    cluster = a.describe_cluster().result(10)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0


def test_delete_records_moves_log_start(broker: BrokerProcess, topic_name: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    produce_n(broker, topic_name, 10)
    tp = TopicPartition(topic_name, 0, 4)
    result = a.delete_records([tp])[tp].result(10)
    assert result.low_watermark == 4
    earliest = a.list_offsets({TopicPartition(topic_name, 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result(10).offset == 4


def test_list_offsets_max_timestamp(broker: BrokerProcess, topic_name: str) -> None:
    """ListOffsets MAX_TIMESTAMP (KIP-734): the offset of the record with the largest timestamp
    (the first such record; tests/compat/test_vs_kafka.py checks it inside one batch)."""
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    tp = TopicPartition(topic_name, 0)
    empty = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert empty.offset == -1
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, ts in enumerate([1_700_000_001_000, 1_700_000_009_000, 1_700_000_005_000]):
        p.produce(topic_name, b"%d" % i, partition=0, timestamp=ts)
        assert p.flush(10) == 0  # one batch per record
    found = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert (found.offset, found.timestamp) == (1, 1_700_000_009_000)


def test_list_offsets_earliest_local_and_latest_tiered(broker: BrokerProcess, topic_name: str) -> None:
    """KIP-1005's EARLIEST_LOCAL (-4) and LATEST_TIERED (-5), ListOffsets v9, and KIP-1023's
    EARLIEST_PENDING_UPLOAD (-6), v11, on a broker without
    tiered storage: the log start offset, and no offset at all (-1, no error), as Kafka answers
    (its kafka-get-offsets --time -5 then prints nothing for the partition, not the end)."""
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    produce_n(broker, topic_name, 10)
    tp = TopicPartition(topic_name, 0, 3)
    assert a.delete_records([tp])[tp].result(10).low_watermark == 3
    with RawClient(broker.bootstrap) as c:
        r = c.request(2, 9, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic_name, "partitions": [
            {"partition_index": 0, "timestamp": ts} for ts in (-4, -5, -1)]}]})
    got = [(p.error_code, p.offset, p.timestamp, p.leader_epoch) for p in r.topics[0].partitions]
    assert got[0][:3] == (0, 3, -1) and got[0][3] >= 0
    assert got[1] == (0, -1, -1, -1)
    assert got[2][:2] == (0, 10)
    # v11 (KIP-1023): EARLIEST_PENDING_UPLOAD (-6), none without tiered storage; v10's timeout bounds
    # a remote lookup there is none of
    with RawClient(broker.bootstrap) as c:
        r = c.request(2, 11, {"replica_id": -1, "isolation_level": 0, "timeout": 100, "topics": [
            {"name": topic_name, "partitions": [{"partition_index": 0, "timestamp": ts} for ts in (-6, -4)]}]})
    got = [(p.error_code, p.offset, p.timestamp, p.leader_epoch) for p in r.topics[0].partitions]
    assert got[0] == (0, -1, -1, -1) and got[1][:3] == (0, 3, -1)


def test_topic_configs_describe_and_incremental_alter(broker: BrokerProcess, topic_name: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1, config={"retention.ms": "60000"})])[topic_name].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    configs = a.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == "60000" and not configs["retention.ms"].is_default
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "1073741824" and configs["segment.bytes"].is_default
    change = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([change])[change].result(10)
    configs = a.describe_configs([res])[res].result(10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000"
    bad = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        a.incremental_alter_configs([bad])[bad].result(10)


def test_incremental_append_and_subtract_start_from_the_default(broker: BrokerProcess, topic_name: str) -> None:
    """APPEND to a list setting the topic does not set itself extends the setting's default (as
    Kafka's ConfigAdminManager): cleanup.policy becomes "delete,compact", not "compact" (found
    with Kafka's Java Admin, tests/compat/test_java_clients_data.py). APPEND or SUBTRACT on a
    setting that is not a list is INVALID_CONFIG."""
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)

    def alter(name: str, value: str, op: AlterConfigOpType) -> None:
        change = ConfigResource(ConfigResource.Type.TOPIC, topic_name, incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        a.incremental_alter_configs([change])[change].result(10)

    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)
    assert a.describe_configs([res])[res].result(10)["cleanup.policy"].value == "delete,compact"
    alter("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
    assert a.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"
    for op in (AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
        with pytest.raises(KafkaException, match="INVALID_CONFIG"):
            alter("retention.ms", "1000", op)


def test_broker_dynamic_config_survives_restart(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    a = admin(b)
    change = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([change])[change].result(10)
    b.restart()
    a = admin(b)
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = a.describe_configs([res])[res].result(10)
    assert configs["log.retention.ms"].value == "123456"
    assert configs["log.retention.ms"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["log.segment.bytes"].is_default
    readonly = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry("listeners", "PLAINTEXT://:1", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        a.incremental_alter_configs([readonly])[readonly].result(10)


def test_replication_throttle_configs_are_known_broker_configs(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """The three broker-level throttles Kafka's kafka-reassign-partitions deletes at --verify
    (IncrementalAlterConfigs DELETE, set or not): each is a known dynamic broker config, so the
    deletion succeeds (replica.alter.log.dirs.io.max.bytes.per.second was refused as unknown)."""
    b = broker_factory()
    a = admin(b)
    names = ["leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second"]
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry(n, "1000000", incremental_operation=AlterConfigOpType.SET) for n in names])
    a.incremental_alter_configs([res])[res].result(10)
    described = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = a.describe_configs([described])[described].result(10)
    assert [(configs[n].value, configs[n].source) for n in names] == [
        ("1000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)] * 3
    for _ in range(2):  # (the second time none is set: deleting is still fine)
        res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
            ConfigEntry(n, None, incremental_operation=AlterConfigOpType.DELETE) for n in names])
        a.incremental_alter_configs([res])[res].result(10)
    configs = a.describe_configs([described])[described].result(10)
    assert all(configs[n].is_default for n in names)


def test_auto_create_off_means_unknown_topic(broker_factory, topic_name: str) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(**{"auto.create.topics.enable": "false"})
    with RawClient(b.bootstrap) as c:
        md = c.request(3, 12, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": True})
        assert md.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    b2 = broker_factory(**{"num.partitions": "4"})
    with RawClient(b2.bootstrap) as c:
        md = c.request(3, 12, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": True})
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 4


def test_delete_topic_removes_its_data(broker: BrokerProcess, topic_name: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    produce_n(broker, topic_name, 5)
    a.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in a.list_topics(timeout=10).topics
    assert not list(broker.log_dir.glob(f"{topic_name}-*"))
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    low, high = _watermarks(broker, topic_name)
    assert (low, high) == (0, 0)


def _watermarks(b: BrokerProcess, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_metadata_by_topic_id_as_the_java_admin_asks(broker: BrokerProcess, topic_name: str) -> None:
    """The Admin's describeTopics by id sends Metadata v12 with the ids and "" for the names:
    the ids count, an unknown one is UNKNOWN_TOPIC_ID with its id echoed (the Admin reads the
    errors by id and fails on a zero id). v10-11 carry the field but may not use it
    (INVALID_REQUEST), as in Kafka."""
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    with RawClient(broker.bootstrap) as c:
        def ask(version: int, tid: bytes) -> Any:
            return c.request(3, version, {"topics": [{"name": "", "topic_id": tid}], "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False}).topics[0]
        known = bytes(c.request(3, 12, {"topics": [{"name": topic_name}], "allow_auto_topic_creation": False,
                                         "include_topic_authorized_operations": False}).topics[0].topic_id)
        found = ask(12, known)
        assert (found.error_code, found.name, len(found.partitions)) == (0, topic_name, 1)
        unknown = ask(12, b"\x01" * 16)
        assert (unknown.error_code, unknown.name, bytes(unknown.topic_id)) == (100, None, b"\x01" * 16)
        assert ask(10, known).error_code == 42


def test_delete_records_of_a_compacted_topic_is_a_policy_violation(broker: BrokerProcess, topic_name: str) -> None:
    a = admin(broker)
    a.create_topics([NewTopic(topic_name, 1, 1, config={"cleanup.policy": "compact"})])[topic_name].result(10)
    produce_n(broker, topic_name, 3)
    tp = TopicPartition(topic_name, 0, 2)
    with pytest.raises(KafkaException, match="POLICY_VIOLATION"):
        a.delete_records([tp])[tp].result(10)
