"""Client quotas on two brokers and a real ZooKeeper: set with `samsa configs` (Kafka's flags)
through one broker, stored at Kafka's paths in Kafka's JSON, in force on the other broker, and
still there after it restarts."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.broker.test_client_quotas import produce_request, wait_log
from tests.cli.helpers import ok, one_line_error, samsa
from tests.cluster.cluster import Cluster, produce_sync
from tests.rawclient import RawClient

pytestmark = pytest.mark.slow


def configs(c: Cluster, *args: str, via: int = 0) -> Any:
    return samsa("configs", "--bootstrap-server", c.broker(via).bootstrap, *args)


def throttle_of_a_first_produce(bootstrap: str) -> int:
    """A fresh client's 120 kB Produce: 2000 ms over a 10 kB/s quota (10 s minimum span). The
    topic need not exist: a request's bytes count whatever its outcome, as in Kafka."""
    with RawClient(bootstrap, client_id=f"fresh-{time.monotonic_ns()}") as c:
        return int(c.request(0, 9, produce_request("no-such-topic", 120_000)).throttle_time)


def test_quotas_are_kept_in_zookeeper_as_kafka_keeps_them_and_reach_every_broker(cluster: Any) -> None:
    c: Cluster = cluster(n=2)
    out = ok(configs(c, "--alter", "--add-config", "producer_byte_rate=10000,consumer_byte_rate=2097152",
                     "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                     "--entity-name", "app"))
    assert out == "Completed updating config for user alice.\n"
    out = ok(configs(c, "--alter", "--add-config", "producer_byte_rate=10000", "--entity-type", "clients",
                     "--entity-default"))
    assert out == "Completed updating default config for clients in the cluster.\n"
    ok(configs(c, "--alter", "--add-config", "request_percentage=200.5", "--entity-type", "users",
               "--entity-name", "User:CN=bob smith"))

    # Kafka's paths and JSON, names sanitized as Kafka's Sanitizer.
    def node(path: str) -> Any:
        data, _ = c.zk.get(c.chroot + path)
        return json.loads(data)

    assert node("/config/users/alice/clients/app") == {
        "version": 1, "config": {"producer_byte_rate": "10000", "consumer_byte_rate": "2097152"}}
    assert node("/config/clients/<default>") == {"version": 1, "config": {"producer_byte_rate": "10000"}}
    assert node("/config/users/User%3ACN%3Dbob%20smith") == {"version": 1, "config": {"request_percentage": "200.5"}}
    changes = [node(f"/config/changes/{k}") for k in sorted(c.zk.get_children(c.chroot + "/config/changes"))]
    assert {"version": 2, "entity_path": "users/alice/clients/app"} in changes
    assert {"version": 2, "entity_path": "clients/<default>"} in changes

    # Described as kafka-configs.sh describes them, through either broker.
    assert ok(configs(c, "--describe", "--entity-type", "clients", via=1)) == \
        "Quota configs for the default client-id are producer_byte_rate=10000.0\n"
    assert ok(configs(c, "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                      "clients", "--entity-name", "app", via=1)) == \
        "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2097152.0, " \
        "producer_byte_rate=10000.0\n"
    assert ok(configs(c, "--describe", "--entity-type", "users")) == \
        "Quota configs for user-principal 'User:CN=bob smith' are request_percentage=200.5\n"

    # In force on the other broker.
    wait_log(c.broker(1), "producer_byte_rate quota of default client-id is now 10000")
    assert throttle_of_a_first_produce(c.broker(1).bootstrap) == pytest.approx(2000, abs=30)

    # --delete-config removes one key, leaving the others; a key that is not set is refused.
    ok(configs(c, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users", "--entity-name",
               "alice", "--entity-type", "clients", "--entity-name", "app"))
    assert node("/config/users/alice/clients/app") == {"version": 1, "config": {"producer_byte_rate": "10000"}}
    err = one_line_error(configs(c, "--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users",
                                 "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app"))
    assert "Invalid config(s): consumer_byte_rate" in err
    err = one_line_error(configs(c, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
                                 "--entity-name", "x"))
    assert "producer_byte_rate must be a LONG value" in err
    err = one_line_error(configs(c, "--alter", "--add-config", "retention.ms=5", "--entity-type", "clients",
                                 "--entity-name", "x"))
    assert "Only quota configs can be added for 'clients'" in err

    # Kept across a restart: loaded from ZooKeeper at start-up.
    c.sigterm(1)
    c.start(1)
    wait_log(c.broker(1), "producer_byte_rate quota of default client-id is now 10000", count=2)
    assert throttle_of_a_first_produce(c.broker(1).bootstrap) == pytest.approx(2000, abs=30)

    # Removed through broker 1: lifted on broker 0.
    ok(configs(c, "--alter", "--delete-config", "producer_byte_rate", "--entity-type", "clients", "--entity-default",
               via=1))
    wait_log(c.broker(0), "Removed producer_byte_rate quota of default client-id")
    assert throttle_of_a_first_produce(c.broker(0).bootstrap) == 0

    # Replication is no client's: a follower's fetches are not held to a consumer quota that
    # applies to its principal (User:ANONYMOUS here).
    ok(configs(c, "--alter", "--add-config", "consumer_byte_rate=1000", "--entity-type", "users", "--entity-default"))
    for i in (0, 1):
        wait_log(c.broker(i), "consumer_byte_rate quota of default user is now 1000")
    c.create_topic("replicated", rf=2)
    reports = produce_sync(c.bootstrap, "replicated", [bytes(100_000)] * 20, acks="all", timeout=30)
    assert all(err is None for _, _, err in reports)  # 2 MB through the ISR in time: not 1 kB/s
    c.wait_replicas_identical("replicated")
