"""What DescribeClientQuotas (48) and AlterClientQuotas (49) share: quota entities as the wire
names them and as ZooKeeper stores them.

On the wire an entity is a list of (entity_type, entity_name) with types "user", "client-id"
and "ip"; a null name is the default entity. In ZooKeeper it is a path under /config
("users/alice", "users/alice/clients/app", "clients/<default>"; names sanitized as Kafka's
Sanitizer, zkdata.entity_path). Samsa keeps quotas for users and client-ids; Kafka's IP
connection-rate quotas (`ip`, connection_creation_rate) are not implemented and are refused.
"""

from __future__ import annotations

from typing import Any

from samsa.config_defs import CLIENT_QUOTA_TYPES
from samsa.metadata import zkdata
from samsa.protocol.errors import ErrorCode, KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
DEFAULT = zkdata.DEFAULT_ENTITY
IP_REFUSED = "IP quotas (connection_creation_rate) are not implemented by Samsa"

# A parsed entity: (user, client-id), each a raw name, DEFAULT, or None when not part of it.
Entity = tuple[str | None, str | None]


def invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def entity_of_path(path: str) -> Entity:
    """"users/alice/clients/app" -> ("alice", "app") (raw names; DEFAULT for a default)."""
    def raw(n: str) -> str:
        return n if n == DEFAULT else zkdata.desanitize(n)

    parts = path.split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return raw(parts[1]), raw(parts[3])
    if len(parts) == 2 and parts[0] == "users":
        return raw(parts[1]), None
    if len(parts) == 2 and parts[0] == "clients":
        return None, raw(parts[1])
    raise ValueError(path)


def wire_entity(entity: Entity) -> list[dict[str, Any]]:
    """The response's entity: user first, then client-id; the default as a null name."""
    out = []
    for kind, name in ((USER, entity[0]), (CLIENT_ID, entity[1])):
        if name is not None:
            out.append({"entity_type": kind, "entity_name": None if name == DEFAULT else name})
    return out


def quota_values(config: dict[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config as numbers (SCRAM credentials and the like left out)."""
    out = {}
    for key, value in config.items():
        if key in CLIENT_QUOTA_TYPES:
            try:
                out[key] = float(value)
            except ValueError:
                continue  # (written by hand: not a quota Samsa can show)
    return out
