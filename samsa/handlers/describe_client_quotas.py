"""DescribeClientQuotas (48): the quotas of the user and client-id entities a filter matches.

A filter is a list of components, one per entity type at most: EXACT (match=name; a null name
is the default entity), DEFAULT (the default entity) or SPECIFIED (any entity of that type,
default included). An entity matches when each component matches its part of it and, with
`strict`, it has no part that no component names; without `strict` an unnamed part may be
anything. Entities are read from the metadata store (so a change made through any broker is
seen at once), and only their quota keys are described. As Kafka: an unknown entity type is
UNSUPPORTED_VERSION, a duplicate or empty one and an IP filter mixed with user or client-id
are INVALID_REQUEST; an IP-only filter matches nothing (Samsa keeps no IP quotas). It needs
DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.client_quotas import (
    CLIENT_ID,
    DEFAULT,
    IP,
    USER,
    entity_of_path,
    invalid,
    quota_values,
    wire_entity,
)
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1

EXACT, MATCH_DEFAULT, SPECIFIED = 0, 1, 2
_ANY = object()  # a SPECIFIED component: any name


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize_cluster(Op.DESCRIBE_CONFIGS):  # as Kafka's
        return {"throttle_time": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                "error_message": "DESCRIBE_CONFIGS on the cluster is needed", "entries": None}
    try:
        wanted = _filter(req.components)
    except KafkaError as e:
        return {"throttle_time": 0, "error_code": int(e.code), "error_message": e.message, "entries": None}
    entries = []
    if IP not in wanted:
        for path, config in sorted((await ctx.entity_configs.read_all()).items()):
            values = quota_values(config)
            if not values:
                continue
            entity = entity_of_path(path)
            if _matches(wanted.get(USER), entity[0], req.strict) and _matches(wanted.get(CLIENT_ID), entity[1],
                                                                                req.strict):
                entries.append({"entity": wire_entity(entity),
                                "values": [{"key": k, "value": v} for k, v in sorted(values.items())]})
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "entries": entries}


def _filter(components: list[Any]) -> dict[str, object]:
    """entity type -> a name, DEFAULT or _ANY."""
    wanted: dict[str, object] = {}
    for c in components:
        kind = c.entity_type
        if kind == "":
            raise invalid("Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported")
        if kind in wanted:
            raise invalid(f"Duplicate {'client' if kind == CLIENT_ID else kind} filter component entity type")
        if c.match_type == EXACT:
            wanted[kind] = DEFAULT if c.match is None else c.match
        elif c.match_type == MATCH_DEFAULT:
            wanted[kind] = DEFAULT
        elif c.match_type == SPECIFIED:
            wanted[kind] = _ANY
        else:
            raise invalid(f"Unexpected match type: {c.match_type}")
    if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
        raise invalid("Invalid entity filter component combination, IP filter component should not be used with "
                      "user or clientId filter component.")
    return wanted


def _matches(want: object, name: str | None, strict: bool) -> bool:
    if want is None:  # no component for this type
        return name is None or not strict
    if want is _ANY:
        return name is not None
    return name == want
