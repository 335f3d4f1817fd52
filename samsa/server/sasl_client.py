"""The client side of SASL, for a broker talking to other brokers (replication) on a SASL
inter-broker listener: SaslHandshake v1, then SaslAuthenticate rounds.

What the broker logs in with is Kafka's: the mechanism is `sasl.mechanism.inter.broker.protocol`
and the credentials are the `username` / `password` options of the inter-broker listener's JAAS
config for that mechanism (`listener.name.<l>.<mechanism>.sasl.jaas.config`).

Mechanisms: PLAIN (RFC 4616, one round) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / 7677:
client-first, client-final with the proof, then the server's signature is checked, so a
broker also knows that it talks to one that holds its credential). PBKDF2 is CPU work: it runs
in a worker thread, and its result is kept per (salt, iterations).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from samsa.protocol.errors import ErrorCode

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
CLIENT_MECHANISMS = ("PLAIN", *SCRAM_HASHES)

Request = Callable[[int, int, dict[str, Any], float], Awaitable[Any]]


class SaslClientError(Exception):
    """Authentication towards another broker failed (the message says why)."""


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # (never the password)
        return f"SaslLogin({self.mechanism}, {self.username!r})"


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


async def authenticate(request: Request, login: SaslLogin, timeout_s: float,
                       salted_cache: dict[tuple[str, bytes, int], bytes] | None = None) -> None:
    """Authenticate a fresh connection (`request(api_key, version, body, timeout)` sends one
    request on it and returns the decoded response); raises SaslClientError."""
    hs = await request(17, 1, {"mechanism": login.mechanism}, timeout_s)
    if hs.error_code != ErrorCode.NONE:
        raise SaslClientError(f"{ErrorCode(hs.error_code).name}: the other broker offers "
                              f"{', '.join(hs.mechanisms) or 'no mechanism'}, not {login.mechanism}")

    async def round_trip(token: bytes) -> bytes:
        r = await request(36, 2, {"auth_bytes": token}, timeout_s)
        if r.error_code != ErrorCode.NONE:
            raise SaslClientError(f"{ErrorCode(r.error_code).name}: {r.error_message or ''}".rstrip(": "))
        return bytes(r.auth_bytes)

    if login.mechanism == "PLAIN":
        await round_trip(b"\0" + login.username.encode() + b"\0" + login.password.encode())
        return
    if login.mechanism not in SCRAM_HASHES:
        raise SaslClientError(f"mechanism {login.mechanism} is not supported between brokers")
    client = ScramClient(login.mechanism, login.username, login.password, salted_cache=salted_cache)
    server_first = await round_trip(client.first())
    final = await asyncio.get_running_loop().run_in_executor(None, client.final, server_first)
    client.verify(await round_trip(final))
