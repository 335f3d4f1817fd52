"""Which broker configs DescribeConfigs calls read-only: Samsa beside Apache Kafka.

Kafka's DescribeConfigs says `read_only` false for exactly the keys of its
DynamicBrokerConfig.AllDynamicConfigs (per-broker and cluster-wide), true for the rest. Samsa
follows Kafka 3.9, the last Kafka on ZooKeeper, as it does elsewhere
(samsa/config_defs.py: KAFKA_DYNAMIC_BROKER_CONFIGS). Two checks:

* the list itself against Kafka 3.9's: a small Java program prints AllDynamicConfigs from
  Kafka 3.9.2's own jars (`scripts/kafka-jars.sh kafka39`), and every key a Samsa broker
  describes is read-only exactly when Kafka 3.9 (or Samsa itself) cannot change it at runtime;
* a Samsa broker's DescribeConfigs beside a real Kafka 4.4's (KRaft, tests/kafkaproc.py), key by
  key for the keys both know, with Kafka 4's changes as the listed differences.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from samsa.config_defs import BROKER_DEFS, KAFKA_DYNAMIC_BROKER_CONFIGS
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

# keys whose read_only differs from Kafka 4.4 (KRaft), and why
DIFFERENCES_FROM_KAFKA_4 = {
    "advertised.listeners": "dynamic per broker in Kafka 3.9 (ZooKeeper mode, which Samsa follows); Kafka 4's "
                            "KRaft brokers cannot change it at runtime",
    "log.message.timestamp.difference.max.ms": "removed in Kafka 4 (KIP-937's before/after keys replace it); "
                                               "Kafka 3.9 still changes it at runtime",
    "log.message.downconversion.enable": "removed in Kafka 4 with message format v0/v1; dynamic in Kafka 3.9",
}

ALL_DYNAMIC = """
import java.util.TreeSet;
public class AllDynamic {
    public static void main(String[] args) throws Exception {
        Class<?> c = Class.forName("kafka.server.DynamicBrokerConfig$");
        Object module = c.getField("MODULE$").get(null);
        scala.collection.Iterable<?> keys = (scala.collection.Iterable<?>) c.getMethod("AllDynamicConfigs").invoke(module);
        TreeSet<String> sorted = new TreeSet<>();
        scala.collection.Iterator<?> it = keys.iterator();
        while (it.hasNext()) sorted.add(String.valueOf(it.next()));
        for (String k : sorted) System.out.println(k);
    }
}
"""


def _unavailable(why: str) -> None:
    if os.environ.get("SAMSA_REQUIRE_JAVA", "") not in ("", "0"):
        pytest.fail(f"{why} (and SAMSA_REQUIRE_JAVA is set)")
    pytest.skip(f"{why}: run scripts/install-deps.sh (SAMSA_REQUIRE_JAVA=1 makes this a failure)")


def kafka39_dynamic_configs(workdir: Path) -> set[str]:
    from tests.kafkaproc import JarsMissing, kafka_classpath

    if shutil.which("javac") is None:
        _unavailable("no JDK: javac is needed to ask Kafka 3.9 for its dynamic configs")
    try:
        classpath = kafka_classpath("kafka39")
    except JarsMissing as e:
        _unavailable(f"Kafka 3.9's jars could not be fetched: {e}")
    (workdir / "AllDynamic.java").write_text(ALL_DYNAMIC)
    built = subprocess.run(["javac", "-cp", classpath, "-d", str(workdir), str(workdir / "AllDynamic.java")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(["java", "-cp", f"{classpath}{os.pathsep}{workdir}", "AllDynamic"], capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    return set(ran.stdout.split())


def describe_broker(bootstrap: str, broker_id: str) -> dict[str, bool]:
    """Every config of the broker (DescribeConfigs v4) -> read_only."""
    with RawClient(bootstrap, timeout=30) as c:
        resp = c.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": broker_id,
                                                "configuration_keys": None}],
                                 "include_synonyms": False, "include_documentation": False})
    r = resp.results[0]
    assert r.error_code == 0, r.error_message
    return {e.name: bool(e.read_only) for e in r.configs}


def test_read_only_is_kafka_39s(broker: BrokerProcess, tmp_path: Path) -> None:
    kafka = kafka39_dynamic_configs(tmp_path)
    assert kafka == set(KAFKA_DYNAMIC_BROKER_CONFIGS)
    samsa = describe_broker(broker.bootstrap, "0")
    assert set(samsa) == set(BROKER_DEFS)
    wrong = {k: ro for k, ro in samsa.items() if ro != (k not in kafka and not BROKER_DEFS[k].dynamic)}
    assert not wrong, wrong
    assert samsa["advertised.listeners"] is False and samsa["listeners"] is False
    assert samsa["broker.id"] is True and samsa["log.dirs"] is True
    # the ones only Samsa changes at runtime (dynamic in Kafka 4, not in 3.9)
    assert {k for k, ro in samsa.items() if not ro and k not in kafka} == {
        "follower.replication.throttled.rate", "leader.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second"}


def test_advertised_listeners_is_refused_with_a_reason(broker: BrokerProcess) -> None:
    """Reported dynamic, as Kafka 3.9 does, but not changed while running: the refusal says so."""
    with RawClient(broker.bootstrap) as c:
        resp = c.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "0", "configs": [
            {"name": "advertised.listeners", "config_operation": 0, "value": "PLAINTEXT://elsewhere:9092"}]}],
            "validate_only": True})
    r: Any = resp.responses[0]
    assert r.error_code == 40  # INVALID_CONFIG
    assert "cannot be changed at runtime in Samsa (Kafka can)" in r.error_message


def test_read_only_beside_kafka_4(broker: BrokerProcess, apache_kafka: str) -> None:
    samsa = describe_broker(broker.bootstrap, "0")
    kafka = describe_broker(apache_kafka, "1")
    both = sorted(set(samsa) & set(kafka))
    assert len(both) > 120
    differ = {k for k in both if samsa[k] != kafka[k]}
    known = {k for k in DIFFERENCES_FROM_KAFKA_4 if k in both}
    assert differ == known, {k: (samsa[k], kafka[k]) for k in differ ^ known}
