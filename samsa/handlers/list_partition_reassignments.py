"""ListPartitionReassignments (46): the ongoing reassignments (replicas, adding, removing),
served by the active controller.

A null topic list asks for every ongoing reassignment; otherwise only the named partitions
that are being reassigned are listed (partitions named twice are listed once). Partitions
that are not being reassigned, or do not exist, are simply absent from the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from samsa.handlers.controller_calls import TopicPartition, active_controller, by_topic, with_timeout
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger("samsa.requests")

Ongoing = dict[TopicPartition, tuple[list[int], list[int], list[int]]]


def handle(ctx: RequestContext, req: Any) -> Any:
    if not ctx.authorize_cluster(Op.DESCRIBE):  # (Kafka: DESCRIBE on the cluster)
        return _response(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed", {})
    controller = active_controller(ctx)
    if controller is None:
        return _response(ErrorCode.NOT_CONTROLLER, "this broker is not the active controller", {})
    requested: list[TopicPartition] | None = None
    if req.topics is not None:
        seen: dict[TopicPartition, None] = {}
        for t in req.topics:
            for p in t.partition_indexes:
                seen.setdefault((t.name, p), None)
        requested = list(seen)
        if not requested:
            return _response(ErrorCode.NONE, None, {})
    try:
        result = controller.list_reassignments(requested)
    except KafkaError as e:
        return _response(e.code, e.message, {})
    except Exception:
        log.exception("listing partition reassignments failed in the controller")
        return _response(ErrorCode.UNKNOWN_SERVER_ERROR, "listing reassignments failed on the controller", {})
    if isinstance(result, dict):
        return _answer(result, requested)
    return _later(result, requested, req.timeout)


async def _later(pending: Any, requested: list[TopicPartition] | None, timeout_ms: int) -> dict[str, Any]:
    try:
        result = await with_timeout(pending, timeout_ms)
    except TimeoutError:
        return _response(ErrorCode.REQUEST_TIMED_OUT, f"no answer from the controller within {timeout_ms} ms", {})
    except KafkaError as e:
        return _response(e.code, e.message, {})
    except Exception:
        log.exception("listing partition reassignments failed in the controller")
        return _response(ErrorCode.UNKNOWN_SERVER_ERROR, "listing reassignments failed on the controller", {})
    return _answer(result, requested)


def _answer(result: Ongoing, requested: list[TopicPartition] | None) -> dict[str, Any]:
    if requested is None:
        ongoing = dict(sorted(result.items()))
    else:
        ongoing = {tp: result[tp] for tp in requested if tp in result}
    return _response(ErrorCode.NONE, None, ongoing)


def _response(code: int, message: str | None, ongoing: Ongoing) -> dict[str, Any]:
    grouped = by_topic((t, (p, state)) for (t, p), state in ongoing.items())
    return {
        "throttle_time": 0,
        "error_code": int(code),
        "error_message": message,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "replicas": list(replicas), "adding_replicas": list(adding),
                     "removing_replicas": list(removing)}
                    for p, (replicas, adding, removing) in parts
                ],
            }
            for topic, parts in grouped.items()
        ],
    }
