"""AlterReplicaLogDirs (34), v1-v2: move this broker's replicas of some partitions to another of
its log dirs, while they stay online. The moving is server/alter_log_dirs.py's (the errors per
partition are listed there), the files' storage/log_move.py's. `kafka-reassign-partitions
--execute` sends it for a plan's `log_dirs`, and `--verify` follows the move through
DescribeLogDirs, which lists the future replica until it replaces the current one.

A partition named in two dirs goes to the last one named (Kafka reads the request into a map).
Authorization (as Kafka's): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition, and nothing moves.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext

API_KEY = 34
MIN_VERSION = 1  # (v0 is gone from Kafka 4.0)
MAX_VERSION = 2


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted.pop((t.name, p), None)  # (the last dir named wins, in its place)
                wanted[(t.name, p)] = d.path
    moves = ctx.log_dir_moves
    if not ctx.authorize_cluster(Op.ALTER):
        codes = dict.fromkeys(wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    elif moves is None:
        codes = dict.fromkeys(wanted, ErrorCode.KAFKA_STORAGE_ERROR)
    else:
        codes = moves.alter(wanted)
    by_topic: dict[str, list[dict[str, int]]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": int(code)})
    return {"throttle_time": 0,
            "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()]}
