"""SASL/PLAIN on SASL_PLAINTEXT and SASL_SSL listeners, with real clients (librdkafka, kafka-python,
kcat) and Kafka's state machine over a raw connection: what may come before authentication,
the v0 (bare token) and v1 (SaslAuthenticate) flows, and refusals that close the connection."""

from __future__ import annotations

import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from samsa.protocol.errors import ErrorCode
from tests.brokerproc import BrokerProcess, free_port
from tests.pki import Pki, make_pki
from tests.rawclient import RawClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def sasl_broker(tmp_path: Path, protocol: str = "SASL_PLAINTEXT", **extra: str) -> BrokerProcess:
    port = free_port()
    name = protocol.lower()
    props = {"listeners": f"{protocol}://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN",
             f"listener.name.{name}.plain.sasl.jaas.config": JAAS, **extra}
    return BrokerProcess(tmp_path / "broker", props, port=port)


def rd(b: BrokerProcess, user: str = "alice", password: str = "alice-secret", protocol: str = "SASL_PLAINTEXT",
       **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": protocol, "sasl.mechanisms": "PLAIN",
            "sasl.username": user, "sasl.password": password, **extra}


def produce(conf: dict[str, Any], topic: str, values: list[bytes], timeout_ms: int = 20000) -> list[Any]:
    p = Producer({**conf, "linger.ms": 5, "message.timeout.ms": timeout_ms})
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, msg: errors.append(err) if err else None)
    p.flush(timeout_ms / 1000 + 10)
    return errors


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


def test_plain_over_sasl_plaintext_with_three_clients(tmp_path: Path) -> None:
    b = sasl_broker(tmp_path).start()
    try:
        values = [b"p%03d" % i for i in range(100)]
        assert produce(rd(b), "plain", values) == []
        assert consume(rd(b, "admin", "admin-secret"), "plain", 100) == values
        k = KafkaConsumer(bootstrap_servers=b.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                          sasl_plain_username="alice", sasl_plain_password="alice-secret", group_id=None,
                          enable_auto_commit=False, auto_offset_reset="none")
        got: list[bytes] = []
        try:
            tp = KTopicPartition("plain", 0)
            k.assign([tp])
            k.seek(tp, 0)
            deadline = time.monotonic() + 30
            while len(got) < 100 and time.monotonic() < deadline:
                got += [m.value for m in k.poll(timeout_ms=500).get(tp, [])]
        finally:
            k.close()
        assert got == values
        r = subprocess.run(["kcat", "-b", b.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X",
                            "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
                            "-C", "-t", "plain", "-p", "0", "-o", "beginning", "-c", "3", "-e"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.split() == ["p000", "p001", "p002"], r.stderr
    finally:
        b.close()


def test_wrong_credentials_are_refused_and_logged_once(tmp_path: Path) -> None:
    b = sasl_broker(tmp_path).start()
    try:
        for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
            errors = produce(rd(b, user, password), "nope", [b"x"], timeout_ms=3000)
            assert errors and errors[0] is not None
        assert produce(rd(b), "nope", [b"y"]) == []  # the broker is fine
        assert consume(rd(b), "nope", 1) == [b"y"]
        text = b.log_text()
        assert "SASL PLAIN authentication failed from 127.0.0.1" in text and "Traceback" not in text
        assert "alice-secret" not in text and "admin-secret" not in text  # no password in the log
        assert text.count("authentication failed") == 1  # the second within the interval is counted, not logged
    finally:
        b.close()


def _frame(api_key: int, version: int, body: bytes, correlation_id: int = 1) -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    return struct.pack(">i", len(head) + len(body)) + head + body


def test_the_state_machine_over_a_raw_connection(tmp_path: Path) -> None:
    b = sasl_broker(tmp_path).start()
    try:
        with RawClient(b.bootstrap) as c:  # ApiVersions is allowed before authentication
            assert c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0
            c.send_bytes(_frame(3, 1, struct.pack(">i", -1)))  # Metadata: the connection closes
            assert c.is_closed_by_peer()
        with RawClient(b.bootstrap) as c:
            resp = c.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})  # no handshake first
            assert resp.error_code == ErrorCode.ILLEGAL_SASL_STATE and c.is_closed_by_peer()
        with RawClient(b.bootstrap) as c:
            resp = c.request(17, 1, {"mechanism": "SCRAM-SHA-512"})
            assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and list(resp.mechanisms) == ["PLAIN"]
            assert c.is_closed_by_peer()
        with RawClient(b.bootstrap) as c:
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
            t0 = time.monotonic()
            resp = c.request(36, 2, {"auth_bytes": b"garbage without separators"})
            assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and c.is_closed_by_peer()
            # answered connection.failed.authentication.delay.ms (100) late, as Kafka (KIP-306)
            assert time.monotonic() - t0 >= 0.09
        with RawClient(b.bootstrap) as c:  # v1: SaslAuthenticate, then an ordinary client
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
            resp = c.request(36, 2, {"auth_bytes": b"\0alice\0alice-secret"})
            assert resp.error_code == 0 and resp.session_lifetime == 0
            assert c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
        with RawClient(b.bootstrap) as c:  # v0: the token as a bare frame, answered by one
            assert c.request(17, 0, {"mechanism": "PLAIN"}).error_code == 0
            token = b"\0admin\0admin-secret"
            c.send_bytes(struct.pack(">i", len(token)) + token)
            assert c.read_frame() == b""
            assert c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False}).brokers
            # A client of the v0 flow cannot re-authenticate (KIP-368 needs SaslAuthenticate v1+)
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == ErrorCode.ILLEGAL_SASL_STATE
            assert c.is_closed_by_peer()
        assert "Traceback" not in b.log_text()
    finally:
        b.close()


def test_plain_over_sasl_ssl(tmp_path: Path) -> None:
    pki: Pki = make_pki(tmp_path / "pki")
    b = sasl_broker(tmp_path, "SASL_SSL", **{"ssl.keystore.type": "PEM",
                                             "ssl.keystore.location": str(pki.keystore("server"))}).start()
    try:
        conf = rd(b, protocol="SASL_SSL", **{"ssl.ca.location": str(pki.ca)})
        assert produce(conf, "both", [b"secret"]) == []
        assert consume(conf, "both", 1) == [b"secret"]
        errors = produce(rd(b, "alice", "bad", protocol="SASL_SSL", **{"ssl.ca.location": str(pki.ca)}), "both",
                         [b"x"], timeout_ms=3000)
        assert errors and errors[0] is not None
    finally:
        b.close()


def _start_fails(workdir: Path, props: dict[str, str]) -> str:
    b = BrokerProcess(workdir, props)
    r = subprocess.run([sys.executable, "-m", "samsa", "broker", "start", str(b.config_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    return r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(("props", "says"), [
    ({}, "GSSAPI is Kerberos"),  # Kafka's default mechanism
    ({"sasl.enabled.mechanisms": "PLAIN"}, "PLAIN needs its users"),
    ({"sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"},
     "sasl.jaas.config"),
])
def test_sasl_misconfigurations_are_refused_at_start_up(tmp_path: Path, props: dict[str, str], says: str) -> None:
    port = free_port()
    line = _start_fails(tmp_path, {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:"
                                                f"{free_port()}", "inter.broker.listener.name": "PLAINTEXT", **props})
    assert says in line, line


def _metadata(c: RawClient) -> Any:
    return c.request(3, 12, {"topics": None, "allow_auto_topic_creation": False})


def _login(c: RawClient, user: str, password: str) -> Any:
    assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
    return c.request(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})


def test_sessions_last_connections_max_reauth_ms_and_clients_re_authenticate(tmp_path: Path) -> None:
    """KIP-368: the session lifetime is said in SaslAuthenticate; the client re-authenticates on
    its connection (same principal, same mechanism) before it ends; a connection that does not
    is closed at its first request after it; another principal is refused."""
    b = sasl_broker(tmp_path, **{"connections.max.reauth.ms": "1500"}).start()
    try:
        # librdkafka re-authenticates by itself: a producer outliving several sessions loses nothing.
        conf = rd(b)
        p = Producer({**conf, "linger.ms": 5})
        errors: list[Any] = []
        deadline = time.monotonic() + 5
        n = 0
        while time.monotonic() < deadline:
            p.produce("reauth", b"v%d" % n, partition=0, on_delivery=lambda e, m: errors.append(e) if e else None)
            n += 1
            p.poll(0.05)
        assert p.flush(20) == 0 and errors == []
        assert consume(conf, "reauth", n)[-1] == b"v%d" % (n - 1)
        assert "its SASL session expired" not in b.log_text()  # (it did not just reconnect)
        with RawClient(b.bootstrap) as c:
            t0 = time.monotonic()
            assert _login(c, "alice", "alice-secret").session_lifetime == 1500
            while time.monotonic() - t0 < 0.8:  # (a session is a span of time: requests at a pace)
                assert _metadata(c).brokers
                time.sleep(0.1)
            again = _login(c, "alice", "alice-secret")  # re-authentication, before the end
            assert again.error_code == 0 and again.session_lifetime == 1500
            t1 = time.monotonic()
            while time.monotonic() - t0 < 1.9:  # past the first session's end: still served
                assert _metadata(c).brokers
                time.sleep(0.1)
            closed_at = None
            while closed_at is None and time.monotonic() - t1 < 10:
                try:
                    _metadata(c)
                except (ConnectionError, OSError, EOFError):
                    closed_at = time.monotonic()
                    break
                time.sleep(0.05)
            # (t1 is read after the answer: the broker's clock started the session a little before)
            assert closed_at is not None and closed_at - t1 >= 1.4, "closed before its session ended"
        assert "its SASL session expired" in b.log_text()
        with RawClient(b.bootstrap) as c:  # another principal: refused, the connection closes
            assert _login(c, "alice", "alice-secret").error_code == 0
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
            bad = c.request(36, 2, {"auth_bytes": b"\0admin\0admin-secret"})
            assert bad.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and c.is_closed_by_peer()
    finally:
        b.close()


def test_before_authentication_only_small_frames_are_read(tmp_path: Path) -> None:
    """sasl.server.max.receive.size bounds what an unauthenticated client may send (a 1 MB
    "token" closes its connection at its length prefix); once authenticated, the usual
    socket.request.max.bytes applies again."""
    b = sasl_broker(tmp_path, **{"sasl.server.max.receive.size": "65536"}).start()
    try:
        with RawClient(b.bootstrap) as c:
            assert c.request(17, 1, {"mechanism": "PLAIN"}).error_code == 0
            c.send_bytes(struct.pack(">i", 1_000_000) + b"\0" * 1000)  # a huge SaslAuthenticate, promised
            assert c.is_closed_by_peer()
        assert "sasl.server.max.receive.size" in b.log_text()
        with RawClient(b.bootstrap) as c:
            assert _login(c, "alice", "alice-secret").error_code == 0
            big = c.request(3, 12, {"topics": [{"name": "t" * 200}] * 400, "allow_auto_topic_creation": False})
            assert len(big.topics) == 400  # a ~90 kB request, over the pre-authentication bound
    finally:
        b.close()
