"""Metadata (3): brokers, controller and the partition leaders of the asked topics.

A topic that does not exist is created here when the client allows it and the broker has
`auto.create.topics.enable=true`, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.topics import validate_topic_name

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12


def handle(ctx: Any, req: Any) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    if req.topics is None or (ctx.version == 0 and not req.topics):
        names = sorted(broker.topics)
    else:
        names = []
        for t in req.topics:
            if t.name is not None:
                names.append(t.name)
                continue
            # v10+: a topic asked for by id (KIP-848 consumers learn assignments as topic ids)
            tid = getattr(t, "topic_id", None)
            found = next((x.name for x in broker.topics.values() if x.topic_id.bytes == tid), None)
            if found is None:
                topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "name": None, "topic_id": tid,
                               "partitions": []})
            else:
                names.append(found)
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    for name in names:
        topic = broker.topics.get(name)
        if topic is None:
            try:
                validate_topic_name(name)
            except KafkaError as e:
                topics.append({"error_code": int(e.code), "name": name, "partitions": []})
                continue
            if allow_auto and broker.config.get_bool("auto.create.topics.enable"):
                try:
                    topic = broker.auto_create_topic(name)
                except KafkaError as e:
                    topics.append({"error_code": int(e.code), "name": name, "partitions": []})
                    continue
            else:
                topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "name": name, "partitions": []})
                continue
        topics.append(describe_topic(broker, topic))
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in broker.endpoints(ctx.conn.server.name)
        ],
        "cluster_id": broker.cluster_id,
        "controller_id": broker.controller_id,
        "topics": topics,
        "cluster_authorized_operations": -2147483648,
    }


def describe_topic(broker: Any, topic: Any) -> dict[str, Any]:
    parts = []
    for index in sorted(topic.partitions):
        replicas = topic.partitions[index]
        p = broker.replicas.get(topic.name, index)
        leader = broker.node_id if p is not None else -1
        parts.append({
            "error_code": 0 if p is not None else int(ErrorCode.LEADER_NOT_AVAILABLE),
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": p.leader_epoch if p is not None else -1,
            "replica_nodes": replicas,
            "isr_nodes": replicas if p is not None else [],
            "offline_replicas": [],
        })
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": topic.name.startswith("__"),
        "partitions": parts,
        "topic_authorized_operations": -2147483648,
    }
