"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT single keys.

APPEND and SUBTRACT apply to list settings only (else INVALID_CONFIG, as Kafka), and work on
the resource's own value or, when it has none, on the setting's built-in default, as Kafka's
ConfigAdminManager does: APPEND compact to a topic without its own cleanup.policy gives
"delete,compact" (not "compact"). The built-in default, not a broker override of it: Kafka
reads the setting's definition there too.
"""

from __future__ import annotations

from typing import Any

from samsa.config_defs import BROKER_DEFS, TOPIC_DEFS, ConfigDef
from samsa.handlers.configs import APPEND, BROKER, DELETE, SET, SUBTRACT, TOPIC, refusal
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def _list_default(resource_type: int, name: str, op: int) -> list[str]:
    """The built-in default of a list setting, as items; INVALID_CONFIG for any other setting."""
    d: ConfigDef | None = (TOPIC_DEFS if resource_type == TOPIC else BROKER_DEFS).get(name)
    if d is None or d.type != "list":
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Config value {'append' if op == APPEND else 'subtract'} "
                         f"is not allowed for config key: {name}")
    default = d.default
    if default is None:  # a topic setting whose default is that of the broker key behind it
        default = next((BROKER_DEFS[k].default for k in d.synonyms if k in BROKER_DEFS), None)
    return [str(x) for x in default or []]


def _apply(current: dict[str, str], ops: list[Any], resource_type: int) -> dict[str, str | None]:
    out: dict[str, str | None] = dict(current)
    for op in ops:
        if op.config_operation == SET:
            if op.value is None:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"SET of {op.name} needs a value")
            out[op.name] = op.value
        elif op.config_operation == DELETE:
            out[op.name] = None
        elif op.config_operation in (APPEND, SUBTRACT):
            default = _list_default(resource_type, op.name, op.config_operation)
            value = out.get(op.name)
            items = default if value is None else [x for x in value.split(",") if x]
            values = [x for x in (op.value or "").split(",") if x]
            if op.config_operation == APPEND:
                items += [v for v in values if v not in items]
            else:
                items = [x for x in items if x not in values]
            out[op.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op.config_operation}")
    return out


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    responses = []
    for r in req.resources:
        refused = refusal(ctx, Op.ALTER_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            responses.append({"error_code": int(refused), "error_message": None, "resource_type": r.resource_type,
                              "resource_name": r.resource_name})
            continue
        try:
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "a config key appears twice in one resource")
            if r.resource_type == TOPIC:
                topic = ctx.topics.get(r.resource_name)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{r.resource_name}' does not exist")
                new = _apply(topic.configs, r.configs, TOPIC)
                await ctx.admin.set_topic_configs(r.resource_name, {k: v for k, v in new.items() if v is not None},
                                                  req.validate_only)
            elif r.resource_type == BROKER:
                current = (ctx.config.dynamic_broker_configs() if r.resource_name
                           else ctx.config.dynamic_default_configs())
                await ctx.admin.set_broker_configs(r.resource_name, _apply(current, r.configs, BROKER),
                                                   req.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}")
        except KafkaError as e:
            responses.append({"error_code": int(e.code), "error_message": e.message,
                              "resource_type": r.resource_type, "resource_name": r.resource_name})
            continue
        responses.append({"error_code": 0, "resource_type": r.resource_type, "resource_name": r.resource_name})
    return {"throttle_time": 0, "responses": responses}
