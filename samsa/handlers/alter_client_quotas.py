"""AlterClientQuotas (49): set or remove quotas of users, client-ids and user+client-id pairs.

Each entry names one entity (a user, a client-id or both; a null name is the default entity)
and its operations (set a key to a value, or remove it); each is checked and written on its
own and gets its own error. Written as Kafka writes them: the entity's node under /config
(`{"version":1,"config":{"producer_byte_rate":"1048576"}}`, by compare-and-set, its other keys
such as SCRAM credentials kept) and a /config/changes notification that every broker follows.
With `validate_only` everything is checked and nothing stored.

INVALID_REQUEST, with Kafka's messages: an empty entity, an unknown or repeated entity type, an
empty name, an unknown quota key, a value not above 0, a fractional byte rate; and, Samsa's
own, keys and entities Samsa does not implement (controller_mutation_rate, IP quotas), which
would otherwise be accepted and have no effect. It needs ALTER_CONFIGS on the cluster (else
each entry is CLUSTER_AUTHORIZATION_FAILED, and nothing is stored).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from samsa.config_defs import CLIENT_QUOTA_REFUSED, CLIENT_QUOTA_TYPES
from samsa.handlers.client_quotas import CLIENT_ID, DEFAULT, IP, IP_REFUSED, USER, invalid
from samsa.metadata import zkdata
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    results = []
    allowed = ctx.authorize_cluster(Op.ALTER_CONFIGS)  # as Kafka's
    for entry in req.entries:
        error, message = 0, None
        try:
            if not allowed:
                raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER_CONFIGS on the cluster is needed")
            path = _path(entry.entity)
            ops = [_op(op) for op in entry.ops]
            if not req.validate_only:
                await ctx.entity_configs.alter(path, functools.partial(_apply, ops=ops))
        except KafkaError as e:
            error, message = int(e.code), e.message
        results.append({"error_code": error, "error_message": message,
                        "entity": [{"entity_type": c.entity_type, "entity_name": c.entity_name} for c in entry.entity]})
    return {"throttle_time": 0, "entries": results}


def _path(components: list[Any]) -> str:
    """The entity's path under /config (Kafka's layout), or INVALID_REQUEST."""
    if not components:
        raise invalid("Invalid empty client quota entity")
    names: dict[str, str] = {}
    for c in components:
        kind, name = c.entity_type, c.entity_name
        if kind in names:
            raise invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise invalid(f"Empty {kind} not supported")
        names[kind] = DEFAULT if name is None else name
    if IP in names:
        if len(names) > 1:
            raise invalid("Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
        raise invalid(IP_REFUSED)
    return zkdata.entity_path(names.get(USER), names.get(CLIENT_ID))


def _op(op: Any) -> tuple[str, str | None]:
    """(key, the value as stored; None to remove), or INVALID_REQUEST."""
    key = op.key
    if key not in CLIENT_QUOTA_TYPES:
        raise invalid(f"Invalid configuration key {key}")
    if op.remove:
        return key, None
    if key in CLIENT_QUOTA_REFUSED:
        raise invalid(f"Cannot set {key}: {CLIENT_QUOTA_REFUSED[key]}")
    value = float(op.value)
    if not math.isfinite(value) or value <= 0.0:
        raise invalid(f"Quota {key} must be greater than 0" if not value > 0.0 else f"Quota {key} must be finite")
    if CLIENT_QUOTA_TYPES[key] == "long":
        whole = int(value + 1e-6)
        if abs(whole - value) > 1e-6:
            raise invalid(f"Configuration {key} must be a LONG value")
        return key, str(whole)
    return key, _java_double(value)


def _apply(config: dict[str, str], ops: list[tuple[str, str | None]]) -> dict[str, str] | None:
    new = dict(config)
    for key, value in ops:
        if value is None:
            new.pop(key, None)
        else:
            new[key] = value
    return None if new == config else new


def _java_double(v: float) -> str:
    """A double as Java's Double.toString writes it (what Kafka stores): 50.0, 12.5, 1.0E-4."""
    if 1e-3 <= abs(v) < 1e7:
        return repr(v)
    mantissa, exponent = f"{v:.16e}".split("e")
    digits = repr(float(mantissa))
    return f"{digits}E{int(exponent)}"
