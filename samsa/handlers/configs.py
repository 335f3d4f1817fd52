"""Shared pieces of DescribeConfigs / AlterConfigs / IncrementalAlterConfigs.

Authorization (as Kafka's ConfigHelper and KafkaApis): DESCRIBE_CONFIGS or ALTER_CONFIGS on the
topic (TOPIC_AUTHORIZATION_FAILED), or on the cluster for broker and broker-logger resources
(CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from samsa.config import ConfigEntry
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def refusal(ctx: RequestContext, op: Op, resource_type: int, name: str) -> ErrorCode | None:
    """The error of a config resource the principal may not describe or alter, else None
    (unknown resource types are left to the handler's own check)."""
    if resource_type == TOPIC:
        return None if ctx.authorize(op, ResourceType.TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type in (BROKER, BROKER_LOGGER):
        return None if ctx.authorize_cluster(op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return None


def entry_dict(e: ConfigEntry, version: int, include_docs: bool) -> dict[str, Any]:
    return {
        "name": e.name,
        "value": e.value,
        "read_only": e.read_only,
        "config_source": e.source,
        "is_sensitive": e.sensitive,
        "synonyms": [{"name": n, "value": v, "source": s} for n, v, s in e.synonyms],
        "config_type": e.type,
        "documentation": e.doc if include_docs else None,
    }
