"""Metadata (3): brokers, controller and the partition leaders of the asked topics.

Every broker answers for the whole cluster from its view of the store: live brokers with
their endpoints on the listener the client came in on, and each partition's leader, leader
epoch, replicas, ISR and offline replicas. A topic that does not exist is created here when
the client allows it and the broker has `auto.create.topics.enable=true`, as in Kafka; the
answer waits briefly (in the purgatory) for its leaders so the client can produce at once.

Authorization (as Kafka's): a topic needs DESCRIBE to be shown; asked for all topics, the
others are left out, asked by name they answer TOPIC_AUTHORIZATION_FAILED (without disclosing
whether they exist). Auto-creation needs CREATE on the cluster or on the topic. The authorized
operations bit fields are filled in when the client asks for them.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.server.context import Op, RequestContext, ResourceType, Topic, validate_topic_name
from samsa.server.purgatory import CLUSTER_METADATA, DelayedCondition
from samsa.server.responses import Pending

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13  # v13 (KIP-1102): a top-level error code, for REBOOTSTRAP_REQUIRED; always 0 here


AUTO_CREATE_WAIT_MS = 5000


def handle(ctx: RequestContext, req: Any) -> Any:
    known = ctx.topics
    topics: list[Any] = []
    created: list[str] = []
    by_id: dict[str, Any] = {}  # names of the topics asked for by id: their ids
    all_topics = req.topics is None or (ctx.version == 0 and not req.topics)
    if all_topics:
        names = sorted(known)
    else:
        names = []
        # v12+: topics asked for by id (KIP-848 consumers learn assignments as topic ids; the
        # Admin's describeTopics by id). As in Kafka, once one id is given the ids alone count
        # (the Admin sends "" for their names); v10-11 carry the field but may not use it.
        by_id_asked = any(getattr(t, "topic_id", None) not in (None, bytes(16)) for t in req.topics)
        if 10 <= ctx.version < 12 and (by_id_asked or any(t.name is None for t in req.topics)):
            return _response(ctx, req, [{"error_code": int(ErrorCode.INVALID_REQUEST), "name": t.name or "",
                                         "topic_id": t.topic_id, "partitions": []} for t in req.topics])
        for t in req.topics:
            tid = getattr(t, "topic_id", None)
            if t.name is not None and not by_id_asked:
                names.append(t.name)
                continue
            if t.name is not None and tid == bytes(16):
                continue  # (a name beside topics asked for by id: Kafka leaves it out)
            found = next((x.name for x in known.values() if x.topic_id.bytes == tid), None)
            if found is None:
                topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_ID), "name": None, "topic_id": tid,
                               "partitions": []})
            else:
                names.append(found)
                by_id[found] = tid
    allow_auto = getattr(req, "allow_auto_topic_creation", True)
    secured = ctx.authorizer is not None
    for name in names:
        if secured and not ctx.authorize(Op.DESCRIBE, ResourceType.TOPIC, name, log_denied=not all_topics):
            if not all_topics:
                topics.append({"error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "name": None if name in by_id
                               else name, "topic_id": by_id.get(name, bytes(16)), "partitions": []})
            continue
        topic = known.get(name)
        if topic is None:
            try:
                validate_topic_name(name)
            except KafkaError as e:
                topics.append({"error_code": int(e.code), "name": name, "partitions": []})
                continue
            if allow_auto and ctx.config.get_bool("auto.create.topics.enable"):
                if secured and not (ctx.authorize_cluster(Op.CREATE, log_denied=False)
                                    or ctx.authorize(Op.CREATE, ResourceType.TOPIC, name)):
                    topics.append({"error_code": int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "name": name,
                                   "partitions": []})
                    continue
                created.append(name)
                topics.append(name)  # created below, then described
                continue
            else:
                topics.append({"error_code": int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), "name": name, "partitions": []})
                continue
        topics.append(describe_topic(ctx, topic))
    if created:
        return _after_create(ctx, req, topics, created)
    return _response(ctx, req, topics)


async def _after_create(ctx: RequestContext, req: Any, topics: list[Any], created: list[str]) -> Pending:
    failed: dict[str, KafkaError] = {}
    for name in created:
        try:
            await ctx.auto_create_topic(name)
        except KafkaError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                failed[name] = e
    ready = ctx.topic_ready

    def answer() -> dict[str, Any]:
        out = []
        for t in topics:
            if isinstance(t, str):
                topic = ctx.topics.get(t)
                if t in failed:
                    out.append({"error_code": int(failed[t].code), "name": t, "partitions": []})
                else:
                    out.append(describe_topic(ctx, topic) if topic is not None and ready(t) else
                               {"error_code": int(ErrorCode.LEADER_NOT_AVAILABLE), "name": t, "partitions": []})
            else:
                out.append(t)
        return _response(ctx, req, out)

    op = DelayedCondition(AUTO_CREATE_WAIT_MS, lambda: all(ready(n) for n in created if n not in failed), answer)
    ctx.purgatory.try_complete_else_watch(op, [CLUSTER_METADATA])
    return op.pending


def _response(ctx: RequestContext, req: Any, topics: list[Any]) -> dict[str, Any]:
    cluster_ops = -2147483648  # (the schema's default: not asked for)
    if 8 <= ctx.version <= 10 and getattr(req, "include_cluster_authorized_operations", False):
        cluster_ops = ctx.authorized_operations(ResourceType.CLUSTER, "kafka-cluster") \
            if ctx.authorize_cluster(Op.DESCRIBE) else 0
    if ctx.version >= 8 and getattr(req, "include_topic_authorized_operations", False):
        for t in topics:
            if t.get("error_code") == 0:
                t["topic_authorized_operations"] = ctx.authorized_operations(ResourceType.TOPIC, t["name"])
    return {
        "throttle_time": 0,
        "brokers": brokers_on(ctx, ctx.listener),
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.controller_id,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
        "error_code": 0,  # (v13+)
    }


def brokers_on(ctx: RequestContext, listener: str) -> list[dict[str, Any]]:
    """Live brokers' endpoints on `listener` (this broker's own from its config, the others'
    from their registrations)."""
    out: list[dict[str, Any]] = []
    node_id = ctx.node_id
    for info in sorted(ctx.cluster.brokers.values(), key=lambda b: b.node_id):
        if info.node_id == node_id:
            continue
        ep = info.endpoints.get(listener)
        if ep is not None:
            out.append({"node_id": info.node_id, "host": ep[0], "port": ep[1], "rack": info.rack})
    out += [{"node_id": n, "host": h, "port": p, "rack": r} for n, h, p, r in ctx.endpoints(listener)]
    return sorted(out, key=lambda b: b["node_id"])


def describe_topic(ctx: RequestContext, topic: Topic) -> dict[str, Any]:
    parts = []
    view = ctx.cluster
    node_id = ctx.node_id
    live = view.brokers
    for index in sorted(topic.partitions):
        replicas = topic.partitions[index]
        st = view.state(topic.name, index)
        leader = st.leader if st is not None and st.leader in live else -1
        offline = [r for r in replicas if r not in live]
        if (topic.name, index) in ctx.replicas.offline:  # its log dir failed here
            offline.append(node_id)
            if leader == node_id:
                leader = -1
        if leader == node_id:
            part = ctx.replicas.get(topic.name, index)
            if part is not None and not part.is_leader:
                leader = -1  # fenced here (cut off from ZooKeeper): send the client elsewhere
        parts.append({
            "error_code": 0 if leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
            "partition_index": index,
            "leader_id": leader,
            "leader_epoch": st.leader_epoch if st is not None else -1,
            "replica_nodes": replicas,
            "isr_nodes": list(st.isr) if st is not None else [],
            "offline_replicas": offline,
        })
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": topic.name.startswith("__"),
        "partitions": parts,
        "topic_authorized_operations": -2147483648,
    }
