"""ElectLeaders (43): preferred or unclean leader election, served by the active controller.

v0 has no election type (always preferred) and no top-level error: a request-wide failure
such as NOT_CONTROLLER is reported on every requested partition (v1+ also set it top-level).
A null partition list means every partition of the cluster; as in Kafka, partitions that
needed no election (ELECTION_NOT_NEEDED) are then left out of the answer. Partitions named
twice are elected once.
"""

from __future__ import annotations

import logging
from typing import Any

from samsa.handlers.controller_calls import TopicPartition, active_controller, by_topic, with_timeout
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Controller, Op, RequestContext

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2

PREFERRED = 0
UNCLEAN = 1

log = logging.getLogger("samsa.requests")

Results = dict[TopicPartition, tuple[int, str | None]]


def handle(ctx: RequestContext, req: Any) -> Any:
    election_type = req.election_type if ctx.version >= 1 else PREFERRED
    requested = _requested(req)
    if not ctx.authorize_cluster(Op.ALTER):  # (Kafka: ALTER on the cluster, before anything else)
        return _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, requested)
    controller = active_controller(ctx)
    if controller is None:
        return _failed(ErrorCode.NOT_CONTROLLER, "this broker is not the active controller", requested)
    if election_type not in (PREFERRED, UNCLEAN):
        return _failed(ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}", requested)
    if requested is not None and not requested:
        return _response(ErrorCode.NONE, None, {})
    return _elect(controller, election_type, requested, req.timeout)


def _requested(req: Any) -> list[TopicPartition] | None:
    """The request's partitions in order, each once; None for "all partitions"."""
    if req.topic_partitions is None:
        return None
    seen: dict[TopicPartition, None] = {}
    for t in req.topic_partitions:
        for p in t.partitions:
            seen.setdefault((t.topic, p), None)
    return list(seen)


async def _elect(controller: Controller, election_type: int, requested: list[TopicPartition] | None,
                 timeout_ms: int) -> dict[str, Any]:
    try:
        results: Results = dict(await with_timeout(controller.elect_leaders(election_type, requested), timeout_ms))
    except TimeoutError:
        message = f"the election did not complete within {timeout_ms} ms"
        if requested is None:
            return _response(ErrorCode.REQUEST_TIMED_OUT, message, {})
        return _response(ErrorCode.NONE, None, {tp: (ErrorCode.REQUEST_TIMED_OUT, message) for tp in requested})
    except KafkaError as e:
        return _failed(e.code, e.message, requested)
    except Exception:
        log.exception("leader election failed in the controller")
        return _failed(ErrorCode.UNKNOWN_SERVER_ERROR, "the leader election failed on the controller", requested)
    if requested is None:
        ordered = {tp: r for tp, r in sorted(results.items()) if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
    else:
        missing = (ErrorCode.UNKNOWN_SERVER_ERROR, "the controller reported no result for this partition")
        ordered = {tp: results.get(tp, missing) for tp in requested}
    return _response(ErrorCode.NONE, None, ordered)


def _failed(code: ErrorCode, message: str | None, requested: list[TopicPartition] | None) -> dict[str, Any]:
    """A request-wide error, top-level and on every requested partition (Kafka's shape)."""
    return _response(code, message, {tp: (code, message) for tp in requested or []})


def _response(code: int, message: str | None, results: Results) -> dict[str, Any]:
    grouped = by_topic((t, (p, err)) for (t, p), err in results.items())
    return {
        "throttle_time": 0,
        "error_code": int(code),
        "replica_election_results": [
            {
                "topic": topic,
                "partition_result": [
                    {"partition_id": p, "error_code": int(c), "error_message": m} for p, (c, m) in parts
                ],
            }
            for topic, parts in grouped.items()
        ],
    }
