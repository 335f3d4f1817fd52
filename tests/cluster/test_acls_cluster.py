"""ACLs on a ZooKeeper cluster: an ACL created through one broker is in ZooKeeper at Kafka's
path with Kafka's JSON, takes effect on the other broker within a second (it follows
/kafka-acl-changes), and survives that broker's restart. Clients are SASL/PLAIN users on a
SASL_PLAINTEXT listener; brokers replicate over PLAINTEXT as User:ANONYMOUS, a super user (as
Kafka's docs recommend for the brokers' own principal)."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

import pytest

from samsa.protocol.errors import ErrorCode
from tests.broker.test_acls import ALLOW, DESCRIBE, JAAS, LITERAL, PREFIXED, READ, TAF, TOPIC, acl, create_acls
from tests.brokerproc import BrokerProcess, free_port
from tests.cluster.cluster import Cluster, produce_sync
from tests.rawclient import RawClient

pytestmark = pytest.mark.slow


class SaslPort:
    """A broker's SASL_PLAINTEXT listener, for raw requests as one user."""

    def __init__(self, b: BrokerProcess, port: int) -> None:
        self.bootstrap = f"{b.host}:{port}"

    def client(self, user: str) -> RawClient:
        c = RawClient(self.bootstrap)
        assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
        assert c.request(36, 2, {"auth_bytes": f"\0{user}\0{user}-secret".encode()}).error_code == 0
        return c


def secured_cluster(cluster: Any, n: int = 2) -> tuple[Cluster, list[SaslPort]]:
    c: Cluster = cluster(n, start=False, default_replication_factor=n, offsets_topic_replication_factor=n)
    ports = []
    for i in range(n):
        port = free_port()
        path = c.broker(i).config_path
        text = re.sub(r"(?m)^listeners=(.*)$", lambda m: f"listeners={m.group(1)},SASL_PLAINTEXT://127.0.0.1:{port}",
                      path.read_text())
        text += "".join(f"{k}={v}\n" for k, v in {
            "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin"}.items())
        path.write_text(text)
        ports.append(SaslPort(c.broker(i), port))
    return c.start_all(), ports


def list_offsets(c: RawClient, topic: str) -> int:
    r = c.request(2, 7, {"replica_id": -1, "topics": [{"name": topic, "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]})
    return int(r.topics[0].partitions[0].error_code)


def test_an_acl_set_on_one_broker_applies_on_the_other_and_survives_restart(cluster: Any) -> None:
    c, sasl = secured_cluster(cluster)
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, rf=2)  # (replication works: the followers are super users)
    assert all(err is None for _, _, err in produce_sync(c.bootstrap, topic, [b"a", b"b"]))
    with sasl[1].client("alice") as alice:
        assert list_offsets(alice, topic) == TAF
        with sasl[0].client("admin") as admin:
            t0 = time.monotonic()
            create_acls(admin, acl(TOPIC, topic, READ), acl(TOPIC, topic[:4], DESCRIBE, principal="User:bob",
                                                             pattern=PREFIXED))
        while list_offsets(alice, topic) == TAF:  # broker 1 learns it from /kafka-acl-changes
            assert time.monotonic() - t0 < 1.0, "broker 1 did not apply the ACL within a second"
            time.sleep(0.02)
    node = c._zget(f"/kafka-acl/Topic/{topic}")
    assert node == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                    b'"operation":"Read","host":"*"}]}')
    prefixed = c._zget(f"/kafka-acl-extended/prefixed/Topic/{topic[:4]}")
    assert prefixed is not None and json.loads(prefixed)["acls"][0]["operation"] == "Describe"
    changes = [c._zget(f"/kafka-acl-changes/{k}") for k in c.zk.get_children(c.chroot + "/kafka-acl-changes")]
    assert f"TOPIC:{topic}".encode() in changes
    ext = [json.loads(c._zget(f"/kafka-acl-extended-changes/{k}") or b"{}")
           for k in c.zk.get_children(c.chroot + "/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": topic[:4], "patternType": "PREFIXED"} in ext
    # a broker restarted reads every ACL at start-up
    c.sigterm(1)
    c.start(1)
    with sasl[1].client("alice") as alice, sasl[1].client("bob") as bob:
        assert list_offsets(alice, topic) in (0, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        assert list_offsets(bob, topic) in (0, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        assert list_offsets(bob, "other-" + topic) == TAF
    # removed on broker 1: gone on broker 0 too
    with sasl[1].client("admin") as admin:
        r = admin.request(31, 3, {"filters": [{"resource_type_filter": TOPIC, "resource_name_filter": topic,
                                                "pattern_type_filter": LITERAL, "operation": 1,
                                                "permission_type": ALLOW}]})
        assert len(r.filter_results[0].matching_acls) == 1
    with sasl[0].client("alice") as alice:
        deadline = time.monotonic() + 5
        while list_offsets(alice, topic) != TAF:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert c._zget(f"/kafka-acl/Topic/{topic}") is None  # no ACL left: the node is deleted
