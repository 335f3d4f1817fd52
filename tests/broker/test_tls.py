"""SSL listeners with real TLS and real clients, certificates made by the test (tests/pki.py):
librdkafka and kafka-python produce and consume through TLS; mutual TLS refuses a client
without a certificate; a plaintext client on the TLS port (and TLS on a plaintext port) only
loses its connection; key stores load as PEM (file or inline) and PKCS12; JKS and a missing
key store are refused at start-up with a one-line reason."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.brokerproc import BrokerProcess, free_port
from tests.pki import Pki, make_pki
from tests.rawclient import RawClient


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_broker(tmp_path: Path, pki: Pki, **extra: str) -> BrokerProcess:
    port = free_port()
    props = {"listeners": f"SSL://127.0.0.1:{port}", "ssl.keystore.type": "PEM",
             "ssl.keystore.location": str(pki.keystore("server")), **extra}
    return BrokerProcess(tmp_path / "broker", props, port=port)


def rdkafka_conf(b: BrokerProcess, pki: Pki, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca), **extra}


def produce(conf: dict[str, Any], topic: str, values: list[bytes]) -> None:
    p = Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20000})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(30) == 0 and not errors, errors


def consume(conf: dict[str, Any], topic: str, n: int) -> list[bytes]:
    c = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def test_librdkafka_and_kafka_python_produce_and_consume_over_tls(tmp_path: Path, pki: Pki) -> None:
    b = tls_broker(tmp_path, pki).start()
    try:
        values = [b"v%05d-" % i + b"x" * 2000 for i in range(2000)]  # 4 MB: fetches of many batches
        produce(rdkafka_conf(b, pki), "secure", values)
        assert consume(rdkafka_conf(b, pki), "secure", len(values)) == values
        k = KafkaConsumer(bootstrap_servers=b.bootstrap, security_protocol="SSL", ssl_cafile=str(pki.ca),
                          group_id=None, enable_auto_commit=False, auto_offset_reset="none")
        got: list[bytes] = []
        try:
            tp = KTopicPartition("secure", 0)
            k.assign([tp])
            k.seek(tp, 0)
            deadline = time.monotonic() + 30
            while len(got) < len(values) and time.monotonic() < deadline:
                got += [m.value for m in k.poll(timeout_ms=500).get(tp, [])]
        finally:
            k.close()
        assert got == values
        assert "Traceback" not in b.log_text()
    finally:
        b.close()


def test_a_plaintext_client_on_the_tls_port_loses_only_its_connection(tmp_path: Path, pki: Pki) -> None:
    b = tls_broker(tmp_path, pki).start()
    try:
        with RawClient(b.bootstrap) as c:  # a Kafka request where a TLS ClientHello belongs
            c.send_bytes(b"\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00")
            assert c.is_closed_by_peer()
        produce(rdkafka_conf(b, pki), "after", [b"still here"])
        assert "TLS handshake failed with 127.0.0.1" in b.log_text()
    finally:
        b.close()


def test_tls_on_a_plaintext_port_loses_only_its_connection(broker: BrokerProcess) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((broker.host, broker.port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.recv(1)
    with RawClient(broker.bootstrap) as c:
        assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path: Path, pki: Pki) -> None:
    b = tls_broker(tmp_path, pki, **{"ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                                     "ssl.truststore.location": str(pki.ca)}).start()
    try:
        with_cert = rdkafka_conf(b, pki, **{"ssl.certificate.location": str(pki.cert("alice")),
                                            "ssl.key.location": str(pki.key("alice"))})
        produce(with_cert, "mtls", [b"a", b"b"])
        assert consume(with_cert, "mtls", 2) == [b"a", b"b"]
        p = Producer({**rdkafka_conf(b, pki), "message.timeout.ms": 3000})
        failed: list[Any] = []
        p.produce("mtls", b"c", partition=0, on_delivery=lambda err, msg: failed.append(err))
        p.flush(10)
        assert failed and failed[0] is not None  # no certificate: the handshake fails, nothing delivered
        c = Consumer({**with_cert, "group.id": "mtls-check"})
        try:  # nothing was appended: the log still ends at 2
            assert c.get_watermark_offsets(TopicPartition("mtls", 0), timeout=10) == (0, 2)
        finally:
            c.close()
    finally:
        b.close()


def test_key_stores_load_from_pkcs12_and_inline_pem(tmp_path: Path, pki: Pki) -> None:
    p12 = pki.pkcs12("server", "s3cret")
    b = tls_broker(tmp_path / "p12", pki, **{"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
                                             "ssl.keystore.password": "s3cret"}).start()
    try:
        produce(rdkafka_conf(b, pki), "p12", [b"x"])
    finally:
        b.close()
    key = pki.key("server").read_text().strip().replace("\n", "\\n")
    chain = pki.cert("server").read_text().strip().replace("\n", "\\n")
    port = free_port()
    # (in a properties file a PEM is one line with \n escapes, as Kafka's docs show)
    b = BrokerProcess(tmp_path / "inline", {"listeners": f"SSL://127.0.0.1:{port}", "ssl.keystore.type": "PEM",
                                            "ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain},
                      port=port).start()
    try:
        produce(rdkafka_conf(b, pki), "inline", [b"y"])
    finally:
        b.close()


def _start_fails(tmp_path: Path, props: dict[str, str]) -> str:
    port = free_port()
    b = BrokerProcess(tmp_path, props | {"listeners": props.get("listeners", f"SSL://127.0.0.1:{port}")}, port=port)
    r = subprocess.run([sys.executable, "-m", "samsa", "broker", "start", str(b.config_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    return r.stderr.strip().splitlines()[-1]


def test_jks_and_missing_keys_are_refused_with_the_reason(tmp_path: Path, pki: Pki) -> None:
    line = _start_fails(tmp_path / "jks", {"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x/server.jks"})
    assert "JKS" in line and "keytool -importkeystore" in line
    line = _start_fails(tmp_path / "nokey", {})
    assert "needs a key and certificate" in line


def test_a_client_closing_tls_cleanly_gets_the_brokers_close_notify(tmp_path: Path, pki: Pki) -> None:
    """asyncio's TLS clients (aiokafka) wait for the peer's close_notify when they close: 30 s
    each if the broker never sends one."""
    b = tls_broker(tmp_path, pki).start()
    try:
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        with ctx.wrap_socket(socket.create_connection((b.host, b.port), timeout=10), server_hostname="127.0.0.1") as s:
            head = b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x01t"  # ApiVersions v0
            s.sendall(len(head).to_bytes(4, "big") + head)
            size = int.from_bytes(s.recv(4), "big")
            while size:
                size -= len(s.recv(size))
            s.settimeout(5)
            s.unwrap().close()  # raises TimeoutError without the broker's close_notify
    finally:
        b.close()


def _served_cn(b: BrokerProcess, ca: Path) -> str:
    import socket
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection((b.host, b.port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        cert = s.getpeercert()
    return dict(x[0] for x in cert["subject"])["commonName"]


def test_a_listeners_key_store_is_replaced_at_runtime_per_broker(tmp_path: Path) -> None:
    """Certificate rotation without a restart, as Kafka's dynamic listener configs:
    `samsa configs --entity-type brokers --entity-name 0 --add-config
    listener.name.ssl.ssl.keystore.location=NEW`; a store that does not load is refused and the
    old one stays; the unprefixed key and the cluster-wide default are refused."""
    pki = make_pki(tmp_path / "pki")
    pki.issue("rotated", "/CN=rotated.samsa/O=Samsa", server=True)
    port, admin_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "broker", {
        "listeners": f"SSL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{admin_port}", "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore("server"))}, port=port)
    admin = f"127.0.0.1:{admin_port}"
    b.start()
    try:

        def configs(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "samsa", "configs", "--bootstrap-server", admin,
                                   "--entity-type", "brokers", *args], capture_output=True, text=True, timeout=60)

        assert _served_cn(b, pki.ca) == "localhost"
        bad = configs("--entity-name", "0", "--alter", "--add-config",
                      f"listener.name.ssl.ssl.keystore.location={tmp_path / 'missing.pem'}")
        assert bad.returncode != 0 and "listener SSL" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert _served_cn(b, pki.ca) == "localhost"
        r = configs("--entity-name", "0", "--alter", "--add-config",
                    f"listener.name.ssl.ssl.keystore.location={pki.keystore('rotated')}")
        assert r.returncode == 0, r.stderr
        assert _served_cn(b, pki.ca) == "rotated.samsa"
        assert "TLS key and trust stores loaded again" in b.log_text()
        described = configs("--entity-name", "0", "--describe")
        assert described.returncode == 0 and "listener.name.ssl.ssl.keystore.location=" in described.stdout, \
            described.stdout + described.stderr
        r = configs("--entity-name", "0", "--alter", "--add-config", f"ssl.keystore.location={pki.keystore('rotated')}")
        assert r.returncode != 0 and "only per listener" in r.stderr, r.stderr
        r = configs("--entity-default", "--alter", "--add-config",
                    f"listener.name.ssl.ssl.keystore.location={pki.keystore('rotated')}")
        assert r.returncode != 0 and "give a broker id" in r.stderr, r.stderr
        b.stop()
        b.start()  # the dynamic key store is stored (ZooKeeper's layout): still the rotated one
        assert _served_cn(b, pki.ca) == "rotated.samsa"
    finally:
        b.close()
