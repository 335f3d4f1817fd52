"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 over a raw connection, and the two admin APIs.

The exchange itself, in both flows (SaslAuthenticate and v0 bare tokens); an unknown user
answered like a known one until the proof; the error cases of DescribeUserScramCredentials and
AlterUserScramCredentials, nothing stored for a refused request; credentials surviving a
restart. The real clients are in tests/compat/test_scram_clients.py, the ZooKeeper cluster
(samsa configs --zookeeper, changes followed by the other broker) in
tests/cluster/test_scram_cluster.py."""

from __future__ import annotations

import base64
import hashlib
import re
import struct
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from samsa.protocol.errors import ErrorCode
from tests.brokerproc import BrokerProcess, free_port
from tests.pki import Pki
from tests.rawclient import RawClient
from tests.scramclient import ScramClient

MECHANISMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS = ["SASL_PLAINTEXT", "SASL_SSL"]
KAFKA_MESSAGE = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
SERVER_FIRST = re.compile(rb"r=([\x21-\x2b\x2d-\x7e]+),s=([A-Za-z0-9+/=]+),i=([0-9]+)")


class ScramBroker:
    def __init__(self, b: BrokerProcess, ports: dict[str, int], pki: Pki) -> None:
        self.b, self.ports, self.pki = b, ports, pki

    def bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[protocol]}"


def scram_broker_process(workdir: Path, pki: Pki) -> tuple[BrokerProcess, dict[str, int]]:
    ports = {p: free_port() for p in ("PLAINTEXT", *PROTOCOLS)}
    props = {"listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in ports.items()),
             "sasl.enabled.mechanisms": ",".join(MECHANISMS),
             # Kafka's broker-side login entry (its credentials are for inter-broker use): accepted
             "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                 'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
                 'password="admin-secret";',
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("server"))}
    return BrokerProcess(workdir, props, port=ports["PLAINTEXT"]), ports


def upsert(bootstrap: str, user: str, password: str, mechanisms: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], it),
                                     password.encode()) for m, it in mechanisms.items()])
    for f in futures.values():
        f.result(20)


def raw_login(bootstrap: str, mechanism: str, user: str, password: str) -> tuple[int, str | None]:
    """A SCRAM login over SaslAuthenticate v2: (error code, error message) of the last round."""
    with RawClient(bootstrap) as c:
        assert c.request(17, 1, {"mechanism": mechanism}).error_code == 0
        client = ScramClient(mechanism, user, password)
        first = c.request(36, 2, {"auth_bytes": client.first()})
        if first.error_code:
            return first.error_code, first.error_message
        final = c.request(36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))})
        if final.error_code == 0:
            assert client.verify(bytes(final.auth_bytes))  # the broker proved it holds the credential
        return final.error_code, final.error_message


def wait_login(bootstrap: str, mechanism: str, user: str, password: str, ok: bool = True,
               timeout: float = 20.0) -> None:
    """Credentials change through the store's notifications: retry until the login does as told."""
    deadline = time.monotonic() + timeout
    while True:
        code, _ = raw_login(bootstrap, mechanism, user, password)
        if (code == 0) == ok:
            return
        assert time.monotonic() < deadline, f"{user}'s {mechanism} login still {'fails' if ok else 'works'}"
        time.sleep(0.05)  # (another process's state: nothing to await)




# -- the exchange over a raw connection ------------------------------------------------------------

def sasl_only_broker(tmp_path: Path) -> tuple[BrokerProcess, str]:
    """A PLAINTEXT listener (administration) and a SASL_PLAINTEXT one offering both SCRAMs."""
    admin_port, sasl_port = free_port(), free_port()
    b = BrokerProcess(tmp_path / "broker", {
        "listeners": f"PLAINTEXT://127.0.0.1:{admin_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS)}, port=admin_port)
    return b, f"127.0.0.1:{sasl_port}"


def _bare(token: bytes) -> bytes:
    return struct.pack(">i", len(token)) + token


METADATA = {"topics": None, "allow_auto_topic_creation": False}


def test_the_exchange_over_a_raw_connection(tmp_path: Path) -> None:
    b, sasl = sasl_only_broker(tmp_path)
    b.start()
    try:
        upsert(b.bootstrap, "alice", "alice-secret", {"SCRAM-SHA-256": 8192})
        wait_login(sasl, "SCRAM-SHA-256", "alice", "alice-secret")
        proofs: list[bytes] = []
        with RawClient(sasl) as c:  # v1: two SaslAuthenticate rounds, then an ordinary client
            assert c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
            client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
            first = c.request(36, 2, {"auth_bytes": client.first()})
            assert first.error_code == 0 and first.session_lifetime == 0
            assert SERVER_FIRST.fullmatch(bytes(first.auth_bytes))
            final = c.request(36, 2, {"auth_bytes": client.final(bytes(first.auth_bytes))})
            assert final.error_code == 0 and client.verify(bytes(final.auth_bytes))
            assert c.request(3, 12, METADATA).brokers
        shapes = {}
        for user, password in (("alice", "wrong-secret"), ("nobody", "whatever")):
            with RawClient(sasl) as c:  # a wrong password and an unknown user: alike until the proof
                assert c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
                client = ScramClient("SCRAM-SHA-256", user, password)
                first = c.request(36, 2, {"auth_bytes": client.first()})
                assert first.error_code == 0, f"{user} refused at client-first: {first.error_message}"
                m = SERVER_FIRST.fullmatch(bytes(first.auth_bytes))
                assert m is not None
                shapes[user] = (len(m.group(1)), m.group(3))
                last = client.final(bytes(first.auth_bytes))
                proofs.append(last.rsplit(b"p=", 1)[1])
                final = c.request(36, 2, {"auth_bytes": last})
                assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert final.error_message == KAFKA_MESSAGE.format("SCRAM-SHA-256")
                assert c.is_closed_by_peer()
        assert shapes["alice"][0] == shapes["nobody"][0]  # the same nonce length
        assert shapes["alice"][1] == b"8192" and shapes["nobody"][1] == b"4096"  # (alice's own; the default)
        with RawClient(sasl) as c:  # v0: the same two rounds as bare tokens
            assert c.request(17, 0, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
            client = ScramClient("SCRAM-SHA-256", "alice", "alice-secret")
            c.send_bytes(_bare(client.first()))
            server_first = c.read_frame()
            assert SERVER_FIRST.fullmatch(server_first)
            c.send_bytes(_bare(client.final(server_first)))
            assert client.verify(c.read_frame())
            assert c.request(3, 12, METADATA).brokers
        with RawClient(sasl) as c:  # v0, wrong password: the connection closes
            assert c.request(17, 0, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
            client = ScramClient("SCRAM-SHA-256", "alice", "nope")
            c.send_bytes(_bare(client.first()))
            c.send_bytes(_bare(client.final(c.read_frame())))
            assert c.is_closed_by_peer()
        for token in (b"garbage", b"p=tls-unique,,n=alice,r=x", b"n,,n=alice,r=x,tokenauth=true"):
            with RawClient(sasl) as c:
                assert c.request(17, 1, {"mechanism": "SCRAM-SHA-512"}).error_code == 0
                resp = c.request(36, 2, {"auth_bytes": token})
                assert resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and c.is_closed_by_peer()
        with RawClient(sasl) as c:  # a mechanism the listener does not offer
            resp = c.request(17, 1, {"mechanism": "PLAIN"})
            assert resp.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert list(resp.mechanisms) == MECHANISMS
        text = b.log_text()
        assert "SASL SCRAM-SHA-256 authentication failed from 127.0.0.1" in text and "Traceback" not in text
        assert "alice-secret" not in text and "wrong-secret" not in text
        assert not any(base64.b64decode(p).hex() in text or p.decode() in text for p in proofs)
    finally:
        b.close()


def test_a_scram_jaas_entry_must_name_the_scram_login_module(tmp_path: Path) -> None:
    from tests.broker.test_sasl import _start_fails

    port = free_port()
    line = _start_fails(tmp_path, {
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{free_port()}",
        "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'})
    assert "expected org.apache.kafka.common.security.scram.ScramLoginModule" in line, line


# -- DescribeUserScramCredentials and AlterUserScramCredentials -----------------------------------

def upsertion(name: str, mechanism: int, iterations: int, password: str = "pw", salt: bytes = b"NaCl-NaCl",
              salted: bytes | None = None) -> dict[str, Any]:
    h = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    if salted is None:
        salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, max(iterations, 1))
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}


def alter(c: RawClient, upsertions: list[dict[str, Any]] = (), deletions: list[dict[str, Any]] = ()  # type: ignore[assignment]
          ) -> dict[str, tuple[int, str | None]]:
    resp = c.request(51, 0, {"deletions": list(deletions), "upsertions": list(upsertions)})
    out = {r.user: (r.error_code, r.error_message) for r in resp.results}
    assert len(out) == len(resp.results), "one result per user"
    return out


def describe(c: RawClient, users: list[str] | None) -> dict[str, Any]:
    resp = c.request(50, 0, {"users": None if users is None else [{"name": u} for u in users]})
    assert resp.error_code == 0
    return {r.user: (r.error_code, r.error_message, sorted((i.mechanism, i.iterations) for i in r.credential_infos))
            for r in resp.results}


def test_the_admin_apis_refuse_bad_requests_store_nothing_for_them_and_survive_a_restart(tmp_path: Path) -> None:
    b, sasl = sasl_only_broker(tmp_path)
    b.start()
    try:
        with RawClient(b.bootstrap) as c:
            assert describe(c, None) == {}
            got = alter(c, upsertions=[
                upsertion("", 1, 4096),
                upsertion("bob", 9, 4096),
                upsertion("carol", 2, 4096), upsertion("carol", 1, 100),  # one bad: carol gets nothing
                upsertion("dave", 2, 20000),
                upsertion("erin", 1, 4096, salt=b""),
                upsertion("frank", 1, 4096, salted=b""),
                upsertion("gina", 1, 4096), upsertion("gina", 1, 8192),
                upsertion("ivy", 1, 4096, "ivy-secret"), upsertion("ivy", 2, 8192, "ivy-secret"),
            ], deletions=[{"name": "hank", "mechanism": 1}, {"name": "bob", "mechanism": 0}])
            U, N = ErrorCode.UNACCEPTABLE_CREDENTIAL, ErrorCode.UNSUPPORTED_SASL_MECHANISM
            assert got == {
                "": (U, "Username must not be empty"),
                "bob": (N, "Unknown SCRAM mechanism"),
                "carol": (U, "Too few iterations"),
                "dave": (U, "Too many iterations"),
                "erin": (U, "Salt must not be empty"),
                "frank": (U, "Salted password must not be empty"),
                "gina": (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
                "hank": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
                "ivy": (0, None),
            }
            assert describe(c, None) == {"ivy": (0, None, [(1, 4096), (2, 8192)])}  # nothing else was stored
            assert describe(c, ["carol", "ivy", "", "ivy"]) == {
                "carol": (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: "
                                                        "carol", []),
                "ivy": (ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in "
                                                      "a single request: ivy", []),
                "": (ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty", []),
            }
            wait_login(sasl, "SCRAM-SHA-512", "ivy", "ivy-secret")
            for user in ("carol", "gina"):
                assert raw_login(sasl, "SCRAM-SHA-512", user, "pw")[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
            # deleting one mechanism and changing the other in one request (ZooKeeper mode allows it)
            assert alter(c, [upsertion("ivy", 2, 4096, "ivy-new")], [{"name": "ivy", "mechanism": 1}]) == {
                "ivy": (0, None)}
            assert describe(c, ["ivy"]) == {"ivy": (0, None, [(2, 4096)])}
            wait_login(sasl, "SCRAM-SHA-512", "ivy", "ivy-new")
            wait_login(sasl, "SCRAM-SHA-256", "ivy", "ivy-secret", ok=False)
        ghost_salt = _server_first_salt(sasl, "ghost")
        b.restart()
        with RawClient(b.bootstrap) as c:
            assert describe(c, None) == {"ivy": (0, None, [(2, 4096)])}
        assert raw_login(sasl, "SCRAM-SHA-512", "ivy", "ivy-new") == (0, None)
        assert _server_first_salt(sasl, "ghost") == ghost_salt  # an unknown user's salt outlives a restart
        assert "Traceback" not in b.log_text()
    finally:
        b.close()


def _server_first_salt(bootstrap: str, user: str) -> bytes:
    with RawClient(bootstrap) as c:
        assert c.request(17, 1, {"mechanism": "SCRAM-SHA-256"}).error_code == 0
        first = c.request(36, 2, {"auth_bytes": ScramClient("SCRAM-SHA-256", user, "x").first()})
        m = SERVER_FIRST.fullmatch(bytes(first.auth_bytes))
        assert m is not None
        return m.group(2)
