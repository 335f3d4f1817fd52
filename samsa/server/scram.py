"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, as Kafka's
ScramSaslServer, and the credential cache it reads.

Two rounds, each one SaslAuthenticate (or one bare token after a v0 handshake):

    client-first   n,[a=<authzid>],n=<user>,r=<client nonce>[,<ext>=<value>...]
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=<base64 gs2 header>,r=<both nonces>,p=<base64 proof>
    server-final   v=<base64 server signature>

AuthMessage is client-first-bare "," server-first "," client-final-without-proof. The client
proves it knows the password: ClientKey = proof XOR HMAC(stored_key, AuthMessage) must hash to
stored_key (compared in constant time); the server proves it holds the credential with
HMAC(server_key, AuthMessage). Only the gs2 header "n" (or "y": the client could bind but
believes we cannot) is accepted: channel binding ("p=") is not offered. The `tokenauth`
extension (delegation tokens) is refused; other extensions are ignored, as Kafka does.

No user oracle: Kafka refuses an unknown user at client-first; Samsa answers it with a
server-first made from a fake credential, its salt derived from a cluster secret and the user
name (stable for that name, shaped as Kafka's tools shape salts), its iterations the default,
and fails it at client-final after the same computation as a wrong password. The secret lives
in the metadata store (SCRAM_SECRET), made by the first broker that needs it, so every broker
and every restart answers an unknown name with the same salt, as it would a real user.

Failures are answered with Kafka's message ("Authentication failed during authentication due
to invalid credentials with SASL mechanism SCRAM-SHA-256"), which says nothing of why; the why
goes to the broker's rate-limited log line, never with a proof, key or nonce.

`ScramCredentials` follows users' entity configs (EntityConfigs listener): the credential of
each user per mechanism, parsed once per change.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import os
import re
import secrets

from samsa.metadata import zkdata
from samsa.metadata.scram import (
    BY_TYPE,
    DEFAULT_ITERATIONS,
    MECHANISMS,
    ScramCredential,
    ScramMechanism,
    base36,
    credential_from_string,
)
from samsa.metadata.store import MetadataStore, NodeExists
from samsa.server.entity_configs import parse_entity

log = logging.getLogger("samsa.auth")

__all__ = ["BY_TYPE", "MECHANISMS", "ScramCredentials", "ScramExchange", "SaslStep"]

_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # printable ASCII but ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # ASCII but ',' and '=' (those escaped)
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>(?P<flag>[ny]),(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<user>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>(?:,[A-Za-z]+=[^,]*)*))")
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?:,[A-Za-z]+=[^,]*)*),p=(?P<proof>{_BASE64})")


def _unescape(saslname: str) -> str:
    return saslname.replace("=2C", ",").replace("=3D", "=")


class SaslStep:
    """What one round of a SASL mechanism gives the authenticator (sasl.py; PLAIN answers in one,
    SCRAM in two): a reply to send, and then either nothing more (continue: the client sends
    its next message), a principal (authenticated) or a failure."""

    __slots__ = ("failure", "message", "principal", "reply")

    def __init__(self, reply: bytes = b"", principal: str | None = None, failure: str | None = None,
                 message: str | None = None) -> None:
        self.reply = reply
        self.principal = principal
        self.failure = failure  # why, for the broker's log
        self.message = message  # what the client is told


class ScramCredentials:
    """Every user's SCRAM credentials, per mechanism, from the users' entity configs."""

    def __init__(self) -> None:
        self._creds: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}
        self.secret = os.urandom(32)  # replaced by the cluster's (load_secret) before the listeners serve

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._creds[mechanism].get(user)

    def on_entity(self, entity: str, config: dict[str, str]) -> None:
        """EntityConfigs listener: `config` is the whole config of `entity` ({} when deleted)."""
        if not entity.startswith("users/") or "/clients/" in entity or entity == f"users/{zkdata.DEFAULT_ENTITY}":
            return  # (a user literally named <default> is users/%3Cdefault%3E: Kafka's SCRAM paths)
        user, _ = parse_entity(entity)
        if user is None:
            return
        for name, creds in self._creds.items():
            text = config.get(name)
            if text is None:
                creds.pop(user, None)
                continue
            try:
                creds[user] = credential_from_string(text)
            except ValueError as e:
                creds.pop(user, None)
                log.warning("Ignoring the %s credential of user %r in /config/users: %s", name, user, e)

    async def load_secret(self, store: MetadataStore) -> None:
        """The cluster's secret for unknown users' fake salts: read it, or make it if none has."""
        node = await store.get(zkdata.SCRAM_SECRET)
        if node is None:
            try:
                await store.create(zkdata.SCRAM_SECRET, base64.b64encode(os.urandom(32)))
            except NodeExists:
                pass  # another broker made it first: use theirs
            node = await store.get(zkdata.SCRAM_SECRET)
        if node is not None and node[0]:
            self.secret = base64.b64decode(node[0])

    def fake(self, mechanism: ScramMechanism, user: str) -> ScramCredential:
        """A credential for a user that has none: the same for a name every time (see the doc)."""
        seed = f"{mechanism.name}\0{user}".encode()
        salt_bits = int.from_bytes(hmac.digest(self.secret, b"salt\0" + seed, "sha256")[:17], "big") >> 6
        return ScramCredential(
            salt=base36(salt_bits).encode(),
            stored_key=mechanism.hmac(self.secret, b"stored_key\0" + seed),
            server_key=mechanism.hmac(self.secret, b"server_key\0" + seed),
            iterations=DEFAULT_ITERATIONS,
        )


class ScramExchange:
    """One connection's SCRAM exchange (see the module doc)."""

    __slots__ = ("_auth_first", "_cred", "_gs2", "_known", "_nonce", "_state", "_user", "credentials", "mechanism")

    def __init__(self, mechanism: ScramMechanism, credentials: ScramCredentials) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self._state = "client-first"  # -> "client-final" -> "ended"
        self._cred: ScramCredential | None = None  # after client-first
        self._known = False
        self._user = ""
        self._gs2 = ""
        self._nonce = ""
        self._auth_first = ""  # client-first-bare "," server-first

    def _refused(self, why: str, message: str | None = None) -> SaslStep:
        self._state, self._cred = "ended", None
        return SaslStep(failure=why, message=message or ("Authentication failed during authentication due to "
                                                          f"invalid credentials with SASL mechanism "
                                                          f"{self.mechanism.name}"))

    def step(self, token: bytes) -> SaslStep:
        """The answer to the client's next message."""
        if self._state == "client-first":
            return self._client_first(token)
        if self._state == "client-final":
            return self._client_final(token)
        return self._refused("a SCRAM message after the exchange ended")

    def _client_first(self, token: bytes) -> SaslStep:
        try:
            text = token.decode("ascii")
        except UnicodeDecodeError:
            return self._refused("malformed SCRAM client-first message (not ASCII)")
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            what = "channel binding (p=...) is not offered" if text.startswith("p=") else "malformed"
            return self._refused(f"SCRAM client-first message: {what}")
        extensions = dict(e.split("=", 1) for e in m.group("ext")[1:].split(",")) if m.group("ext") else {}
        if "tokenauth" in extensions:
            return self._refused("delegation tokens (the tokenauth SCRAM extension) are not supported")
        user = _unescape(m.group("user"))
        if "=" in m.group("user").replace("=2C", "").replace("=3D", ""):
            return self._refused("malformed user name in the SCRAM client-first message")
        authzid = m.group("authzid")
        if authzid is not None and _unescape(authzid) != user:
            return self._refused("the authorization id differs from the user name",
                                 "Authentication failed: Client requested an authorization id that is different "
                                 "from username")
        fake = self.credentials.fake(self.mechanism, user)  # (made for every user: the same work)
        cred = self.credentials.get(self.mechanism.name, user)
        self._known = cred is not None
        if cred is None:
            cred = fake
        elif cred.iterations < self.mechanism.min_iterations:
            return self._refused(f"user {user!r}'s {self.mechanism.name} credential has {cred.iterations} iterations, "
                                 f"under the minimum {self.mechanism.min_iterations}")
        self._state, self._cred, self._user, self._gs2 = "client-final", cred, user, m.group("gs2")
        self._nonce = m.group("nonce") + secrets.token_urlsafe(24)
        server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self._auth_first = f"{m.group('bare')},{server_first}"
        return SaslStep(server_first.encode())

    def _client_final(self, token: bytes) -> SaslStep:
        cred, user = self._cred, self._user
        assert cred is not None
        self._state, self._cred = "ended", None  # one final message, whatever it holds
        try:
            m = _CLIENT_FINAL.fullmatch(token.decode("ascii"))
        except UnicodeDecodeError:
            m = None
        if m is None:
            return self._refused(f"malformed SCRAM client-final message from user {user!r}")
        try:
            cbind = base64.b64decode(m.group("cbind"), validate=True)
            proof = base64.b64decode(m.group("proof"), validate=True)
        except binascii.Error:
            return self._refused(f"malformed base64 in the SCRAM client-final message from user {user!r}")
        if cbind != self._gs2.encode():
            return self._refused(f"the SCRAM channel binding of user {user!r} does not repeat its gs2 header")
        # Ends with: as Kafka checks it. (librdkafka 2.0 repeats its own nonce in front; RFC 5802
        # wants the exact nonce, which still must end the client's.)
        if not m.group("nonce").endswith(self._nonce):
            return self._refused(f"invalid nonce in the SCRAM client-final message from user {user!r}")
        mech = self.mechanism
        auth_message = f"{self._auth_first},{m.group('without_proof')}".encode()
        client_signature = mech.hmac(cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            proof = bytes(len(client_signature))  # (fails below, after the same work)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        proof_ok = hmac.compare_digest(mech.hash(client_key), cred.stored_key)
        server_signature = mech.hmac(cred.server_key, auth_message)
        if not (proof_ok and self._known):
            why = "invalid credentials" if self._known else "unknown user"
            return self._refused(f"{why} for user {user!r}")
        return SaslStep(b"v=" + base64.b64encode(server_signature), principal=f"User:{user}")
