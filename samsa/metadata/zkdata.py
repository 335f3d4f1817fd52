"""Kafka's metadata layout: every path and JSON shape in one place (as Kafka's ZkData.scala).

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /brokers/ids/<id>                             (ephemeral) registration with endpoints
    /brokers/topics/<topic>                       {"version":3,"topic_id":"<base64>","partitions":{"0":[0,1]}, ...}
    /brokers/topics/<topic>/partitions/<p>/state
                                                  {"version":1,"leader":0,"leader_epoch":0,"isr":[0],
                                                   "controller_epoch":1}
    /config/topics/<topic>                        {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id> and /config/brokers/<default>
    /config/users/<user>, /config/clients/<client-id>, /config/users/<user>/clients/<client-id>
                                                  {"version":1,"config":{"producer_byte_rate":"1048576",
                                                   "SCRAM-SHA-256":"salt=...,stored_key=...,..."}}
                                                  (names URL-encoded as Kafka's Sanitizer does;
                                                   <default> is the default entity)
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"users/alice"}
    /kafka-acl/<ResourceType>/<name>              {"version":1,"acls":[{"principal":"User:alice",
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   "permissionType":"Allow","operation":"Read","host":"*"}]}
                                                  (ResourceType as Kafka names it: Topic, Group, Cluster,
                                                   TransactionalId; the cluster's name is kafka-cluster)
    /kafka-acl-changes/acl_changes_<seq>          TOPIC:<name> (a literal pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq> {"version":1,"resourceType":"TOPIC","name":"<name>",
                                                   "patternType":"PREFIXED"}
    /admin/delete_topics/<topic>
    /samsa/scram_secret                           (Samsa's) random bytes, base64: unknown SCRAM users'
                                                  salts are derived from it (server/scram.py)
    /admin/controlled_shutdown/<id>               (ephemeral) a broker asks the controller to move its leaders
    /controller, /controller_epoch
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

CLUSTER_ID = "/cluster/id"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
TOPIC_CONFIGS = "/config/topics"
BROKER_CONFIGS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
LOG_DIR_EVENTS = "/log_dir_event_notification"  # Kafka's: a broker's log dir failed (children, persistent)
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"  # Samsa's: <id> children ask the controller to move leaders
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DEFAULT_BROKER = "<default>"
DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeper name of a default user or client-id
USER_CONFIGS = "/config/users"
CLIENT_CONFIGS = "/config/clients"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
# Samsa's: the cluster's secret (base64) from which unknown SCRAM users' fake salts are derived
SCRAM_SECRET = "/samsa/scram_secret"
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def log_dir_event_path(broker_id: int, unique: str) -> str:
    """Kafka names these log_dir_event_<sequence>; Samsa's store has no sequential nodes, so the
    broker and a unique suffix make the name."""
    return f"{LOG_DIR_EVENTS}/log_dir_event_{broker_id}_{unique}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


def broker_config_path(broker: str) -> str:
    return f"{BROKER_CONFIGS}/{broker}"


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def loads(data: bytes) -> Any:
    return json.loads(data) if data else {}


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass
class TopicAssignment:
    topic_id: uuid.UUID
    partitions: dict[int, list[int]]
    adding: dict[int, list[int]] = field(default_factory=dict)  # KIP-455: reassignment in progress
    removing: dict[int, list[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return dumps(
            {
                "version": 3,
                "topic_id": encode_topic_id(self.topic_id),
                "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
                "adding_replicas": {str(p): r for p, r in sorted(self.adding.items())},
                "removing_replicas": {str(p): r for p, r in sorted(self.removing.items())},
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> TopicAssignment:
        doc = loads(data)
        return cls(decode_topic_id(doc["topic_id"]), {int(p): list(r) for p, r in doc["partitions"].items()},
                   {int(p): list(r) for p, r in (doc.get("adding_replicas") or {}).items()},
                   {int(p): list(r) for p, r in (doc.get("removing_replicas") or {}).items()})


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int = 1
    version: int = field(default=0, compare=False)  # the store's node version, for CAS

    def encode(self) -> bytes:
        return dumps(
            {"version": 1, "leader": self.leader, "leader_epoch": self.leader_epoch, "isr": self.isr,
             "controller_epoch": self.controller_epoch}
        )

    @classmethod
    def decode(cls, data: bytes, version: int = 0) -> PartitionState:
        doc = loads(data)
        return cls(int(doc["leader"]), int(doc["leader_epoch"]), list(doc["isr"]), int(doc.get("controller_epoch", 1)),
                   version)


def _in_order(doc: dict[str, Any]) -> bytes:
    """Keys in the order given, as Kafka's Json.encodeAsBytes of a Scala Map writes them."""
    return json.dumps(doc, separators=(",", ":")).encode()


def encode_config(config: dict[str, str]) -> bytes:
    """Kafka's ConfigEntityZNode bytes: {"version":1,"config":{...}} (the keys sorted)."""
    return _in_order({"version": 1, "config": dict(sorted(config.items()))})


def decode_config(data: bytes) -> dict[str, str]:
    return dict(loads(data).get("config", {}))


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user or client-id as a ZooKeeper node name (Java's
    URLEncoder, with ' ' as %20 and '*' as %2A). `<default>` is left as it is by callers."""
    from urllib.parse import quote

    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's Sanitizer.desanitize (Java's URLDecoder: '+' is a space)."""
    from urllib.parse import unquote_plus

    return unquote_plus(name)


def entity_path(user: str | None = None, client_id: str | None = None) -> str:
    """The entity path of Kafka's config change notifications ("users/alice",
    "users/alice/clients/app", "clients/app"); names are Kafka's raw names, `<default>` for a
    default (None means the entity type is not part of the path)."""

    def node(name: str) -> str:
        return name if name == DEFAULT_ENTITY else sanitize(name)

    if user is not None and client_id is not None:
        return f"users/{node(user)}/clients/{node(client_id)}"
    if user is not None:
        return f"users/{node(user)}"
    if client_id is not None:
        return f"clients/{node(client_id)}"
    raise ValueError("an entity names a user, a client-id or both")


def config_change(entity: str) -> bytes:
    """A /config/changes notification of `entity` (an entity path), Kafka's version 2:
    {"version":2,"entity_path":"users/alice"}."""
    return _in_order({"version": 2, "entity_path": entity})


# -- ACLs (Kafka's AclAuthorizer; ZkData.scala's ZkAclStore, ZkAclChangeStore, ResourceZNode) ----
# A pattern type or resource type is passed as Kafka's enum name ("LITERAL", "PREFIXED";
# "TOPIC", "TRANSACTIONAL_ID"); Kafka's paths spell resource types in PascalCase.


def pascal_case(enum_name: str) -> str:
    """"TRANSACTIONAL_ID" -> "TransactionalId" (Kafka's SecurityUtils.resourceTypeName)."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


def acl_root(pattern_type: str) -> str:
    """Where a pattern type's ACLs live: /kafka-acl for literal ones, else
    /kafka-acl-extended/<pattern type in lower case>."""
    return LITERAL_ACLS if pattern_type == "LITERAL" else f"{EXTENDED_ACLS}/{pattern_type.lower()}"


def acl_path(pattern_type: str, resource_type: str, name: str) -> str:
    return f"{acl_root(pattern_type)}/{pascal_case(resource_type)}/{name}"


def acl_change_root(pattern_type: str) -> str:
    return LITERAL_ACL_CHANGES if pattern_type == "LITERAL" else EXTENDED_ACL_CHANGES


def encode_acls(entries: list[tuple[str, str, str, str]]) -> bytes:
    """(principal, permission type, operation, host) each as Kafka writes them ("User:alice",
    "Allow", "Read", "*"), in Kafka's key order."""
    acls = [{"principal": p, "permissionType": perm, "operation": op, "host": h} for p, perm, op, h in entries]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes) -> list[tuple[str, str, str, str]]:
    """The entries of an ACL node; ValueError for a node Kafka would not read either."""
    if not data:
        return []
    doc = json.loads(data)
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("acls"), list):
        raise ValueError(f"not a version 1 ACL node: {data[:200]!r}")
    out = []
    for a in doc["acls"]:
        out.append((str(a["principal"]), str(a["permissionType"]), str(a["operation"]), str(a["host"])))
    return out


def acl_change(pattern_type: str, resource_type: str, name: str) -> bytes:
    """The payload of an ACL change notification: Kafka's legacy "TOPIC:name" for literal
    patterns, a JSON event for the others."""
    if pattern_type == "LITERAL":
        return f"{resource_type}:{name}".encode()
    return json.dumps({"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type},
                      separators=(",", ":")).encode()


def decode_acl_change(data: bytes, literal: bool) -> tuple[str, str, str]:
    """(pattern type, resource type, name), enum names upper-cased as Kafka's fromString reads
    them; ValueError when malformed."""
    if literal:
        text = data.decode()
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {text[:200]!r}")
        return "LITERAL", rtype.upper(), name
    doc = json.loads(data)
    if not isinstance(doc, dict) or int(doc.get("version", 0)) > 1:
        raise ValueError(f"unsupported ACL change event {data[:200]!r}")
    return str(doc["patternType"]).upper(), str(doc["resourceType"]).upper(), str(doc["name"])
