"""OffsetForLeaderEpoch (23): where a leader epoch ends in the leader's log (KIP-101, KIP-320).

A follower that starts following a new leader asks where its latest epoch ends on the leader
and truncates there; consumers ask the same after a leader change to detect a truncated log.
The answer comes from the leader's epoch cache (`leader-epoch-checkpoint`): for epoch E, the
largest epoch <= E the leader knows and the start offset of the epoch after it (the log end
offset for the current epoch); (-1, -1) when the leader knows no such epoch.

Authorization (as Kafka's, KIP-320): CLUSTER_ACTION on the cluster (followers), else DESCRIBE
on each topic (consumers); TOPIC_AUTHORIZATION_FAILED otherwise.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    topics = []
    broker = ctx.authorize_cluster(Op.CLUSTER_ACTION, log_denied=False)
    for t in req.topics:
        if not broker and not ctx.authorize(Op.DESCRIBE, ResourceType.TOPIC, t.topic):
            topics.append({"topic": t.topic, "partitions": [
                {"error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "partition": p.partition, "leader_epoch": -1,
                 "end_offset": -1} for p in t.partitions]})
            continue
        parts = []
        for p in t.partitions:
            parts.append(_one(ctx, t.topic, p.partition, p.current_leader_epoch, p.leader_epoch))
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _one(ctx: RequestContext, topic: str, index: int, current_epoch: int, epoch: int) -> dict[str, Any]:
    partition = ctx.replicas.get(topic, index)
    if partition is None:
        known = topic in ctx.topics and index in ctx.topics[topic].partitions
        code = ctx.replicas.missing(topic, index, known)
        return {"error_code": int(code), "partition": index, "leader_epoch": -1, "end_offset": -1}
    try:
        partition.check_leader(current_epoch)
    except KafkaError as e:
        return {"error_code": int(e.code), "partition": index, "leader_epoch": -1, "end_offset": -1}
    found_epoch, end = partition.log.leader_epochs.end_offset_for(epoch, partition.log.log_end_offset)
    return {"error_code": 0, "partition": index, "leader_epoch": found_epoch, "end_offset": end}
