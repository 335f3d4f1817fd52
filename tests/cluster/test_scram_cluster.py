"""SCRAM users kept in ZooKeeper as Kafka keeps them, across a 2-broker cluster.

The first user, the brokers' own (their inter-broker listener is SASL_PLAINTEXT with
SCRAM-SHA-256), is made with `samsa configs --zookeeper` before any broker runs (the tool does
the PBKDF2 and writes /config/users/<user> in Kafka's format, checked here against an
independent computation); the brokers then replicate as that user, and clients log it in. A credential added, changed and deleted
through the API on broker 0 (`samsa configs --bootstrap-server`, confluent-kafka's admin client)
takes effect on broker 1, which follows /config/changes."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.broker.test_scram import raw_login, upsert, wait_login
from tests.brokerproc import free_port
from tests.cluster.cluster import Cluster
from tests.scramclient import expected_keys

pytestmark = pytest.mark.slow


def configs_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa", "configs", *args], capture_output=True, text=True,
                          timeout=90)


def with_sasl_listeners(c: Cluster) -> list[str]:
    """Add a SASL_PLAINTEXT listener offering both SCRAMs to each broker, the inter-broker one
    (as user admin): their addresses."""
    out = []
    for i in range(c.n):
        port = free_port()
        path = c.broker(i).config_path
        text = re.sub(r"(?m)^listeners=(.*)$", lambda m: f"listeners={m.group(1)},SASL_PLAINTEXT://127.0.0.1:{port}",
                      path.read_text())
        path.write_text(text + "".join(f"{k}={v}\n" for k, v in {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                'password="admin-secret";'}.items()))
        out.append(f"127.0.0.1:{port}")
    return out


def test_scram_users_in_zookeeper_across_a_cluster(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = cluster(2, start=False, default_replication_factor=2, offsets_topic_replication_factor=2)
    sasl = with_sasl_listeners(c)

    # before any broker runs: straight into ZooKeeper
    r = configs_tool("--zookeeper", c.zk_connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
                     "--add-config", "SCRAM-SHA-256=[iterations=8192,password=admin-secret],"
                                     "SCRAM-SHA-512=[password=admin-secret]")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Completed updating config for entity: user-principal 'admin'."
    data, _ = c.zk.get(f"{c.chroot}/config/users/admin")
    doc = json.loads(data)
    assert list(doc) == ["version", "config"] and doc["version"] == 1
    assert sorted(doc["config"]) == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    for mechanism, iterations in (("SCRAM-SHA-256", 8192), ("SCRAM-SHA-512", 4096)):
        m = re.fullmatch(r"salt=([A-Za-z0-9+/=]+),stored_key=([A-Za-z0-9+/=]+),server_key=([A-Za-z0-9+/=]+),"
                         r"iterations=(\d+)", doc["config"][mechanism])
        assert m is not None, doc["config"][mechanism]
        salt, stored, server = (base64.b64decode(m.group(k)) for k in (1, 2, 3))
        assert int(m.group(4)) == iterations
        assert expected_keys(mechanism, "admin-secret", salt, iterations) == (stored, server)
    changes = [json.loads(c.zk.get(f"{c.chroot}/config/changes/{k}")[0])
               for k in c.zk.get_children(f"{c.chroot}/config/changes")]
    assert {"version": 2, "entity_path": "users/admin"} in changes
    r = configs_tool("--zookeeper", c.zk_connect, "--describe", "--entity-type", "users", "--entity-name", "admin")
    assert r.returncode == 0 and r.stdout.startswith("Configs for user-principal 'admin' are SCRAM-SHA-"), r

    c.start_all()
    c.create_topic("replicated", rf=2)  # waits for the full ISR: the follower fetched as admin over SCRAM
    for address in sasl:  # loaded at start-up, before the listeners serve
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert raw_login(address, mechanism, "admin", "admin-secret") == (0, None)
            assert raw_login(address, mechanism, "admin", "nope")[0] == 58

    # through the API on broker 0, followed by broker 1
    b0 = c.broker(0).bootstrap
    r = configs_tool("--bootstrap-server", b0, "--alter", "--entity-type", "users", "--entity-name", "alice",
                     "--add-config", "SCRAM-SHA-256=[password=alice-1]")
    assert r.returncode == 0 and r.stdout.strip() == "Completed updating config for user alice.", r
    wait_login(sasl[1], "SCRAM-SHA-256", "alice", "alice-1")
    upsert(b0, "alice", "alice-2", {"SCRAM-SHA-256": 4096})  # a new password
    wait_login(sasl[1], "SCRAM-SHA-256", "alice", "alice-2")
    assert raw_login(sasl[1], "SCRAM-SHA-256", "alice", "alice-1")[0] == 58
    r = configs_tool("--bootstrap-server", c.broker(1).bootstrap, "--describe", "--entity-type", "users",
                     "--entity-name", "alice")
    assert r.stdout.strip() == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"
    r = configs_tool("--bootstrap-server", b0, "--alter", "--entity-type", "users", "--entity-name", "alice",
                     "--delete-config", "SCRAM-SHA-256")
    assert r.returncode == 0, r.stderr
    wait_login(sasl[1], "SCRAM-SHA-256", "alice", "alice-2", ok=False)
    r = configs_tool("--bootstrap-server", b0, "--describe", "--entity-type", "users")
    assert r.returncode == 0 and r.stdout.strip() == (
        "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"), r
    r = configs_tool("--bootstrap-server", b0, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "Error retrieving SCRAM credential configs for user-principal 'alice': " in r.stdout
    assert "does not exist" in r.stdout

    # bad input: one line, a non-zero exit, nothing changed
    for bad, says in (("SCRAM-SHA-256=[iterations=100,password=x]", "less than the minimum 4096"),
                      ("SCRAM-SHA-256=[pass=x]", "Invalid credential property"),
                      ("SCRAM-SHA-1=[password=x]", "Unexpected config names: SCRAM-SHA-1")):
        for where in (("--bootstrap-server", b0), ("--zookeeper", c.zk_connect)):
            r = configs_tool(*where, "--alter", "--entity-type", "users", "--entity-name", "admin",
                             "--add-config", bad)
            assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r
    r = configs_tool("--zookeeper", c.zk_connect, "--alter", "--entity-type", "users", "--entity-name", "admin",
                     "--delete-config", "SCRAM-SHA-1")
    assert r.returncode != 0 and "Unexpected config names: SCRAM-SHA-1" in r.stderr
    r = configs_tool("--zookeeper", c.zk_connect, "--alter", "--entity-type", "users", "--entity-name", "bob",
                     "--delete-config", "SCRAM-SHA-256")
    assert r.returncode != 0 and r.stderr.strip().endswith("Invalid config(s): SCRAM-SHA-256"), r
    assert json.loads(c.zk.get(f"{c.chroot}/config/users/admin")[0]) == doc  # untouched
    assert c.zk.exists(f"{c.chroot}/config/users/bob") is None
    for i in range(2):
        assert "Traceback" not in c.broker(i).log_text()
