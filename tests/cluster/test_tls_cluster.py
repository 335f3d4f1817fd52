"""Replication over TLS: three brokers whose inter-broker listener is SSL with mutual TLS
(ssl.client.auth=required), so that a follower fetching in plaintext, or without its broker
certificate, would be refused. Clients use a PLAINTEXT listener beside it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.brokerproc import free_port
from tests.cluster.cluster import Cluster, produce_sync
from tests.pki import make_pki

pytestmark = pytest.mark.slow


def test_followers_replicate_over_mutual_tls_and_take_over(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pki = make_pki(tmp_path / "pki")
    c: Cluster = cluster(3, start=False)
    for i in range(3):
        path = c.broker(i).config_path
        text = path.read_text()
        text = re.sub(r"(?m)^listeners=(.*)$", lambda m: f"listeners={m.group(1)},SSL://127.0.0.1:{free_port()}", text)
        text += "".join(f"{k}={v}\n" for k, v in {
            "inter.broker.listener.name": "SSL", "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki.keystore("server"), "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki.ca, "ssl.client.auth": "required"}.items())
        path.write_text(text)
    c.start_all()
    topic = f"tls-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, rf=3)  # waits for the full ISR: the followers fetched over TLS
    values = [b"m%04d" % i for i in range(300)]
    assert all(err is None for _, _, err in produce_sync(c.bootstrap, topic, values))
    leader = c.leader_of(topic)
    assert leader is not None
    c.kill9(leader)
    new = c.wait_leader_change(topic, 0, leader)
    assert new != leader
    more = [b"n%04d" % i for i in range(100)]
    assert all(err is None for _, _, err in produce_sync(c.bootstrap, topic, more))
    for i in range(3):
        if i != leader:
            assert "TLS" not in "".join(line for line in c.broker(i).log_text().splitlines() if "failed" in line)
