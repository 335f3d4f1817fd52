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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.scram import SCRAM_HASHES, SaslClientError, ScramClient

__all__ = ["CLIENT_MECHANISMS", "SCRAM_HASHES", "SaslClientError", "SaslLogin", "ScramClient", "authenticate"]

CLIENT_MECHANISMS = ("PLAIN", *SCRAM_HASHES)

Request = Callable[[int, int, dict[str, Any], float], Awaitable[Any]]


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # (never the password)
        return f"SaslLogin({self.mechanism}, {self.username!r})"


async def authenticate(request: Request, login: SaslLogin, timeout_s: float,
                       salted_cache: dict[tuple[str, bytes, int], bytes] | None = None) -> int:
    """Authenticate a connection (`request(api_key, version, body, timeout)` sends one request
    on it and returns the decoded response), fresh or to re-authenticate it (KIP-368); returns
    the session lifetime the server gave, in ms (0: no limit). Raises SaslClientError."""
    hs = await request(17, 1, {"mechanism": login.mechanism}, timeout_s)
    if hs.error_code != ErrorCode.NONE:
        raise SaslClientError(f"{ErrorCode(hs.error_code).name}: the other broker offers "
                              f"{', '.join(hs.mechanisms) or 'no mechanism'}, not {login.mechanism}")

    lifetime = [0]

    async def round_trip(token: bytes) -> bytes:
        r = await request(36, 2, {"auth_bytes": token}, timeout_s)
        if r.error_code != ErrorCode.NONE:
            raise SaslClientError(f"{ErrorCode(r.error_code).name}: {r.error_message or ''}".rstrip(": "))
        lifetime[0] = int(r.session_lifetime)
        return bytes(r.auth_bytes)

    if login.mechanism == "PLAIN":
        await round_trip(b"\0" + login.username.encode() + b"\0" + login.password.encode())
        return lifetime[0]
    if login.mechanism not in SCRAM_HASHES:
        raise SaslClientError(f"mechanism {login.mechanism} is not supported between brokers")
    client = ScramClient(login.mechanism, login.username, login.password, salted_cache=salted_cache)
    server_first = await round_trip(client.first())
    final = await asyncio.get_running_loop().run_in_executor(None, client.final, server_first)
    client.verify(await round_trip(final))
    return lifetime[0]
