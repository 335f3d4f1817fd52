"""Apache Kafka's own command-line tools (Kafka 4.4) against a 3-broker Samsa cluster on a real
ZooKeeper: kafka-leader-election, kafka-reassign-partitions, kafka-transactions, kafka-acls and
SCRAM users through kafka-configs (tests/compat/kafkatools.py runs them as
`java -cp <tools jars> <MainClass>`).

Each tool's effect is observed from outside: the partition state in ZooKeeper, the replicas'
directories, a raw SASL client that is refused or let in, confluent-kafka producers. The
single-broker tools are in tests/compat/test_kafka_tools.py.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.broker.test_acls import JAAS, TAF
from tests.broker.test_scram import raw_login, wait_login
from tests.brokerproc import free_port
from tests.cluster.cluster import Cluster, produce_sync
from tests.compat.kafkatools import KafkaTools, kafka_tools  # noqa: F401  (the session fixture)
from tests.rawclient import RawClient
from tests.zk.conftest import ZooKeeperServer

pytestmark = pytest.mark.slow


def topic_name() -> str:
    return f"kt-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def three(zk_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers for the module's tests (each uses topics of its own); no automatic
    preferred-leader rebalance, so that only the tool moves leaders back."""
    c = Cluster(tmp_path_factory.mktemp("tools-cluster"), zk_server.hosts, 3,
                {"auto.leader.rebalance.enable": "false"})
    try:
        c.start_all()
        yield c
    finally:
        c.close()


def write_json(tmp_path: Path, name: str, doc: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


# --- kafka-leader-election --------------------------------------------------------------------------


def test_leader_election_preferred(three: Cluster, kafka_tools: KafkaTools) -> None:  # noqa: F811
    c = three
    topic = topic_name()
    c.create_topic(topic, assignment=[[0, 1, 2], [1, 2, 0]])
    assert c.leader_of(topic, 0) == 0
    # broker 0 goes away and comes back: partition 0's leader is no longer its preferred one
    assert c.sigterm(0) == 0
    c.wait_leader_change(topic, 0, 0)
    c.start(0)
    c.wait_full_isr(topic, [0, 1])
    assert c.leader_of(topic, 0) != 0

    r = kafka_tools.ok("kafka-leader-election", "--bootstrap-server", c.bootstrap, "--election-type", "preferred",
                       "--topic", topic, "--partition", "0")
    assert r.stdout.strip() == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0", str(r)
    c.wait_for(lambda: c.leader_of(topic, 0) == 0, 20, "broker 0 leads partition 0 again")
    assert c.leader_of(topic, 1) == 1

    # nothing to do: Kafka's answer for a partition already led by its preferred replica
    r = kafka_tools.ok("kafka-leader-election", "--bootstrap-server", c.bootstrap, "--election-type", "preferred",
                       "--topic", topic, "--partition", "1")
    assert r.stdout.strip() == f"Valid replica already elected for partitions {topic}-1", str(r)


# --- kafka-reassign-partitions --------------------------------------------------------------------------


def test_reassign_partitions_generate_execute_verify(three: Cluster, kafka_tools: KafkaTools,  # noqa: F811
                                                     tmp_path: Path) -> None:
    c = three
    topic = topic_name()
    b = ["--bootstrap-server", c.bootstrap]
    c.create_topic(topic, assignment=[[0, 1]])
    reports = produce_sync(c.bootstrap, topic, [b"r%d" % i for i in range(20)])
    assert all(err is None for _, _, err in reports)

    # --generate: a proposal over the brokers asked for, the current assignment as it is
    moving = write_json(tmp_path, "topics.json", {"version": 1, "topics": [{"topic": topic}]})
    r = kafka_tools.ok("kafka-reassign-partitions", *b, "--generate", "--topics-to-move-json-file", moving,
                       "--broker-list", "1,2")
    lines = r.lines
    assert lines[0] == "Current partition replica assignment", r.stdout
    current = json.loads(lines[1])
    assert [(p["topic"], p["partition"], p["replicas"]) for p in current["partitions"]] == [(topic, 0, [0, 1])]
    i = lines.index("Proposed partition reassignment configuration")
    proposed = json.loads(lines[i + 1])
    assert [(p["topic"], p["partition"], sorted(p["replicas"])) for p in proposed["partitions"]] == [
        (topic, 0, [1, 2])], r.stdout

    # --execute the move to [2, 1], --verify until it is done
    plan = write_json(tmp_path, "plan.json", {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1]}]})
    r = kafka_tools.ok("kafka-reassign-partitions", *b, "--execute", "--reassignment-json-file", plan)
    assert f"Successfully started partition reassignment for {topic}-0" in r.stdout, str(r)
    seen: list[str] = []

    def completed() -> bool:
        v = kafka_tools.ok("kafka-reassign-partitions", *b, "--verify", "--reassignment-json-file", plan)
        seen.append(v.stdout)
        return f"Reassignment of partition {topic}-0 is completed." in v.stdout

    c.wait_for(completed, 60, lambda: f"--verify reports {topic}-0 completed (last: {seen[-1:]})")
    assert c.assignment(topic) == {0: [2, 1]}
    c.wait_full_isr(topic, [0])
    assert c.leader_of(topic, 0) in (1, 2)
    c.wait_replicas_identical(topic)
    assert [v for _, _, v in c.consume_all(topic)[0]] == [b"r%d" % i for i in range(20)]
    assert c.partition_dir(2, topic).is_dir() and not c.partition_dir(0, topic).is_dir()


# --- kafka-transactions ------------------------------------------------------------------------------


def test_transactions_list_and_describe(three: Cluster, kafka_tools: KafkaTools) -> None:  # noqa: F811
    c = three
    topic = topic_name()
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    b = ["--bootstrap-server", c.bootstrap]
    c.create_topic(topic, partitions=2)
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=1)
    assert p.flush(20) == 0

    r = kafka_tools.ok("kafka-transactions", *b, "list")
    rows = [line.split() for line in r.lines]
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], r.stdout
    mine = [row for row in rows[1:] if row[0] == txn_id]
    assert len(mine) == 1 and mine[0][3] == "Ongoing", r.stdout
    coordinator, producer_id = int(mine[0][1]), int(mine[0][2])
    assert coordinator in (0, 1, 2) and producer_id >= 0

    r = kafka_tools.ok("kafka-transactions", *b, "describe", "--transactional-id", txn_id)
    header, row = (line.split("\t") for line in r.lines[:2])
    desc = dict(zip([h.strip() for h in header], [v.strip() for v in row]))
    assert desc["CoordinatorId"] == str(coordinator) and desc["TransactionalId"] == txn_id, r.stdout
    assert desc["ProducerId"] == str(producer_id) and desc["TransactionState"] == "Ongoing", r.stdout
    assert desc["TopicPartitions"] == f"{topic}-1", r.stdout

    p.commit_transaction(30)
    r = kafka_tools.ok("kafka-transactions", *b, "describe", "--transactional-id", txn_id)
    header, row = (line.split("\t") for line in r.lines[:2])
    desc = dict(zip([h.strip() for h in header], [v.strip() for v in row]))
    assert desc["TransactionState"] == "CompleteCommit" and desc["TopicPartitions"] == "", r.stdout

    # an unknown id: Kafka's message, exit 1
    r = kafka_tools.run("kafka-transactions", *b, "describe", "--transactional-id", "no-such-txn")
    assert r.rc == 1 and "the ID could not be found" in r.stderr, str(r)


# --- kafka-acls and SCRAM users (kafka-configs) on a secured cluster ----------------------------------


def secured(cluster: Any) -> tuple[Cluster, list[str]]:
    """Three brokers with an authorizer, a SASL_PLAINTEXT listener each (PLAIN for the users of
    tests/broker/test_acls.py's JAAS, and SCRAM-SHA-256) besides PLAINTEXT, whose
    User:ANONYMOUS is a super user (the brokers replicate over it, the tools administer
    through it): the SASL listeners' addresses."""
    c: Cluster = cluster(3, start=False)
    sasl = []
    for i in range(3):
        port = free_port()
        path = c.broker(i).config_path
        text = re.sub(r"(?m)^listeners=(.*)$", lambda m: f"listeners={m.group(1)},SASL_PLAINTEXT://127.0.0.1:{port}",
                      path.read_text())
        text += "".join(f"{k}={v}\n" for k, v in {
            "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin"}.items())
        path.write_text(text)
        sasl.append(f"127.0.0.1:{port}")
    return c.start_all(), sasl


def alice_list_offsets(bootstrap: str, topic: str) -> int:
    """The error code of a ListOffsets by User:alice (SASL/PLAIN) for the topic's partition 0."""
    with RawClient(bootstrap) as cl:
        assert cl.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        assert cl.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"}).error_code == 0
        r = cl.request(2, 7, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]})
        return int(r.topics[0].partitions[0].error_code)


def test_acls_and_scram_users(cluster: Any, kafka_tools: KafkaTools) -> None:  # noqa: F811
    c, sasl = secured(cluster)
    topic = topic_name()
    b = ["--bootstrap-server", c.bootstrap]
    c.create_topic(topic)
    leader = c.leader_of(topic)
    assert leader is not None and alice_list_offsets(sasl[leader], topic) == TAF

    # kafka-acls --add: in ZooKeeper, and in force at the partition's leader
    r = kafka_tools.ok("kafka-acls", *b, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                       "--operation", "Describe", "--topic", topic)
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`:" in r.stdout, str(r)
    doc = json.loads(c._zget(f"/kafka-acl/Topic/{topic}") or b"{}")
    assert sorted((a["principal"], a["operation"], a["permissionType"]) for a in doc["acls"]) == [
        ("User:alice", "Describe", "Allow"), ("User:alice", "Read", "Allow")]
    c.wait_for(lambda: alice_list_offsets(sasl[leader], topic) == 0, 20, "the leader lets alice describe the topic")

    r = kafka_tools.ok("kafka-acls", *b, "--list", "--topic", topic)
    assert r.lines[0] == f"Current ACLs for resource `{pattern}`:", r.stdout
    assert sorted(line.strip() for line in r.lines[1:] if line.strip()) == [
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"], r.stdout

    kafka_tools.ok("kafka-acls", *b, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
                   "--operation", "Describe", "--topic", topic)
    c.wait_for(lambda: alice_list_offsets(sasl[leader], topic) == TAF, 20, "the leader refuses alice again")
    assert c._zget(f"/kafka-acl/Topic/{topic}") in (None, b'{"version":1,"acls":[]}')

    # SCRAM users: made through broker 0, logging in on broker 1
    user = f"u{uuid.uuid4().hex[:6]}"
    entity = ["--entity-type", "users", "--entity-name", user]
    r = kafka_tools.ok("kafka-configs", *b, "--alter", *entity, "--add-config",
                       "SCRAM-SHA-256=[iterations=8192,password=s3cret]")
    assert r.stdout.strip() == f"Completed updating config for user {user}.", str(r)
    wait_login(sasl[1], "SCRAM-SHA-256", user, "s3cret")
    assert raw_login(sasl[1], "SCRAM-SHA-256", user, "wrong")[0] != 0
    r = kafka_tools.ok("kafka-configs", *b, "--describe", *entity)
    assert f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192" \
        in r.stdout, str(r)
    kafka_tools.ok("kafka-configs", *b, "--alter", *entity, "--delete-config", "SCRAM-SHA-256")
    wait_login(sasl[1], "SCRAM-SHA-256", user, "s3cret", ok=False)
