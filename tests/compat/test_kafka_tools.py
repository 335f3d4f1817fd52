"""Apache Kafka's own command-line tools (Kafka 4.4: kafka-topics, kafka-console-producer and
-consumer, kafka-consumer-groups, kafka-configs, the perf tests, kafka-get-offsets,
kafka-delete-records, kafka-log-dirs, kafka-reassign-partitions between log dirs) against one
Samsa broker, as an operator runs them (tests/compat/kafkatools.py: `java -cp <tools jars> <MainClass>`).

Each test checks the tool's own output where its format is what people script against, and
checks the change itself from outside with confluent-kafka (AdminClient, a consumer). A JVM
starts in 1.5-3 s on 2 loaded cores, so each test runs only a handful of tools.
kafka-log-dirs needs DescribeLogDirs, which Samsa serves since these tests (as
kafka-reassign-partitions does). The cluster-only tools (leader election, reassignments, ACLs, SCRAM users, transactions) are in
tests/cluster/test_kafka_tools_cluster.py.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import (
    Rec,
    as_recs,
    base_timestamp_ms,
    ck_admin,
    ck_create_topic,
    ck_list_offset,
    ck_produce,
    ck_producer,
    ck_read,
    make_records,
)
from tests.compat.kafkatools import KafkaTools

TOPIC_HEADER = re.compile(r"^Topic: (\S+)\tTopicId: ([A-Za-z0-9_-]{22})\tPartitionCount: (\d+)\t"
                          r"ReplicationFactor: (\d+)\tConfigs: (.*)$")
PARTITION_LINE = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+|none)\tReplicas: ([\d,]*)\t"
                            r"Isr: ([\d,]*)(\t.*)?$")


def consume(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list[tuple[bytes, bytes, list[object]]]:
    """The first `n` records of the topic's partitions, by assignment: (key, value, headers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[tuple[bytes, bytes, list[object]]] = []
    try:
        for _ in range(200):
            if len(out) >= n:
                break
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append((m.key(), m.value(), m.headers() or []))
    finally:
        c.close()
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int = 1) -> dict[int, int]:
    """The group's committed offsets (AdminClient.list_consumer_group_offsets)."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    a = ck_admin(bootstrap)  # (outlives its futures)
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = a.list_consumer_group_offsets([req])[group].result(20)
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit offsets for a group nobody is in (a consumer that assigns and commits)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


# --- kafka-topics ---------------------------------------------------------------------------------


def test_topics_create_describe_alter_list_delete(broker: BrokerProcess, kafka_tools: KafkaTools,
                                                  topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    a = ck_admin(broker.bootstrap)  # (outlives its futures)
    r = kafka_tools.ok("kafka-topics", *b, "--create", "--topic", topic_name, "--partitions", "3",
                       "--replication-factor", "1", "--config", "retention.ms=3600000",
                       "--config", "max.message.bytes=200000")
    assert r.stdout.strip() == f"Created topic {topic_name}."
    md = a.list_topics(topic_name, timeout=10).topics[topic_name]
    assert md.error is None and sorted(md.partitions) == [0, 1, 2]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "3600000" and cfg["max.message.bytes"].value == "200000"
    assert cfg["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # a topic that exists already: Kafka's message, exit 1
    r = kafka_tools.run("kafka-topics", *b, "--create", "--topic", topic_name, "--partitions", "1")
    assert r.rc == 1, str(r)
    assert f"Error while executing topic command : Topic '{topic_name}' already exists." in r.stdout, str(r)
    assert "TopicExistsException" in r.stderr

    kafka_tools.ok("kafka-topics", *b, "--alter", "--topic", topic_name, "--partitions", "5")
    md = a.list_topics(topic_name, timeout=10).topics[topic_name]
    assert sorted(md.partitions) == [0, 1, 2, 3, 4]

    r = kafka_tools.ok("kafka-topics", *b, "--describe", "--topic", topic_name)
    header, *rows = r.lines
    m = TOPIC_HEADER.match(header)
    assert m is not None, r.stdout
    assert m.group(1) == topic_name and m.group(3) == "5" and m.group(4) == "1"
    assert sorted(m.group(5).split(",")) == ["max.message.bytes=200000", "retention.ms=3600000"]
    described = a.describe_topics(TopicCollection([topic_name]))[topic_name].result(10)
    # (Kafka prints the id in URL-safe base64, confluent-kafka in standard base64)
    assert base64.urlsafe_b64decode(m.group(2) + "==") == base64.b64decode(str(described.topic_id) + "==")
    parts = [PARTITION_LINE.match(line) for line in rows]
    assert all(parts) and len(parts) == 5, r.stdout
    assert [(p.group(1), int(p.group(2)), p.group(3), p.group(4), p.group(5)) for p in parts if p] == [
        (topic_name, i, "0", "0", "0") for i in range(5)]

    assert topic_name in kafka_tools.ok("kafka-topics", *b, "--list").lines
    kafka_tools.ok("kafka-topics", *b, "--delete", "--topic", topic_name)
    assert topic_name not in a.list_topics(timeout=10).topics
    assert topic_name not in kafka_tools.ok("kafka-topics", *b, "--list").lines


# --- kafka-console-producer / kafka-console-consumer ----------------------------------------------


def test_console_producer_and_consumer_keys_and_headers(broker: BrokerProcess, kafka_tools: KafkaTools,
                                                        topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    lines = ["h1:v1,h2:v2\tk1=first", "h1:x\tk2=second value", "h3:y\tk3=third"]
    kafka_tools.ok("kafka-console-producer", *b, "--topic", topic_name, "--reader-property", "parse.key=true",
                   "--reader-property", "key.separator==", "--reader-property", "parse.headers=true",
                   input="\n".join(lines) + "\n")
    got = consume(broker.bootstrap, topic_name, 3)
    assert got == [(b"k1", b"first", [("h1", b"v1"), ("h2", b"v2")]), (b"k2", b"second value", [("h1", b"x")]),
                   (b"k3", b"third", [("h3", b"y")])]

    r = kafka_tools.ok("kafka-console-consumer", *b, "--topic", topic_name, "--from-beginning",
                       "--max-messages", "2", "--formatter-property", "print.key=true",
                       "--formatter-property", "print.headers=true", "--formatter-property", "print.offset=true",
                       "--formatter-property", "key.separator=|")
    assert r.lines == ["Offset:0|h1:v1,h2:v2|k1|first", "Offset:1|h1:x|k2|second value"]
    assert "Processed a total of 2 messages" in r.stderr


def test_console_consumer_group_commits_and_resumes(broker: BrokerProcess, kafka_tools: KafkaTools,
                                                    topic_name: str) -> None:
    """A second run of the console consumer in the same group reads only what came after the
    first run's committed offsets."""
    b = ["--bootstrap-server", broker.bootstrap]
    group = f"console-{uuid.uuid4().hex[:8]}"
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    p = ck_producer(broker.bootstrap)
    for i in range(6):
        p.produce(topic_name, f"a{i}".encode(), partition=i % 2)
    assert p.flush(20) == 0
    r = kafka_tools.ok("kafka-console-consumer", *b, "--topic", topic_name, "--group", group, "--from-beginning",
                       "--max-messages", "6")
    assert sorted(r.lines) == [f"a{i}" for i in range(6)]
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 3, 1: 3}

    for i in range(4):
        p.produce(topic_name, f"b{i}".encode(), partition=i % 2)
    assert p.flush(20) == 0
    # (--from-beginning is ignored when the group has committed offsets, as in Kafka)
    r = kafka_tools.ok("kafka-console-consumer", *b, "--topic", topic_name, "--group", group, "--from-beginning",
                       "--max-messages", "4", "--timeout-ms", "30000")
    assert sorted(r.lines) == [f"b{i}" for i in range(4)], str(r)
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 5, 1: 5}


# --- kafka-consumer-groups -------------------------------------------------------------------------


def test_consumer_groups_list_describe_reset_delete(broker: BrokerProcess, kafka_tools: KafkaTools,
                                                    topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    a = ck_admin(broker.bootstrap)  # (outlives its futures)
    group = f"cg-{uuid.uuid4().hex[:8]}"
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    p = ck_producer(broker.bootstrap)
    for i in range(10):
        p.produce(topic_name, b"x", partition=i % 2)
    assert p.flush(20) == 0
    commit(broker.bootstrap, group, topic_name, {0: 2, 1: 5})

    assert group in kafka_tools.ok("kafka-consumer-groups", *b, "--list").lines

    r = kafka_tools.ok("kafka-consumer-groups", *b, "--describe", "--group", group)
    rows = [line.split() for line in r.lines if line.strip()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                       "HOST", "CLIENT-ID"], r.stdout
    assert sorted(rows[1:]) == [[group, topic_name, "0", "2", "5", "3", "-", "-", "-"],
                                [group, topic_name, "1", "5", "5", "0", "-", "-", "-"]], r.stdout
    assert f"Consumer group '{group}' has no active members." in r.stderr

    r = kafka_tools.ok("kafka-consumer-groups", *b, "--reset-offsets", "--group", group, "--topic", topic_name,
                       "--to-earliest", "--execute")
    rows = [line.split() for line in r.lines if line.strip()]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], r.stdout
    assert sorted(rows[1:]) == [[group, topic_name, "0", "0"], [group, topic_name, "1", "0"]], r.stdout
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 0, 1: 0}

    kafka_tools.ok("kafka-consumer-groups", *b, "--reset-offsets", "--group", group, "--topic", f"{topic_name}:1",
                   "--to-offset", "4", "--execute")
    assert committed(broker.bootstrap, group, topic_name, 2) == {0: 0, 1: 4}

    r = kafka_tools.ok("kafka-consumer-groups", *b, "--delete", "--group", group)
    assert f"Deletion of requested consumer groups ('{group}') was successful." in r.stdout, str(r)
    groups = a.list_consumer_groups().result(20)
    assert group not in [g.group_id for g in groups.valid]


# --- kafka-configs -------------------------------------------------------------------------------------


def test_configs_topic_describe_alter_delete(broker: BrokerProcess, kafka_tools: KafkaTools,
                                             topic_name: str) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    a = ck_admin(broker.bootstrap)  # (outlives its futures)
    entity = ["--entity-type", "topics", "--entity-name", topic_name]
    ck_create_topic(broker.bootstrap, topic_name)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic_name)

    r = kafka_tools.ok("kafka-configs", *b, "--alter", *entity, "--add-config",
                       "retention.ms=7200000,cleanup.policy=[compact,delete]")
    assert r.stdout.strip() == f"Completed updating config for topic {topic_name}."
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].value == "7200000" and cfg["cleanup.policy"].value == "compact,delete"

    r = kafka_tools.ok("kafka-configs", *b, "--describe", *entity)
    assert r.lines[0] == f"Dynamic configs for topic {topic_name} are:"
    assert sorted(r.lines[1:]) == [
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete,"
        " DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=7200000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=7200000,"
        " DEFAULT_CONFIG:log.retention.hours=168}"], r.stdout

    kafka_tools.ok("kafka-configs", *b, "--alter", *entity, "--delete-config", "retention.ms")
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["cleanup.policy"].value == "compact,delete"

    # an unknown config: Kafka's own refusal, nothing changed
    r = kafka_tools.run("kafka-configs", *b, "--alter", *entity, "--add-config", "no.such.config=1")
    assert r.rc != 0 and "no.such.config" in r.stdout + r.stderr, str(r)
    assert "no.such.config" not in a.describe_configs([res])[res].result(10)


def test_configs_broker_dynamic(broker_factory: Callable[..., BrokerProcess], kafka_tools: KafkaTools) -> None:
    """Per-broker and cluster-default dynamic configs (a broker of its own: they change it)."""
    broker = broker_factory()
    b = ["--bootstrap-server", broker.bootstrap]
    a = ck_admin(broker.bootstrap)  # (outlives its futures)
    kafka_tools.ok("kafka-configs", *b, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                   "--add-config", "log.retention.ms=5400000")
    kafka_tools.ok("kafka-configs", *b, "--alter", "--entity-type", "brokers", "--entity-default",
                   "--add-config", "log.cleaner.threads=2")
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    cfg = a.describe_configs([res])[res].result(10)
    assert (cfg["log.retention.ms"].value, cfg["log.retention.ms"].source) == (
        "5400000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (cfg["log.cleaner.threads"].value, cfg["log.cleaner.threads"].source) == (
        "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    r = kafka_tools.ok("kafka-configs", *b, "--describe", "--entity-type", "brokers", "--entity-name", "0")
    assert r.lines[0] == "Dynamic configs for broker 0 are:"
    assert r.lines[1].startswith("  log.retention.ms=5400000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                                 "log.retention.ms=5400000"), r.stdout
    # a static-only config cannot be changed dynamically: Kafka's refusal, exit non-zero
    r = kafka_tools.run("kafka-configs", *b, "--alter", "--entity-type", "brokers", "--entity-name", "0",
                        "--add-config", "log.dirs=/elsewhere")
    assert r.rc != 0, str(r)


# --- the perf tests -------------------------------------------------------------------------------------


def test_producer_and_consumer_perf_tests(broker: BrokerProcess, kafka_tools: KafkaTools, topic_name: str) -> None:
    r = kafka_tools.ok("kafka-producer-perf-test", "--topic", topic_name, "--num-records", "3000",
                       "--record-size", "200", "--throughput", "-1", "--producer-props", "acks=all",
                       f"bootstrap.servers={broker.bootstrap}", "linger.ms=5", timeout=180)
    final = r.lines[-1]
    assert re.match(r"^3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency", final), r.stdout
    assert ck_list_offset(broker.bootstrap, topic_name, OffsetSpec.latest()) == 3000

    r = kafka_tools.ok("kafka-consumer-perf-test", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
                       "--messages", "3000", timeout=180)
    header, row = r.lines[-2:]
    stats = dict(zip([h.strip() for h in header.split(",")], [v.strip() for v in row.split(",")]))
    assert stats["data.consumed.in.nMsg"] == "3000", r.stdout
    assert abs(float(stats["data.consumed.in.MB"]) - 3000 * 200 / 1024 / 1024) < 0.001, r.stdout


# --- kafka-get-offsets, kafka-delete-records ---------------------------------------------------


def test_get_offsets_and_delete_records(broker: BrokerProcess, kafka_tools: KafkaTools, topic_name: str,
                                        tmp_path: Path) -> None:
    b = ["--bootstrap-server", broker.bootstrap]
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    recs: list[Rec] = make_records("go", 10, base_timestamp_ms())
    ck_produce(ck_producer(broker.bootstrap), topic_name, recs, partition=0)

    def offsets(time: str) -> list[str]:
        return kafka_tools.ok("kafka-get-offsets", *b, "--topic", topic_name, "--time", time).lines

    assert offsets("-1") == [f"{topic_name}:0:10", f"{topic_name}:1:0"]
    assert offsets(str(recs[4].timestamp - 3)) == [f"{topic_name}:0:4"]  # (partition 1: none at or after it)

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic_name, "partition": 0, "offset": 6}]}))
    r = kafka_tools.ok("kafka-delete-records", *b, "--offset-json-file", str(spec))
    assert f"partition: {topic_name}-0\tlow_watermark: 6" in r.stdout, r.stdout
    assert ck_list_offset(broker.bootstrap, topic_name, OffsetSpec.earliest()) == 6
    assert offsets("-2") == [f"{topic_name}:0:6", f"{topic_name}:1:0"]
    # latest tiered (-5): no tiered storage, so no offset, and the tool prints no line (as Kafka)
    assert offsets("-5") == []


# --- kafka-log-dirs -----------------------------------------------------------------------------------------


def test_log_dirs_describe(broker: BrokerProcess, kafka_tools: KafkaTools, topic_name: str) -> None:
    """DescribeLogDirs: the broker's log dir, the topic's replicas in it with their sizes on disk."""
    ck_create_topic(broker.bootstrap, topic_name, partitions=2)
    ck_produce(ck_producer(broker.bootstrap), topic_name, make_records("ld", 20, base_timestamp_ms()), partition=1)
    r = kafka_tools.ok("kafka-log-dirs", "--bootstrap-server", broker.bootstrap, "--describe",
                       "--topic-list", topic_name, timeout=60)
    assert r.lines[:2] == ["Querying brokers for log directories information",
                           "Received log directory information from brokers 0"], r.stdout
    doc = json.loads(r.lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [0]
    (log_dir,) = doc["brokers"][0]["logDirs"]
    assert log_dir["error"] is None and log_dir["logDir"] == str(broker.log_dir.absolute())
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])
    on_disk = {f"{topic_name}-{i}": sum(f.stat().st_size for f in (broker.log_dir / f"{topic_name}-{i}").glob("*.log"))
               for i in (0, 1)}
    assert sizes == on_disk and sizes[f"{topic_name}-0"] == 0 and sizes[f"{topic_name}-1"] > 0


def test_reassign_partitions_moves_a_replica_between_log_dirs(broker_factory: Callable[..., BrokerProcess],
                                                              kafka_tools: KafkaTools, topic_name: str,
                                                              tmp_path: Path) -> None:
    """A plan with "log_dirs": --execute sends AlterReplicaLogDirs (with the log dir throttle),
    --verify follows the move through DescribeLogDirs until it is done (and clears the throttle),
    kafka-log-dirs shows the replica in its new dir."""
    a_dir, b_dir = tmp_path / "dir-a", tmp_path / "dir-b"
    broker = broker_factory(log_dirs=f"{a_dir},{b_dir}")
    b = ["--bootstrap-server", broker.bootstrap]
    ck_create_topic(broker.bootstrap, topic_name)
    recs = make_records("mv", 300, base_timestamp_ms())
    ck_produce(ck_producer(broker.bootstrap), topic_name, recs)
    src, dest = (a_dir, b_dir) if (a_dir / f"{topic_name}-0").is_dir() else (b_dir, a_dir)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [0], "log_dirs": [str(dest)]}]}))

    r = kafka_tools.ok("kafka-reassign-partitions", *b, "--execute", "--reassignment-json-file", str(plan),
                       "--replica-alter-log-dirs-throttle", "50000000")
    assert "The replica-alter-dir throttle limit was set to 50000000 B/s" in r.stdout, str(r)
    assert (f"Successfully started moving log directory to {dest} for replica {topic_name}-0 with broker 0"
            in r.stdout), str(r)
    verified = None
    for _ in range(10):  # (a JVM per run: the move of 300 records is over by the first, or soon after)
        verified = kafka_tools.ok("kafka-reassign-partitions", *b, "--verify", "--reassignment-json-file", str(plan))
        if f"Reassignment of replica {topic_name}-0-0 completed successfully." in verified.stdout:
            break
    assert verified is not None and "completed successfully" in verified.stdout, str(verified)
    assert "Clearing broker-level throttles on broker 0" in verified.stdout, str(verified)
    a = ck_admin(broker.bootstrap)
    res = ConfigResource(ConfigResource.Type.BROKER, "0")
    assert a.describe_configs([res])[res].result(10)["replica.alter.log.dirs.io.max.bytes.per.second"].is_default

    r = kafka_tools.ok("kafka-log-dirs", *b, "--describe", "--topic-list", topic_name, timeout=60)
    dirs = {d["logDir"]: d["partitions"] for d in json.loads(r.lines[2])["brokers"][0]["logDirs"]}
    assert dirs[str(src)] == [] and [(p["partition"], p["isFuture"]) for p in dirs[str(dest)]] == [
        (f"{topic_name}-0", False)], r.stdout
    assert [p.name for p in src.iterdir() if p.name.startswith(topic_name)] == []
    assert as_recs(ck_read(broker.bootstrap, topic_name, 300)) == recs
