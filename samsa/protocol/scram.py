"""SCRAM-SHA-256 / SCRAM-SHA-512, the client's side (RFC 5802 / RFC 7677): client-first,
client-final with the proof, and the check of the server's signature (so the client also knows
that the server holds its credential). Pure computation, shared by every Samsa client: the
broker's replica fetcher, the tools, the Spark data source. `final()` runs PBKDF2: a caller on
an event loop runs it in a thread."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslClientError(Exception):
    """Authentication failed (the message says why)."""


def saslname(user: str) -> str:
    """RFC 5802's escaping of a user name in a SCRAM message."""
    return user.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslClientError(f"malformed SCRAM message {message[:80]!r}")
        out.setdefault(part[0], part[2:])
    return out


class ScramClient:
    """One SCRAM exchange: `first()`, `final(server_first)`, `verify(server_final)`."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None,
                 salted_cache: dict[tuple[str, bytes, int], bytes] | None = None) -> None:
        self.hash = SCRAM_HASHES[mechanism]
        self.username = username
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(18)
        self.client_first_bare = f"n={saslname(username)},r={self.nonce}"
        self._cache = salted_cache if salted_cache is not None else {}
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self.client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (runs PBKDF2: call it off the event loop)."""
        text = server_first.decode("utf-8", "replace")
        attrs = _attributes(text)
        if "e" in attrs:
            raise SaslClientError(f"the server refused: {attrs['e']}")
        nonce, salt_b64, iterations = attrs.get("r", ""), attrs.get("s", ""), attrs.get("i", "")
        if not nonce.startswith(self.nonce) or len(nonce) <= len(self.nonce):
            raise SaslClientError("the server's nonce does not extend ours")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            rounds = int(iterations)
        except ValueError:
            raise SaslClientError("the server-first message has a malformed salt or iteration count") from None
        if rounds < 1 or not salt:
            raise SaslClientError("the server-first message has no salt or iterations")
        key = (self.password, salt, rounds)
        salted = self._cache.get(key)
        if salted is None:
            salted = hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt, rounds)
            self._cache[key] = salted
        client_key = hmac.digest(salted, b"Client Key", self.hash)
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self.client_first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.digest(salted, b"Server Key", self.hash)
        self._server_signature = hmac.digest(server_key, auth_message, self.hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode("utf-8", "replace"))
        if "e" in attrs:
            raise SaslClientError(f"the server refused: {attrs['e']}")
        try:
            got = base64.b64decode(attrs.get("v", ""), validate=True)
        except ValueError:
            got = b""
        if not self._server_signature or not hmac.compare_digest(got, self._server_signature):
            raise SaslClientError("the server's signature is wrong: it does not hold this user's credential")
