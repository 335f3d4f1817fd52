"""DescribeProducers (61), v0: the producers a partition leader knows (KIP-664), with each one's
epoch, last sequence and timestamp, the coordinator epoch of its last marker and the first
offset of its open transaction (-1: none). `samsa transactions describe-producers` and
`find-hanging` read this.

Only the leader answers (NOT_LEADER_OR_FOLLOWER); an unknown partition is
UNKNOWN_TOPIC_OR_PARTITION. Authorization (as Kafka's): READ on the topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    for t in req.topics:
        if not ctx.authorize(Op.READ, ResourceType.TOPIC, t.name):
            parts = [_error(i, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for i in t.partition_indexes]
        else:
            parts = [_describe(ctx, t.name, i) for i in t.partition_indexes]
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _describe(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        known = topic in ctx.topics and index in ctx.topics[topic].partitions
        return _error(index, ctx.replicas.missing(topic, index, known))
    if not partition.is_leader:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {ctx.node_id} does not lead {topic}-{index}")
    producers = [{"producer_id": pid, "producer_epoch": e.epoch, "last_sequence": e.last_seq,
                  "last_timestamp": e.last_timestamp, "coordinator_epoch": e.coordinator_epoch,
                  "current_txn_start_offset": e.current_txn_first_offset}
                 for pid, e in partition.producers.producers.items()]
    return {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": producers}


def _error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"partition_index": index, "error_code": int(code), "error_message": message, "active_producers": []}
