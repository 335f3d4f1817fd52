"""The ACL authorizer on a real broker: every API allowed and denied (raw requests, with Kafka's
error code per topic, partition and group), real clients (confluent-kafka, kafka-python),
literal and prefixed patterns, DENY over ALLOW, super users, allow.everyone.if.no.acl.found,
the ACL APIs' own errors, ACLs kept in Kafka's layout and across a restart, and the decision log.

Principals are SASL/PLAIN users: `admin` (a super user), `alice` and `bob`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer

from samsa.metadata.embedded import EmbeddedStore
from samsa.protocol.errors import ErrorCode
from tests.brokerproc import BrokerProcess, free_port
from tests.rawclient import RawClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 2
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, \
    IDEMPOTENT_WRITE = 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12
DENY, ALLOW = 2, 3
TAF, GAF, CAF = (int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), int(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                 int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))


def acl_broker(tmp_path: Path, **extra: str) -> BrokerProcess:
    port = free_port()
    props = {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN",
             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS, "authorizer.class.name": AUTHORIZER,
             "super.users": "User:admin", "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "2",
             **extra}
    return BrokerProcess(tmp_path / "broker", props, port=port)


def sasl_raw(b: BrokerProcess, user: str) -> RawClient:
    """A raw connection authenticated as `user` (SaslHandshake v1, then SaslAuthenticate)."""
    c = RawClient(b.bootstrap)
    assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
    assert c.request(36, 2, {"auth_bytes": f"\0{user}\0{PASSWORDS[user]}".encode()}).error_code == 0
    return c


def conf(b: BrokerProcess, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def acl(rtype: int, name: str, op: int, principal: str = "User:alice", permission: int = ALLOW,
        pattern: int = LITERAL, host: str = "*") -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": op, "permission_type": permission}


def create_acls(admin: RawClient, *acls: dict[str, Any]) -> None:
    r = admin.request(30, 3, {"creations": list(acls)})
    assert [x.error_code for x in r.results] == [0] * len(acls), r


def delete_acls(admin: RawClient, **f: Any) -> Any:
    base = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": ANY_PATTERN,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    return admin.request(31, 3, {"filters": [{**base, **f}]}).filter_results[0]


def create_topic(admin: RawClient, name: str, partitions: int = 1) -> None:
    r = admin.request(19, 5, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1}],
                              "timeout": 10000})
    assert r.topics[0].error_code in (0, int(ErrorCode.TOPIC_ALREADY_EXISTS)), r


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = acl_broker(tmp_path_factory.mktemp("acls")).start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[RawClient]:
    with sasl_raw(broker, "admin") as c:
        yield c


# -- the matrix: every API, denied then allowed -------------------------------------------------

Case = tuple[str, int, int, Callable[[str, str], dict[str, Any]], Callable[[Any], int], int,
             Callable[[str, str], list[dict[str, Any]]]]

CASES: list[Case] = [
    ("produce", 0, 9, lambda t, g: {"acks": 1, "timeout": 1000, "topic_data": [
        {"name": t, "partition_data": [{"index": 0, "records": None}]}]},
     lambda r: r.responses[0].partition_responses[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, WRITE)]),
    ("fetch", 1, 12, lambda t, g: {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                   "session_epoch": -1, "topics": [{"topic": t, "partitions": [
                                       {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]},
     lambda r: r.responses[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, READ)]),
    ("follower-fetch", 1, 12, lambda t, g: {"replica_id": 7, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                            "session_epoch": -1, "topics": [{"topic": t, "partitions": [
                                                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1024}]}]},
     lambda r: r.responses[0].partitions[0].error_code, TAF,
     lambda t, g: [acl(CLUSTER, "kafka-cluster", CLUSTER_ACTION)]),
    ("list-offsets", 2, 7, lambda t, g: {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DESCRIBE)]),
    ("list-offsets-via-read", 2, 7, lambda t, g: {"replica_id": -1, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, READ)]),  # READ implies DESCRIBE
    ("metadata", 3, 12, lambda t, g: {"topics": [{"name": t}], "allow_auto_topic_creation": False},
     lambda r: r.topics[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DESCRIBE)]),
    ("offset-commit-group", 8, 8, lambda t, g: {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                                "topics": [{"name": t, "partitions": [
                                                    {"partition_index": 0, "committed_offset": 0}]}]},
     lambda r: r.topics[0].partitions[0].error_code, GAF, lambda t, g: [acl(GROUP, g, READ), acl(TOPIC, t, READ)]),
    ("offset-commit-topic", 8, 8, lambda t, g: {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                                "topics": [{"name": t, "partitions": [
                                                    {"partition_index": 0, "committed_offset": 0}]}]},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, READ)]),
    ("offset-fetch", 9, 7, lambda t, g: {"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}]},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, DESCRIBE)]),
    ("offset-fetch-topic", 9, 7, lambda t, g: {"group_id": g, "topics": [{"name": t, "partition_indexes": [0]}]},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DESCRIBE)]),
    ("offset-fetch-v8", 9, 8, lambda t, g: {"groups": [{"group_id": g, "topics": None}]},
     lambda r: r.groups[0].error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("find-coordinator", 10, 3, lambda t, g: {"key": g, "key_type": 0},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, DESCRIBE)]),
    ("join-group", 11, 5, lambda t, g: {"group_id": g, "session_timeout": 10000, "rebalance_timeout": 100,
                                        "member_id": "", "protocol_type": "consumer",
                                        "protocols": [{"name": "range", "metadata": b""}]},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("heartbeat", 12, 4, lambda t, g: {"group_id": g, "generation_id": 1, "member_id": "m"},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("leave-group", 13, 3, lambda t, g: {"group_id": g, "members": [{"member_id": "m"}]},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("sync-group", 14, 3, lambda t, g: {"group_id": g, "generation_id": 1, "member_id": "m", "assignments": []},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("describe-groups", 15, 5, lambda t, g: {"groups": [g]},
     lambda r: r.groups[0].error_code, GAF, lambda t, g: [acl(GROUP, g, DESCRIBE)]),
    ("create-topics", 19, 5, lambda t, g: {"topics": [{"name": t + "-new", "num_partitions": 1,
                                                       "replication_factor": 1}], "timeout": 10000},
     lambda r: r.topics[0].error_code, TAF, lambda t, g: [acl(TOPIC, t + "-new", CREATE)]),
    ("create-topics-cluster", 19, 5, lambda t, g: {"topics": [{"name": t + "-new", "num_partitions": 1,
                                                               "replication_factor": 1}], "timeout": 10000},
     lambda r: r.topics[0].error_code, TAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", CREATE)]),
    ("delete-topics", 20, 5, lambda t, g: {"topic_names": [t], "timeout": 10000},
     lambda r: r.responses[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DELETE)]),
    ("delete-records", 21, 2, lambda t, g: {"topics": [{"name": t, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 10000},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DELETE)]),
    ("init-producer-id", 22, 4, lambda t, g: {"transactional_id": None, "transaction_timeout": 1000,
                                              "producer_id": -1, "producer_epoch": -1},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE)]),
    ("init-producer-id-any-topic", 22, 4, lambda t, g: {"transactional_id": None, "transaction_timeout": 1000,
                                                        "producer_id": -1, "producer_epoch": -1},
     lambda r: r.error_code, CAF, lambda t, g: [acl(TOPIC, t, WRITE, pattern=PREFIXED)]),
    ("offset-for-leader-epoch", 23, 4, lambda t, g: {"replica_id": -1, "topics": [{"topic": t, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
     lambda r: r.topics[0].partitions[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DESCRIBE)]),
    ("describe-configs-topic", 32, 4, lambda t, g: {"resources": [{"resource_type": 2, "resource_name": t}]},
     lambda r: r.results[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, DESCRIBE_CONFIGS)]),
    ("describe-configs-via-alter", 32, 4, lambda t, g: {"resources": [{"resource_type": 2, "resource_name": t}]},
     lambda r: r.results[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, ALTER_CONFIGS)]),
    ("describe-configs-broker", 32, 4, lambda t, g: {"resources": [{"resource_type": 4, "resource_name": "0"}]},
     lambda r: r.results[0].error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", DESCRIBE_CONFIGS)]),
    ("alter-configs", 33, 2, lambda t, g: {"resources": [{"resource_type": 2, "resource_name": t, "configs": [
        {"name": "retention.ms", "value": "100000"}]}]},
     lambda r: r.responses[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, ALTER_CONFIGS)]),
    ("create-partitions", 37, 3, lambda t, g: {"topics": [{"name": t, "count": 2}], "timeout": 10000},
     lambda r: r.results[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, ALTER)]),
    ("delete-groups", 42, 2, lambda t, g: {"groups_names": [g]},
     lambda r: r.results[0].error_code, GAF, lambda t, g: [acl(GROUP, g, DELETE)]),
    ("describe-log-dirs", 35, 4, lambda t, g: {"topics": [{"topic": t, "partitions": [0]}]},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", DESCRIBE)]),
    ("elect-leaders", 43, 2, lambda t, g: {"election_type": 0, "topic_partitions": [{"topic": t, "partitions": [0]}],
                                           "timeout": 5000},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", ALTER)]),
    ("incremental-alter-configs", 44, 1, lambda t, g: {"resources": [{"resource_type": 2, "resource_name": t,
                                                                      "configs": [{"name": "retention.ms",
                                                                                   "config_operation": 0,
                                                                                   "value": "100000"}]}]},
     lambda r: r.responses[0].error_code, TAF, lambda t, g: [acl(TOPIC, t, ALTER_CONFIGS)]),
    ("alter-partition-reassignments", 45, 0, lambda t, g: {"timeout": 5000, "topics": [
        {"name": t, "partitions": [{"partition_index": 0, "replicas": None}]}]},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", ALTER)]),
    ("list-partition-reassignments", 46, 0, lambda t, g: {"timeout": 5000, "topics": None},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", DESCRIBE)]),
    ("offset-delete", 47, 0, lambda t, g: {"group_id": g, "topics": [{"name": t, "partitions": [
        {"partition_index": 0}]}]},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, DELETE)]),
    ("consumer-group-heartbeat", 68, 0, lambda t, g: {"group_id": g, "member_id": "", "member_epoch": 0,
                                                      "rebalance_timeout": 1000, "subscribed_topic_names": [t],
                                                      "topic_partitions": []},
     lambda r: r.error_code, GAF, lambda t, g: [acl(GROUP, g, READ)]),
    ("consumer-group-describe", 69, 0, lambda t, g: {"group_ids": [g]},
     lambda r: r.groups[0].error_code, GAF, lambda t, g: [acl(GROUP, g, DESCRIBE)]),
    ("describe-acls", 29, 3, lambda t, g: {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                           "permission_type": 1},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", DESCRIBE, principal="User:bob")]),
    ("create-acls", 30, 3, lambda t, g: {"creations": [acl(TOPIC, t + "-x", READ)]},
     lambda r: r.results[0].error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", ALTER, principal="User:bob")]),
    ("delete-acls", 31, 3, lambda t, g: {"filters": [{"resource_type_filter": 2, "resource_name_filter": t + "-x",
                                                      "pattern_type_filter": 3, "operation": 1,
                                                      "permission_type": 1}]},
     lambda r: r.filter_results[0].error_code, CAF,
     lambda t, g: [acl(CLUSTER, "kafka-cluster", ALTER, principal="User:bob")]),
    ("describe-user-scram-credentials", 50, 0, lambda t, g: {"users": [{"name": f"nobody-{t}"}]},
     lambda r: r.error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", DESCRIBE)]),
    ("alter-user-scram-credentials", 51, 0, lambda t, g: {"deletions": [{"name": f"nobody-{t}", "mechanism": 1}],
                                                         "upsertions": []},
     lambda r: r.results[0].error_code, CAF, lambda t, g: [acl(CLUSTER, "kafka-cluster", ALTER)]),
]

AUTH_CODES = {TAF, GAF, CAF, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
# Granted before the first (refused) request: the group, so that the topic's own check shows.
GRANTED_FIRST: dict[str, Callable[[str, str], list[dict[str, Any]]]] = {
    "offset-commit-topic": lambda t, g: [acl(GROUP, g, READ)],
    "offset-fetch-topic": lambda t, g: [acl(GROUP, g, DESCRIBE)],
}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_api_denied_then_allowed(broker: BrokerProcess, admin: RawClient, case: Case) -> None:
    name, api_key, version, body, code_of, denied_code, grants = case
    topic, group = f"matrix-{name}", f"group-{name}"
    create_topic(admin, topic)
    user = "bob" if api_key in (29, 30, 31) else "alice"  # (the cluster ACLs of the ACL APIs: bob's own)
    if name in GRANTED_FIRST:
        create_acls(admin, *GRANTED_FIRST[name](topic, group))
    try:
        with sasl_raw(broker, user) as c:
            assert code_of(c.request(api_key, version, body(topic, group))) == denied_code
            create_acls(admin, *grants(topic, group))
            allowed = code_of(c.request(api_key, version, body(topic, group)))
            assert allowed not in AUTH_CODES, (name, allowed)
    finally:  # each case starts with no ACL for its user
        delete_acls(admin, principal_filter=f"User:{user}")


def test_metadata_hides_unauthorized_topics_and_auto_create_needs_create(broker: BrokerProcess,
                                                                         admin: RawClient) -> None:
    for t in ("meta-visible", "meta-hidden"):
        create_topic(admin, t)
    create_acls(admin, acl(TOPIC, "meta-visible", DESCRIBE, principal="User:bob"))
    with sasl_raw(broker, "bob") as c:
        names = {t.name for t in c.request(3, 12, {"topics": None}).topics}
        assert "meta-visible" in names and "meta-hidden" not in names and "__consumer_offsets" not in names
        named = c.request(3, 12, {"topics": [{"name": "meta-hidden"}, {"name": "meta-unknown"}]}).topics
        assert [(t.name, t.error_code) for t in named] == [("meta-hidden", TAF), ("meta-unknown", TAF)]
        # DESCRIBE on a topic that does not exist, but no CREATE: auto-creation refused
        create_acls(admin, acl(TOPIC, "meta-auto", DESCRIBE, principal="User:bob"))
        r = c.request(3, 12, {"topics": [{"name": "meta-auto"}], "allow_auto_topic_creation": True})
        assert r.topics[0].error_code == TAF
        create_acls(admin, acl(TOPIC, "meta-auto", CREATE, principal="User:bob"))
        r = c.request(3, 12, {"topics": [{"name": "meta-auto"}], "allow_auto_topic_creation": True})
        assert r.topics[0].error_code in (0, int(ErrorCode.LEADER_NOT_AVAILABLE))
        # the authorized operations bit field
        r = c.request(3, 12, {"topics": [{"name": "meta-visible"}], "include_topic_authorized_operations": True})
        assert r.topics[0].topic_authorized_operations == 1 << DESCRIBE


def test_list_groups_shows_only_described_groups(broker: BrokerProcess, admin: RawClient) -> None:
    for g in ("lg-mine", "lg-other"):
        r = admin.request(8, 8, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "topics": []})
        assert r.topics == []
    create_topic(admin, "lg-topic")
    for g in ("lg-mine", "lg-other"):
        admin.request(8, 8, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
            {"name": "lg-topic", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]})
    create_acls(admin, acl(GROUP, "lg-mine", DESCRIBE, principal="User:bob"))
    with sasl_raw(broker, "bob") as c:
        groups = {g.group_id for g in c.request(16, 4, {}).groups}
        assert "lg-mine" in groups and "lg-other" not in groups
    assert {"lg-mine", "lg-other"} <= {g.group_id for g in admin.request(16, 4, {}).groups}


def test_prefixed_wildcard_and_deny_over_allow(broker: BrokerProcess, admin: RawClient) -> None:
    for t in ("pre-a", "pre-b", "prex-c", "other-d"):
        create_topic(admin, t)

    def describe(c: RawClient, t: str) -> int:
        return int(c.request(2, 7, {"replica_id": -1, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}).topics[0].partitions[0].error_code)

    with sasl_raw(broker, "bob") as c:
        create_acls(admin, acl(TOPIC, "pre-", READ, principal="User:bob", pattern=PREFIXED))
        assert [describe(c, t) for t in ("pre-a", "pre-b", "prex-c", "other-d")] == [0, 0, TAF, TAF]
        create_acls(admin, acl(TOPIC, "pre-b", DESCRIBE, principal="User:bob", permission=DENY))
        assert [describe(c, t) for t in ("pre-a", "pre-b")] == [0, TAF]  # DENY wins over the prefixed ALLOW
        create_acls(admin, acl(TOPIC, "*", DESCRIBE, principal="User:*"))  # the wildcard resource and principal
        assert [describe(c, t) for t in ("prex-c", "other-d", "pre-b")] == [0, 0, TAF]
        create_acls(admin, acl(TOPIC, "pre", ALL, principal="User:bob", pattern=PREFIXED, permission=DENY,
                               host="10.9.9.9"))  # another host's DENY does not apply
        assert describe(c, "pre-a") == 0
        create_acls(admin, acl(TOPIC, "pre", ALL, principal="User:bob", pattern=PREFIXED, permission=DENY))
        assert [describe(c, t) for t in ("pre-a", "prex-c", "other-d")] == [TAF, TAF, 0]  # ALL denies DESCRIBE
    delete_acls(admin, resource_type_filter=TOPIC, resource_name_filter="*", pattern_type_filter=LITERAL)


def test_produce_and_consume_with_real_clients(broker: BrokerProcess, admin: RawClient) -> None:
    create_topic(admin, "rc-topic")
    values = [b"v%d" % i for i in range(20)]
    errors: list[Any] = []
    p = Producer(conf(broker, "alice", **{"message.timeout.ms": 5000, "enable.idempotence": False}))
    p.produce("rc-topic", b"nope", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    a = AdminClient(conf(broker, "admin"))
    fs = a.create_acls([
        AclBinding(ResourceType.TOPIC, "rc-", ResourcePatternType.PREFIXED, "User:alice", "*", op,
                   AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)] + [
        AclBinding(ResourceType.GROUP, "rc-group", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                   AclPermissionType.ALLOW),
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW)])
    for f in fs.values():  # (librdkafka names Kafka's CLUSTER resource type BROKER)
        assert f.result(10) is None
    errors.clear()
    p = Producer(conf(broker, "alice", **{"message.timeout.ms": 10000, "enable.idempotence": True}))
    for v in values:
        p.produce("rc-topic", v, partition=0, on_delivery=lambda err, msg: errors.append(err) if err else None)
    p.flush(20)
    assert errors == []
    c = Consumer(conf(broker, "alice", **{"group.id": "rc-group", "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
    got: list[bytes] = []
    try:
        c.subscribe(["rc-topic"])
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition("rc-topic", 0)], timeout=10)
    finally:
        c.close()
    assert got == values and committed[0].offset == len(values)
    # kafka-python, as bob (no ACL on rc-topic): the topic is not listed
    k = KafkaConsumer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret",
                      group_id=None, consumer_timeout_ms=2000)
    try:
        assert "rc-topic" not in k.topics()
    finally:
        k.close()


def test_acl_apis_describe_create_delete_and_their_errors(broker: BrokerProcess, admin: RawClient) -> None:
    bad = [
        acl(TOPIC, "x", READ, principal="alice"),  # no Type:
        acl(CLUSTER, "my-cluster", ALTER),  # the cluster is named kafka-cluster
        acl(TOPIC, "", READ),
        acl(TOPIC, "a/b", READ),
        acl(TOPIC, "x", 1),  # ANY is not an operation to store
        acl(TOPIC, "x", 99),  # unknown
        acl(TOPIC, "x", READ, pattern=MATCH),
        acl(99, "x", READ),
    ]
    r = admin.request(30, 3, {"creations": [*bad, acl(TOPIC, "apis-ok", READ)]})
    assert [x.error_code for x in r.results] == [int(ErrorCode.INVALID_REQUEST)] * len(bad) + [0]
    found = admin.request(29, 3, {"resource_type_filter": 2, "resource_name_filter": "apis-ok",
                                  "pattern_type_filter": 1, "operation": 1, "permission_type": 1})
    assert [(x.resource_name, x.pattern_type, [(a.principal, a.operation) for a in x.acls])
            for x in found.resources] == [("apis-ok", LITERAL, [("User:alice", READ)])]
    nothing_stored = admin.request(29, 3, {"resource_type_filter": 1, "resource_name_filter": "x",
                                           "pattern_type_filter": 1, "operation": 1, "permission_type": 1})
    assert nothing_stored.resources == []
    # MATCH: every pattern that applies to the name
    create_acls(admin, acl(TOPIC, "apis-", WRITE, pattern=PREFIXED))
    match = admin.request(29, 3, {"resource_type_filter": 2, "resource_name_filter": "apis-ok",
                                  "pattern_type_filter": MATCH, "operation": 1, "permission_type": 1})
    assert sorted((x.resource_name, x.pattern_type) for x in match.resources) == [("apis-", PREFIXED),
                                                                                  ("apis-ok", LITERAL)]
    # v0: literal patterns only, no pattern type on the wire
    v0 = admin.request(29, 0, {"resource_type_filter": 2, "resource_name_filter": None, "principal_filter": None,
                               "host_filter": None, "operation": 1, "permission_type": 1})
    assert "apis-ok" in {x.resource_name for x in v0.resources} and "apis-" not in {x.resource_name for x in
                                                                                    v0.resources}
    gone = delete_acls(admin, resource_type_filter=TOPIC, resource_name_filter="apis-ok", pattern_type_filter=MATCH)
    assert sorted((a.resource_name, a.operation) for a in gone.matching_acls) == [("apis-", WRITE), ("apis-ok", READ)]
    unknown_filter = delete_acls(admin, operation=0)
    assert unknown_filter.error_code == int(ErrorCode.INVALID_REQUEST)
    assert admin.request(29, 3, {"resource_type_filter": 2, "resource_name_filter": "apis-ok",
                                 "pattern_type_filter": MATCH, "operation": 1, "permission_type": 1}).resources == []


def test_without_an_authorizer_the_acl_apis_answer_security_disabled(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "plain").start()
    try:
        with RawClient(b.bootstrap) as c:
            assert c.request(29, 1, {"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                     "permission_type": 1}).error_code == int(ErrorCode.SECURITY_DISABLED)
            r = c.request(30, 1, {"creations": [acl(TOPIC, "t", READ)]})
            assert r.results[0].error_code == int(ErrorCode.SECURITY_DISABLED)
            r = c.request(31, 1, {"filters": [{"resource_type_filter": 1, "pattern_type_filter": 1, "operation": 1,
                                               "permission_type": 1}]})
            assert r.filter_results[0].error_code == int(ErrorCode.SECURITY_DISABLED)
    finally:
        b.close()
    assert not any(p.name.startswith("kafka-acl") for p in (tmp_path / "plain").rglob("*"))


def test_allow_everyone_if_no_acl_found_and_stored_layout_survive_a_restart(tmp_path: Path) -> None:
    b = acl_broker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"}).start()
    try:
        with sasl_raw(b, "admin") as admin:
            create_topic(admin, "open")
            create_topic(admin, "guarded")
            create_acls(admin, acl(TOPIC, "guarded", DESCRIBE, principal="User:bob"),
                        acl(TOPIC, "gu", READ, principal="User:alice", pattern=PREFIXED, permission=DENY))
        with sasl_raw(b, "alice") as c:
            codes = [c.request(2, 7, {"replica_id": -1, "topics": [{"name": t, "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]}).topics[0].partitions[0].error_code
                for t in ("open", "guarded")]
            assert codes == [0, TAF]  # no ACL at all: open; ACLs for others only: closed
        assert b.stop() == 0
    finally:
        b.close()
    # Kafka's paths and JSON, in the embedded store
    data = tmp_path / "broker" / "data"
    nodes = _embedded_nodes(data)
    assert json.loads(nodes["/kafka-acl/Topic/guarded"]) == {"version": 1, "acls": [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}
    assert nodes["/kafka-acl/Topic/guarded"].startswith(b'{"version":1,"acls":[{"principal":"User:bob",'
                                                        b'"permissionType":"Allow","operation":"Describe","host":"*"}')
    assert json.loads(nodes["/kafka-acl-extended/prefixed/Topic/gu"])["acls"][0]["permissionType"] == "Deny"
    changes = {k: v for k, v in nodes.items() if k.startswith("/kafka-acl-changes/acl_changes_")}
    assert b"TOPIC:guarded" in changes.values()
    ext = [json.loads(v) for k, v in nodes.items() if k.startswith("/kafka-acl-extended-changes/acl_changes_")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "gu", "patternType": "PREFIXED"} in ext
    b.start()
    try:
        with sasl_raw(b, "bob") as c:
            r = c.request(2, 7, {"replica_id": -1, "topics": [{"name": "guarded", "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]})
            assert r.topics[0].partitions[0].error_code == 0  # bob's ACL, loaded at start-up
    finally:
        b.close()


def _embedded_nodes(data: Path) -> dict[str, bytes]:
    import asyncio

    async def read() -> dict[str, bytes]:
        store = await EmbeddedStore.open(data / "samsa-metadata.db")
        out: dict[str, bytes] = {}
        try:
            async def walk(path: str) -> None:
                for kid in await store.children(path):
                    p = f"{path.rstrip('/')}/{kid}"
                    node = await store.get(p)
                    if node is not None:
                        out[p] = node[0]
                    await walk(p)
            for root in ("/kafka-acl", "/kafka-acl-extended", "/kafka-acl-changes", "/kafka-acl-extended-changes"):
                await walk(root)
        finally:
            await store.close()
        return out

    return asyncio.run(read())


def test_denials_are_logged_rate_limited_and_bad_authorizer_is_refused(broker: BrokerProcess,
                                                                      tmp_path: Path) -> None:
    with sasl_raw(broker, "bob") as c:
        for _ in range(5):
            c.request(2, 7, {"replica_id": -1, "topics": [{"name": "log-me", "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]})
    lines = [x for x in broker.log_text().splitlines() if "Principal = User:bob is Denied Operation = Describe" in x
             and "Topic:LITERAL:log-me" in x]
    assert len(lines) == 1 and "for request = ListOffsets" in lines[0]
    bad = acl_broker(tmp_path, **{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
    with pytest.raises(RuntimeError, match="authorizer.class.name: org.apache.kafka.metadata.authorizer."
                                           "StandardAuthorizer is not supported"):
        bad.start()
    assert "Traceback" not in bad.log_text()
