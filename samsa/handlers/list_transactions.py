"""ListTransactions (66, KIP-664): the transactional ids this broker coordinates.

Filters as Kafka's: by state name (an unknown name is returned in `unknown_state_filters` and
matches nothing), by producer id, and (v1, KIP-994) by `duration_filter`: only transactions
open at least that many milliseconds. Authorization: only the ids the principal may DESCRIBE
are listed. (v2's regular-expression filter is not served.)
"""

from __future__ import annotations

from typing import Any

from samsa.coordinator.transactions import STATE_BY_NAME
from samsa.server.context import Op, RequestContext, ResourceType

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted = set(req.state_filters)
    unknown = sorted(s for s in wanted if s not in STATE_BY_NAME)
    if unknown and not (wanted - set(unknown)):
        return {"throttle_time": 0, "error_code": 0, "unknown_state_filters": unknown, "transaction_states": []}
    found = ctx.transactions.list(wanted - set(unknown), set(req.producer_id_filters),
                                  getattr(req, "duration_filter", -1))
    if ctx.authorizer is not None:
        found = [t for t in found if ctx.authorize(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t["transactional_id"],
                                                    log_denied=False)]
    return {"throttle_time": 0, "error_code": 0, "unknown_state_filters": unknown, "transaction_states": found}
