"""AlterConfigs (33): the legacy whole-set replacement of a resource's dynamic configs."""

from __future__ import annotations

from typing import Any

from samsa.handlers.configs import BROKER, TOPIC, refusal
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    responses = []
    for r in req.resources:
        refused = refusal(ctx, Op.ALTER_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            responses.append({"error_code": int(refused), "error_message": None, "resource_type": r.resource_type,
                              "resource_name": r.resource_name})
            continue
        configs = {c.name: c.value for c in r.configs}
        try:
            if r.resource_type == TOPIC:
                await ctx.admin.set_topic_configs(r.resource_name, {k: v for k, v in configs.items() if v is not None},
                                                  req.validate_only)
            elif r.resource_type == BROKER:
                current = (ctx.config.dynamic_broker_configs() if r.resource_name
                           else ctx.config.dynamic_default_configs())
                changes: dict[str, str | None] = {k: None for k in current} | configs
                await ctx.admin.set_broker_configs(r.resource_name, changes, req.validate_only)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {r.resource_type}")
        except KafkaError as e:
            responses.append({"error_code": int(e.code), "error_message": e.message,
                              "resource_type": r.resource_type, "resource_name": r.resource_name})
            continue
        responses.append({"error_code": 0, "resource_type": r.resource_type, "resource_name": r.resource_name})
    return {"throttle_time": 0, "responses": responses}
