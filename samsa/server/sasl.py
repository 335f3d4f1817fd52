"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: Kafka's SaslServerAuthenticator state machine
and the PLAIN mechanism (SCRAM-SHA-256/512 are in scram.py).

A connection on a SASL listener starts unauthenticated, with a `SaslAuthenticator` as
`conn.sasl`. Until it has authenticated, the dispatcher lets through only:

    ApiVersions (18)       any number of times (clients ask it first)
    SaslHandshake (17)     once: the mechanism, which must be enabled on the listener
                           (UNSUPPORTED_SASL_MECHANISM and the enabled list otherwise)
    SaslAuthenticate (36)  after a v1 handshake: the mechanism's tokens, in requests
    a bare token           after a v0 handshake, the next frame is the token itself and the
                           answer a bare frame (the original, pre-KIP-152 flow)

Anything else closes the connection (Kafka's IllegalSaslStateException); a SaslAuthenticate
before the handshake, or a second handshake, is answered ILLEGAL_SASL_STATE and then closed.
A mechanism answers each token with a `SaslStep`: continue (its reply goes back as the
SaslAuthenticate response's auth bytes, or as a bare frame after a v0 handshake, and the client
sends its next token: SCRAM's server-first message), authenticated, or failed.
A failed authentication is answered SASL_AUTHENTICATION_FAILED (after a v0 handshake: the
connection just closes), logged once (rate-limited) and then closed. Success sets the
connection's principal (`User:<name>`) and `conn.sasl` to None: from then on requests are
served as on any listener. `connections.max.reauth.ms` 0 (the default) means sessions do not
expire, reported as session lifetime 0 (KIP-368).

PLAIN (RFC 4616): the token is `authzid NUL authcid NUL password`; users are the listener's
JAAS config, in Kafka's format:

    listener.name.sasl_plaintext.plain.sasl.jaas.config=\\
        org.apache.kafka.common.security.plain.PlainLoginModule required \\
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

`user_<name>="<password>"` are the users; `username`/`password` are what this broker itself
logs in with to other brokers. Passwords are compared in constant time, and an unknown user
costs the same comparison as a wrong password.

SCRAM-SHA-256 / SCRAM-SHA-512: the users are the SCRAM credentials in ZooKeeper
(/config/users/<user>, `samsa configs --entity-type users` or AlterUserScramCredentials), so the
listener needs no users. Kafka wants a ScramLoginModule entry per SCRAM mechanism,
`listener.name.<l>.scram-sha-256.sasl.jaas.config`, whose username/password are what the broker
uses towards other brokers: Samsa needs it only on a SASL inter-broker listener whose
sasl.mechanism.inter.broker.protocol is that mechanism (broker.inter_broker_login), and checks
its login module wherever it is given. That broker user's credential must exist before the
brokers start: `samsa configs --zookeeper ... --entity-type users --entity-name admin --alter
--add-config 'SCRAM-SHA-256=[password=...]'`.
"""

from __future__ import annotations

import hmac
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol import jaas
from samsa.protocol.errors import ErrorCode
from samsa.ratelimit import RateLimitedLog
from samsa.server.scram import MECHANISMS as SCRAM_MECHANISMS
from samsa.server.scram import SaslStep, ScramCredentials, ScramExchange

PLAIN = "PLAIN"
SUPPORTED = (PLAIN, *SCRAM_MECHANISMS)



_auth_log = RateLimitedLog(logging.getLogger("samsa.auth"), 10.0)


class SaslConfigError(ValueError):
    pass


def sasl_failed(conn: Any, mechanism: str | None, why: str | None) -> None:
    """One line (rate-limited per listener) for a failed authentication of connection `conn`."""
    _auth_log.warning(f"failed:{conn.server.name}", "SASL %s authentication failed from %s on listener %s: %s",
                      mechanism, conn.peer_str, conn.server.name, why)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """Kafka's one-module sasl.jaas.config: (login module class, {option: value})."""
    try:
        return jaas.parse_jaas(text)
    except jaas.JaasError as e:
        raise SaslConfigError(str(e)) from None


@dataclass
class ListenerSasl:
    """What one SASL listener accepts: its mechanisms and, for PLAIN, its users; for SCRAM, the
    broker's credential cache."""

    listener: str
    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict)
    scram: ScramCredentials | None = None
    max_receive: int = 524288  # sasl.server.max.receive.size: the largest frame before authentication


class SaslAuthenticator:
    """One connection's SASL state (see the module doc)."""

    __slots__ = ("config", "mechanism", "raw_tokens", "reauth", "scram", "state")

    def __init__(self, config: ListenerSasl, reauth: tuple[str, str] | None = None) -> None:
        self.config = config
        self.state = "handshake"  # -> "authenticate" -> gone (conn.sasl = None)
        self.mechanism: str | None = None
        self.raw_tokens = False  # after a v0 handshake: the next frame is a bare token
        self.scram: ScramExchange | None = None
        # KIP-368: re-authenticating a connection of (principal, mechanism), which must not change
        self.reauth = reauth

    def log_failure(self, conn: Any, why: str | None) -> None:
        sasl_failed(conn, self.mechanism, why)

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if self.state != "handshake":
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.config.mechanisms:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        if self.reauth is not None and (version == 0 or mechanism != self.reauth[1]):
            return ErrorCode.ILLEGAL_SASL_STATE  # re-authentication keeps the mechanism (and v1)
        self.mechanism = mechanism
        self.state = "authenticate"
        self.raw_tokens = version == 0
        if mechanism in SCRAM_MECHANISMS:
            assert self.config.scram is not None  # (listener_sasl made sure)
            self.scram = ScramExchange(SCRAM_MECHANISMS[mechanism], self.config.scram)
        return ErrorCode.NONE

    def authenticate(self, token: bytes) -> SaslStep:
        """The mechanism's answer to the client's next token: one round for PLAIN, two for SCRAM."""
        if self.scram is not None:
            return self.scram.step(token)
        if self.mechanism == PLAIN:
            return self._plain(token)
        return _failed(f"mechanism {self.mechanism} is not available")

    def _plain(self, token: bytes) -> SaslStep:
        parts = token.split(b"\0")
        if len(parts) != 3:
            return _failed("malformed PLAIN token (expected authzid NUL username NUL password)")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            return _failed("PLAIN token is not UTF-8")
        expected = self.config.plain_users.get(user)
        # (the same comparison for an unknown user: no timing difference to learn users from)
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if not ok or expected is None or not user:
            return _failed(f"Invalid username or password for user {user!r}")
        if authzid and authzid != user:
            return _failed("the authorization id differs from the user name")
        return SaslStep(principal=f"User:{user}")


def _failed(why: str) -> SaslStep:
    return SaslStep(failure=why, message=f"Authentication failed: {why}")


def listener_sasl(listener: str, mechanisms: list[str], jaas: dict[str, str | None],
                  scram: ScramCredentials | None = None) -> ListenerSasl:
    """Check a SASL listener's settings: `jaas` is each enabled mechanism's sasl.jaas.config;
    `scram` the broker's SCRAM credentials (SCRAM mechanisms need them)."""
    if not mechanisms:
        raise SaslConfigError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    unsupported = [m for m in mechanisms if m not in SUPPORTED]
    if unsupported:
        hint = " (GSSAPI is Kerberos, Kafka's default: not supported)" if "GSSAPI" in unsupported else ""
        raise SaslConfigError(f"listener {listener}: sasl.enabled.mechanisms {','.join(unsupported)} not supported"
                              f"{hint}; Samsa offers {', '.join(SUPPORTED)}")
    out = ListenerSasl(listener, list(mechanisms), scram=scram)
    for mechanism in (m for m in mechanisms if m in SCRAM_MECHANISMS):
        if scram is None:
            raise SaslConfigError(f"listener {listener}: {mechanism} needs the broker's SCRAM credentials")
        text = jaas.get(mechanism)
        if text:  # (optional: see the module doc)
            module, _ = parse_jaas(text)
            if not module.endswith("ScramLoginModule"):
                raise SaslConfigError(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config: "
                                      f"expected org.apache.kafka.common.security.scram.ScramLoginModule, got {module}")
    if PLAIN in mechanisms:
        text = jaas.get(PLAIN)
        key = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
        if not text:
            raise SaslConfigError(f"listener {listener}: PLAIN needs its users: set {key} (Kafka's "
                                  "PlainLoginModule format, user_<name>=\"<password>\")")
        module, options = parse_jaas(text)
        if not module.endswith("PlainLoginModule"):
            raise SaslConfigError(f"{key}: expected org.apache.kafka.common.security.plain.PlainLoginModule, "
                                  f"got {module}")
        out.plain_users = {k[5:]: v for k, v in options.items() if k.startswith("user_") and len(k) > 5}
        if not out.plain_users:
            raise SaslConfigError(f"{key}: no user_<name>=\"<password>\" option: nobody could log in")
    return out


# -- KIP-368: session lifetime and re-authentication --------------------------------------------


def authenticated(conn: Any, authenticator: SaslAuthenticator, principal: str, reauth_ms: int,
                  can_reauthenticate: bool) -> str | None:
    """The connection has authenticated as `principal`: its session starts, lasting
    connections.max.reauth.ms (0: for ever). A client that used SaslAuthenticate v1+ may
    re-authenticate later (KIP-368; older ones cannot, as Kafka has it). A re-authentication
    must end with the principal it began with: otherwise the reason it is refused (and nothing
    changes)."""
    if authenticator.reauth is not None and principal != authenticator.reauth[0]:
        return f"re-authentication as {principal} on a connection of {authenticator.reauth[0]}"
    conn.principal = principal
    conn.sasl = None
    conn.sasl_mechanism = authenticator.mechanism if can_reauthenticate else None
    conn.frames.max_size, conn.frames.max_size_name = conn.server.max_request_size, "socket.request.max.bytes"
    conn.session_expiry = time.monotonic() + reauth_ms / 1000 if reauth_ms > 0 else 0.0
    return None


def begin_reauthentication(conn: Any) -> SaslAuthenticator | None:
    """A SaslHandshake on an authenticated SASL connection: the client re-authenticates (KIP-368)
    with the mechanism it used; None where there is nothing to re-authenticate."""
    listener = conn.server.sasl
    if listener is None or conn.sasl_mechanism is None:
        return None
    conn.sasl = SaslAuthenticator(listener, reauth=(conn.principal, conn.sasl_mechanism))
    return conn.sasl
