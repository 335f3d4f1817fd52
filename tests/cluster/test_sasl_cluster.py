"""Replication over SASL_SSL: three brokers whose inter-broker listener is SASL_SSL, so that
every follower authenticates to its leader (sasl.mechanism.inter.broker.protocol, with the
username/password of the listener's JAAS config) over TLS. Clients use the same listener."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from tests.brokerproc import free_port
from tests.cluster.cluster import Cluster, produce_sync
from tests.pki import make_pki

pytestmark = pytest.mark.slow

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
        'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')


def _secure(c: Cluster, pki: Any, jaas: str = JAAS, **extra: str) -> list[int]:
    ports = []
    for i in range(len(c.brokers)):
        path = c.broker(i).config_path
        port = free_port()
        ports.append(port)
        text = path.read_text()
        text = re.sub(r"(?m)^listeners=(.*)$", lambda m: f"listeners={m.group(1)},SASL_SSL://127.0.0.1:{port}", text)
        text += "".join(f"{k}={v}\n" for k, v in {
            "inter.broker.listener.name": "SASL_SSL", "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.keystore("server"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.ca, **extra}.items())
        path.write_text(text)
    return ports


def test_a_sasl_ssl_cluster_with_acls_replicates_and_fails_over(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """With the ACL authorizer on: the brokers' principal (User:broker) is a super user, so
    followers may fetch (CLUSTER_ACTION); alice may produce and consume once `samsa acls`
    grants it, and not before."""
    pki = make_pki(tmp_path / "pki")
    c: Cluster = cluster(3, start=False)
    # (User:ANONYMOUS: the test's own admin calls on the PLAINTEXT listener)
    # (sessions of 2 s: followers and clients re-authenticate on their connections, KIP-368)
    ports = _secure(c, pki, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                "super.users": "User:broker;User:ANONYMOUS", "connections.max.reauth.ms": "2000"})
    c.start_all()
    secure = {"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
              "sasl.password": "alice-secret", "ssl.ca.location": pki.ca}
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    topic = f"sasl-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, rf=3)  # waits for the full ISR: the followers authenticated and fetched
    denied = produce_sync(bootstrap, topic, [b"x"], timeout=15, **secure)
    assert denied[0][2] is not None and "authoriz" in denied[0][2].str().lower(), denied
    r = subprocess.run([sys.executable, "-m", "samsa", "acls", "--bootstrap-server", c.bootstrap, "--add",
                        "--allow-principal", "User:alice", "--producer", "--consumer", "--topic", topic,
                        "--group", f"g-{topic}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # Each broker serves DescribeAcls from its own cache: wait until every one has the grant.
    grant = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", None,
                             AclOperation.ANY, AclPermissionType.ANY)
    for b in c.brokers:
        admin = c.admin(b.bootstrap)
        c.wait_for(lambda admin=admin: admin.describe_acls(grant).result(10), 30, "the grant on every broker")
    values = [b"m%04d" % i for i in range(300)]
    assert all(err is None for _, _, err in produce_sync(bootstrap, topic, values, **secure))
    leader = c.leader_of(topic)
    assert leader is not None
    c.kill9(leader)
    new = c.wait_leader_change(topic, 0, leader)
    assert new != leader
    more = [b"n%04d" % i for i in range(100)]
    assert all(err is None for _, _, err in produce_sync(bootstrap, topic, more, **secure))
    c.wait_for(lambda: sorted(c.isr(topic)) == sorted(b for b in range(3) if b != leader), 30,
               "the two live brokers in the ISR")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", **secure})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while len(got) < 400:
            m = consumer.poll(30)
            assert m is not None, f"only {len(got)} of 400 records came back"
            if m.error() is None:
                got.append(m.value())
    finally:
        consumer.close()
    assert got == values + more
    for i in range(3):
        assert "authentication failed" not in c.broker(i).log_text()
        assert "its SASL session expired" not in c.broker(i).log_text()


def test_a_follower_with_a_wrong_inter_broker_password_says_so_and_does_not_replicate(  # type: ignore[no-untyped-def]
        cluster, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    c: Cluster = cluster(2, start=False)
    _secure(c, pki, **{"replica.lag.time.max.ms": "3000"})
    path = c.broker(1).config_path
    path.write_text(path.read_text().replace('password="broker-secret" user_broker', 'password="wrong" user_broker'))
    c.start_all()
    topic = f"sasl-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, rf=2, wait_isr=False, assignment=[[0, 1]])
    c.wait_for(lambda: "SASL PLAIN authentication as broker to broker 0" in c.broker(1).log_text(), 30,
               "broker 1 says that it could not authenticate to broker 0")
    assert "Invalid username or password" in c.broker(1).log_text()
    assert "SASL PLAIN authentication failed" in c.broker(0).log_text()  # (and the leader says so too)
    # It never fetched: the leader drops it from the ISR once replica.lag.time.max.ms has passed.
    c.wait_for(lambda: c.isr(topic) == [0], 30, "broker 1 out of the ISR")
