"""AlterPartitionReassignments (45): start (replicas given) or cancel (replicas null)
partition reassignments, served by the active controller (KIP-455).

Checks made here, before the controller sees anything (per partition, Kafka's codes):

* a partition named twice in one request — INVALID_REQUEST on each mention;
* an empty target, a replica named twice, a negative broker id — INVALID_REPLICA_ASSIGNMENT;
* v1 with ``allow_replication_factor_change`` false (KIP-860) and a target whose size differs
  from the partition's replication factor (its replicas minus those being added by an ongoing
  reassignment) — INVALID_REPLICATION_FACTOR.

Everything that needs the cluster's state (unknown topic or partition, brokers that are not
alive, cancelling when nothing is in progress) is the controller's to answer.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from samsa.handlers.controller_calls import TopicPartition, active_controller, by_topic, with_timeout
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Controller, Op, RequestContext

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1

log = logging.getLogger("samsa.requests")

Entry = tuple[str, int, list[int] | None]
Result = tuple[int, str | None]


def handle(ctx: RequestContext, req: Any) -> Any:
    allow_rf_change = req.allow_replication_factor_change if ctx.version >= 1 else True
    entries: list[Entry] = [
        (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for t in req.topics
        for p in t.partitions
    ]
    if not ctx.authorize_cluster(Op.ALTER):  # (Kafka: ALTER on the cluster, for the whole request)
        message = "ALTER on the cluster is needed to reassign partitions"
        return _response(entries, [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message)] * len(entries),
                         ErrorCode.CLUSTER_AUTHORIZATION_FAILED, message, allow_rf_change)
    controller = active_controller(ctx)
    if controller is None:
        message = "this broker is not the active controller"
        return _response(entries, [(ErrorCode.NOT_CONTROLLER, message)] * len(entries),
                         ErrorCode.NOT_CONTROLLER, message, allow_rf_change)
    verdicts = _validate(ctx, controller, entries, allow_rf_change)
    changes = {(t, p): r for (t, p, r), v in zip(entries, verdicts) if v is None}
    if not changes:
        return _response(entries, verdicts, ErrorCode.NONE, None, allow_rf_change)
    return _alter(controller, entries, verdicts, changes, req.timeout, allow_rf_change)


def _validate(ctx: RequestContext, controller: Controller, entries: list[Entry],
              allow_rf_change: bool) -> list[Result | None]:
    counts = Counter((t, p) for t, p, _ in entries)
    out: list[Result | None] = []
    for topic, partition, replicas in entries:
        if counts[(topic, partition)] > 1:
            out.append((ErrorCode.INVALID_REQUEST,
                        f"partition {topic}-{partition} appears more than once in the request"))
        elif replicas is None:
            out.append(None)
        else:
            out.append(_check_target(replicas) or
                       (None if allow_rf_change else _check_rf(ctx, controller, topic, partition, replicas)))
    return out


def _check_target(replicas: list[int]) -> Result | None:
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "the target replica list is empty"
    if len(set(replicas)) != len(replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the target replica list {replicas} names a broker twice"
    if any(r < 0 for r in replicas):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"the target replica list {replicas} has a negative broker id"
    return None


def _check_rf(ctx: RequestContext, controller: Controller, topic: str, partition: int,
              replicas: list[int]) -> Result | None:
    """KIP-860: refuse a change of replication factor. Unknown partitions pass (the controller
    answers UNKNOWN_TOPIC_OR_PARTITION for them)."""
    current = ctx.topics.get(topic)
    assigned = current.partitions.get(partition) if current is not None else None
    if assigned is None:
        return None
    adding: list[int] = []
    try:
        ongoing = controller.list_reassignments([(topic, partition)]).get((topic, partition))
    except Exception:  # noqa: BLE001 - the check is best effort; the controller has the last word
        ongoing = None
    if ongoing is not None:
        assigned, adding = list(ongoing[0]), list(ongoing[1])
    rf = len([r for r in assigned if r not in adding])
    if rf != len(replicas):
        return ErrorCode.INVALID_REPLICATION_FACTOR, f"The replication factor would change from {rf} to {len(replicas)}"
    return None


async def _alter(controller: Controller, entries: list[Entry], verdicts: list[Result | None],
                 changes: dict[TopicPartition, list[int] | None], timeout_ms: int,
                 allow_rf_change: bool) -> dict[str, Any]:
    try:
        results: dict[TopicPartition, Result] = dict(
            await with_timeout(controller.alter_reassignments(changes), timeout_ms))
    except TimeoutError:
        message = f"the reassignment was not applied within {timeout_ms} ms"
        results = {tp: (ErrorCode.REQUEST_TIMED_OUT, message) for tp in changes}
    except KafkaError as e:
        return _response(entries, [v or (e.code, e.message) for v in verdicts], e.code, e.message, allow_rf_change)
    except Exception:
        log.exception("partition reassignment failed in the controller")
        message = "the reassignment failed on the controller"
        return _response(entries, [v or (ErrorCode.UNKNOWN_SERVER_ERROR, message) for v in verdicts],
                         ErrorCode.UNKNOWN_SERVER_ERROR, message, allow_rf_change)
    missing = (ErrorCode.UNKNOWN_SERVER_ERROR, "the controller reported no result for this partition")
    final = [v if v is not None else results.get((t, p), missing) for (t, p, _), v in zip(entries, verdicts)]
    return _response(entries, final, ErrorCode.NONE, None, allow_rf_change)


def _response(entries: list[Entry], results: Sequence[Result | None], code: int, message: str | None,
              allow_rf_change: bool) -> dict[str, Any]:
    grouped = by_topic((t, (p, r or (ErrorCode.NONE, None))) for (t, p, _), r in zip(entries, results))
    return {
        "throttle_time": 0,
        "allow_replication_factor_change": allow_rf_change,
        "error_code": int(code),
        "error_message": message,
        "responses": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": p, "error_code": int(c), "error_message": m} for p, (c, m) in parts
                ],
            }
            for topic, parts in grouped.items()
        ],
    }
