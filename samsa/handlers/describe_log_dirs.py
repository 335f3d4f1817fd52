"""DescribeLogDirs (35), v1-v4: this broker's log dirs (their absolute paths), and in each the
replicas it holds of the partitions asked for (`topics` null: all of them) with their size in
bytes and offset lag (the high watermark minus the log end offset, at least 0); from v4 each
dir's total and usable bytes. `kafka-log-dirs --describe` reads this, and
`kafka-reassign-partitions` reads it before it generates or executes a plan, and to follow the
log dir moves of `--verify`.

A replica moving to another log dir (AlterReplicaLogDirs, server/alter_log_dirs.py) is also
listed there, as Kafka lists it, with `is_future_key` true: the copy's size, and as offset lag
how far it is behind the current replica (current log end offset - copy's), until it replaces
the current one. A dir that failed (offline until a restart) is listed with KAFKA_STORAGE_ERROR
and no topics. Authorization (as Kafka's): DESCRIBE on the cluster, else the top-level
CLUSTER_AUTHORIZATION_FAILED (v3+) and no results.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext

API_KEY = 35
MIN_VERSION = 1  # (v0 is gone from Kafka 4.0)
MAX_VERSION = 4

INT64_MAX = (1 << 63) - 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return {"throttle_time": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "results": []}
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_dir: dict[Path, dict[str, list[dict[str, Any]]]] = {}
    for (topic, index), part in ctx.replicas.partitions.items():
        if wanted is not None and (topic, index) not in wanted:
            continue
        log = part.log
        by_dir.setdefault(log.dir.parent.absolute(), {}).setdefault(topic, []).append({
            "partition_index": index, "partition_size": log.size_in_bytes,
            "offset_lag": max(part.high_watermark - log.log_end_offset, 0), "is_future_key": False})
    moves = ctx.log_dir_moves
    for (topic, index), future in (moves.futures() if moves is not None else {}).items():
        moving = ctx.replicas.get(topic, index)
        if moving is None or (wanted is not None and (topic, index) not in wanted):
            continue
        by_dir.setdefault(future.log_dir, {}).setdefault(topic, []).append({
            "partition_index": index, "partition_size": future.size,
            "offset_lag": max(moving.log.log_end_offset - future.log_end_offset, 0), "is_future_key": True})
    offline = {Path(d).absolute() for d in ctx.offline_log_dirs()}
    results = []
    for d in dict.fromkeys(Path(d).absolute() for d in ctx.config.log_dirs()):
        results.append(_describe_dir(d, d in offline, by_dir.get(d, {})))
    return {"throttle_time": 0, "error_code": 0, "results": results}


def _describe_dir(d: Path, offline: bool, topics: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    failed = {"error_code": int(ErrorCode.KAFKA_STORAGE_ERROR), "log_dir": str(d), "topics": [],
              "total_bytes": -1, "usable_bytes": -1}
    if offline:
        return failed
    try:
        st = os.statvfs(d)
    except OSError:
        return failed
    return {"error_code": 0, "log_dir": str(d),
            "topics": [{"name": t, "partitions": sorted(ps, key=lambda p: (p["partition_index"], p["is_future_key"]))}
                       for t, ps in sorted(topics.items())],
            "total_bytes": min(st.f_blocks * st.f_frsize, INT64_MAX),
            "usable_bytes": min(st.f_bavail * st.f_frsize, INT64_MAX)}
