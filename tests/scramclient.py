"""A SCRAM client (RFC 5802) written from the RFC for the tests, independent of samsa's code:
it makes the client's two messages and checks the server's signature; and Kafka's stored
credential computed from a password, for checking what the broker and tools store."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def expected_keys(mechanism: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """(stored_key, server_key) as Kafka's ScramFormatter derives them."""
    h = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return hashlib.new(h, client_key).digest(), hmac.new(salted, b"Server Key", h).digest()


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None,
                 gs2: str = "n,,") -> None:
        self.h = HASHES[mechanism]
        self.user, self.password = user, password
        self.nonce = nonce or secrets.token_hex(12)
        self.gs2 = gs2
        self.server_signature = b""

    def first(self) -> bytes:
        name = self.user.replace("=", "=3D").replace(",", "=2C")
        self.bare = f"n={name},r={self.nonce}"
        return (self.gs2 + self.bare).encode()

    def final(self, server_first: bytes, nonce_prefix: str = "") -> bytes:
        """`nonce_prefix`: put before the nonce, as librdkafka 2.0 does (its own nonce again)."""
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        assert fields["r"].startswith(self.nonce)
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        salted = hashlib.pbkdf2_hmac(self.h, self.password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.h).digest()
        stored_key = hashlib.new(self.h, client_key).digest()
        without_proof = f"c={b64(self.gs2.encode())},r={nonce_prefix}{fields['r']}"
        auth = f"{self.bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth, self.h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.h).digest()
        self.server_signature = hmac.new(server_key, auth, self.h).digest()
        return f"{without_proof},p={b64(proof)}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)
