"""SCRAM credentials as Kafka stores them (ScramCredentialUtils, ScramFormatter): pure functions,
shared by the broker (the SASL mechanism, AlterUserScramCredentials) and the tools.

A user's credential for one mechanism is a value of its entity config (/config/users/<user>),
under the mechanism's name:

    "SCRAM-SHA-256": "salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>"

    SaltedPassword = PBKDF2-HMAC-<hash>(password, salt, iterations)       (RFC 5802's Hi())
    ClientKey      = HMAC(SaltedPassword, "Client Key")
    stored_key     = H(ClientKey)
    server_key     = HMAC(SaltedPassword, "Server Key")

The password itself is never stored; the broker needs only stored_key (to check a client's
proof) and server_key (to prove itself to the client). PBKDF2 is slow on purpose (thousands of
iterations): whoever computes it off a tool's command line may, a broker must not on its event
loop (AlterUserScramCredentials carries the salted password, computed by the client).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from samsa.metadata import zkdata


@dataclass(frozen=True)
class ScramMechanism:
    """Kafka's ScramMechanism: the wire type (AlterUserScramCredentials), the hash, the limits."""

    name: str
    type: int
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384  # the most Kafka's AlterUserScramCredentials accepts

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in MECHANISMS.values()}
DEFAULT_ITERATIONS = 4096  # kafka-configs' default


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # (never a key in a log line or a traceback)
        return f"ScramCredential(iterations={self.iterations}, salt=[hidden], keys=[hidden])"


def user_entity(user: str) -> str:
    """The entity path of a SCRAM user's config: its name always sanitized, as Kafka's SCRAM
    paths do (a user named <default> is not the default user)."""
    return f"users/{zkdata.sanitize(user)}"


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): CPU-heavy, on purpose (tools call it; a broker's loop must not)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    client_key = mechanism.hmac(salted, b"Client Key")
    return ScramCredential(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)


def random_salt() -> bytes:
    """A salt shaped as Kafka's tools make them: the ASCII of a 130-bit random number in base 36."""
    return base36(secrets.randbits(130)).encode()


def base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if n == 0:
            return out


def new_credential(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    salt = random_salt()
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def credential_to_string(c: ScramCredential) -> str:
    return (f"salt={_b64(c.salt)},stored_key={_b64(c.stored_key)},server_key={_b64(c.server_key)},"
            f"iterations={c.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """Kafka's credentialFromString: exactly the four keys; ValueError otherwise (the message
    never repeats the value: it holds the keys)."""
    props: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if not eq or key in props:
            raise ValueError("a SCRAM credential is salt=..,stored_key=..,server_key=..,iterations=..")
        props[key] = value
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError(f"a SCRAM credential has the keys salt, stored_key, server_key and iterations, not "
                         f"{', '.join(sorted(props))}")
    try:
        parts = [base64.b64decode(props[k], validate=True) for k in ("salt", "stored_key", "server_key")]
        iterations = int(props["iterations"])
    except (binascii.Error, ValueError):
        raise ValueError("a SCRAM credential's salt and keys are base64 and its iterations a number") from None
    return ScramCredential(parts[0], parts[1], parts[2], iterations)
