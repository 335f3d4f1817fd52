"""DescribeConfigs (32): topic and broker configs with their sources and synonyms."""

from __future__ import annotations

from typing import Any

from samsa.config import describe_topic_config
from samsa.handlers.configs import BROKER, BROKER_LOGGER, TOPIC, entry_dict, refusal
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    synonyms = bool(req.include_synonyms)
    docs = bool(getattr(req, "include_documentation", False))
    results = []
    for r in req.resources:
        base = {"resource_type": r.resource_type, "resource_name": r.resource_name, "configs": []}
        names = list(r.configuration_keys) if r.configuration_keys else None
        refused = refusal(ctx, Op.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if refused is not None:
            results.append({**base, "error_code": int(refused), "error_message": None})
            continue
        if r.resource_type == TOPIC:
            topic = ctx.topics.get(r.resource_name)
            if topic is None:
                results.append({**base, "error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                "error_message": f"Topic '{r.resource_name}' does not exist"})
                continue
            entries = describe_topic_config(ctx.config, topic.configs, include_synonyms=synonyms, names=names,
                                            include_docs=docs)
        elif r.resource_type == BROKER:
            if r.resource_name not in ("", str(ctx.node_id)):
                results.append({**base, "error_code": int(ErrorCode.INVALID_REQUEST),
                                "error_message": f"broker {r.resource_name} is not this broker ({ctx.node_id})"})
                continue
            entries = ctx.config.describe(names, include_synonyms=synonyms, include_docs=docs,
                                          default_resource=r.resource_name == "")
        elif r.resource_type == BROKER_LOGGER:
            entries = []
        else:
            results.append({**base, "error_code": int(ErrorCode.INVALID_REQUEST),
                            "error_message": f"unsupported resource type {r.resource_type}"})
            continue
        results.append({**base, "error_code": 0, "configs": [entry_dict(e, ctx.version, docs) for e in entries]})
    return {"throttle_time": 0, "results": results}
