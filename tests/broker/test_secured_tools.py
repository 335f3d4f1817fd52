"""Samsa's Kafka-style tools against a SASL_SSL listener, with a Java client properties file
(`--command-config` and its console-tool spellings), as a Kafka user has one: sasl.jaas.config,
sasl.mechanism, a PEM trust store. Including the requests the tools send with Samsa's own codec
(broker-default configs), which must speak TLS and SASL as well."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.broker.test_sasl import sasl_broker
from tests.brokerproc import BrokerProcess
from tests.pki import make_pki


def _tool(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


def _client_props(path: Path, ca: Path, password: str = "alice-secret") -> Path:
    path.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                    f'    username="alice" password="{password}";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={ca}\n")
    return path


def test_the_tools_work_over_sasl_ssl_with_a_java_properties_file(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    b: BrokerProcess = sasl_broker(tmp_path, "SASL_SSL", **{"ssl.keystore.type": "PEM",
                                                            "ssl.keystore.location": str(pki.keystore("server"))})
    b.start()
    try:
        props = str(_client_props(tmp_path / "client.properties", pki.ca))
        topic = f"sec-{uuid.uuid4().hex[:6]}"
        r = _tool("topics", "--bootstrap-server", b.bootstrap, "--command-config", props, "--create", "--topic", topic)
        assert r.returncode == 0, r.stderr
        r = _tool("topics", "--bootstrap-server", b.bootstrap, "--command-config", props, "--list")
        assert topic in r.stdout.split()
        # Broker defaults go through Samsa's own codec (librdkafka cannot address them).
        r = _tool("configs", "--bootstrap-server", b.bootstrap, "--command-config", props, "--entity-type", "brokers",
                  "--entity-default", "--alter", "--add-config", "log.retention.ms=3600000")
        assert r.returncode == 0, r.stderr
        r = _tool("configs", "--bootstrap-server", b.bootstrap, "--command-config", props, "--entity-type", "brokers",
                  "--entity-default", "--describe")
        assert "log.retention.ms=3600000" in r.stdout, r.stdout + r.stderr
        r = _tool("console-producer", "--bootstrap-server", b.bootstrap, "--producer.config", props, "--topic", topic,
                  stdin="one\ntwo\n")
        assert r.returncode == 0, r.stderr
        r = _tool("console-consumer", "--bootstrap-server", b.bootstrap, "--consumer.config", props, "--topic", topic,
                  "--from-beginning", "--max-messages", "2")
        assert r.stdout.split() == ["one", "two"], r.stderr
        # Wrong credentials: one line, non-zero exit, for the librdkafka path and the raw one.
        bad = str(_client_props(tmp_path / "bad.properties", pki.ca, password="wrong"))
        r = _tool("configs", "--bootstrap-server", b.bootstrap, "--command-config", bad, "--entity-type", "brokers",
                  "--entity-default", "--describe", timeout=90)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "authentication" in r.stderr.lower(), r.stderr
    finally:
        b.stop()


def test_alter_configs_takes_kafkas_dynamic_sasl_keys_and_refuses_what_cannot_change(broker: BrokerProcess) -> None:
    """Kafka's dynamic listener keys for Kerberos and token logins are taken (and described as
    without effect: Samsa offers neither mechanism); a key that cannot change at runtime is
    refused with one line saying so."""
    r = _tool("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
              "--alter", "--add-config", "sasl.kerberos.min.time.before.relogin=30000,sasl.kerberos.service.name=kafka")
    assert r.returncode == 0, r.stderr
    r = _tool("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
              "--describe")
    assert "sasl.kerberos.min.time.before.relogin=30000" in r.stdout, r.stdout
    r = _tool("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
              "--alter", "--add-config", "ssl.keystore.location=/tmp/x.pem")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "ssl.keystore.location" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    _tool("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
          "--alter", "--delete-config", "sasl.kerberos.min.time.before.relogin,sasl.kerberos.service.name")
