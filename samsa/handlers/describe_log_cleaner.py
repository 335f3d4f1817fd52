"""DescribeLogCleaner (10000, a Samsa extension: samsa/protocol/samsa_apis.py), v0: the log
cleaner's state of each compacted log this broker holds (server/log_cleaner.py): the first
dirty offset (its cleaner-offset-checkpoint), the dirty ratio now, whether a clean runs, why
the log is uncleanable if it is, the last clean's time and summary, the bytes reclaimed since
the broker started. `topics` null asks for every compacted log; a partition that is not here
or not compacted is left out. Authorization: DESCRIBE on the cluster (as DescribeLogDirs),
else CLUSTER_AUTHORIZATION_FAILED and no logs.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.protocol.samsa_apis import DESCRIBE_LOG_CLEANER_KEY
from samsa.server.context import Op, RequestContext

API_KEY = DESCRIBE_LOG_CLEANER_KEY
MIN_VERSION = 0
MAX_VERSION = 0


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return {"throttle_time": 0, "error_code": int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "logs": []}
    wanted = None if req.topics is None else {(t.name, p) for t in req.topics for p in t.partitions}
    logs = []
    for (topic, index), state in sorted(ctx.services.describe_log_cleaner().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        part = ctx.replicas.get(topic, index)
        if part is None:
            continue
        logs.append({"topic": topic, "partition": index, "log_dir": str(part.log.dir.parent.absolute()),
                     "first_dirty_offset": state.first_dirty, "dirty_ratio": state.dirty_ratio,
                     "in_progress": state.in_progress, "uncleanable_reason": state.uncleanable,
                     "last_clean_ms": -1 if state.last_clean_ms is None else state.last_clean_ms,
                     "cleans": state.cleans, "bytes_reclaimed": state.bytes_reclaimed,
                     "last_summary": state.last_summary})
    return {"throttle_time": 0, "error_code": 0, "logs": logs}
