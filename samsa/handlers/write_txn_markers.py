"""WriteTxnMarkers (27), v1 (Kafka 4.0's only version): a transaction coordinator asks the
leaders of a transaction's partitions to write its COMMIT or ABORT marker.

The work is `server/txn_markers.py`'s `write_markers` (shared with a local coordinator): each
partition answers its own error, and the response waits until every marker written is
replicated. Authorization (as Kafka's): CLUSTER_ACTION on the cluster, else every partition
answers CLUSTER_AUTHORIZATION_FAILED and nothing is written.
"""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext
from samsa.server.txn_markers import TxnMarker, write_markers

API_KEY = 27
MIN_VERSION = 1
MAX_VERSION = 1


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    markers = [TxnMarker(m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch,
                         [(t.name, index) for t in m.topics for index in t.partition_indexes])
               for m in req.markers]
    if not ctx.authorize_cluster(Op.CLUSTER_ACTION):
        results = [dict.fromkeys(m.partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for m in markers]
    else:
        results = await write_markers(ctx.services, markers)
    out = []
    for m, result in zip(req.markers, results, strict=True):
        out.append({"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": i, "error_code": int(result[(t.name, i)])}
                                            for i in t.partition_indexes]}
            for t in m.topics]})
    return {"markers": out}
