"""DescribeAcls (29): the ACLs a filter matches, grouped by resource pattern.

As Kafka's: DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED); a broker without
an authorizer answers SECURITY_DISABLED; a filter with unknown elements INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.acl_bindings import entry_dict, filter_of, pattern_dict
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Entry, Op, Pattern, RequestContext

API_KEY = 29
MIN_VERSION = 0
MAX_VERSION = 3


def _error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": int(code), "error_message": message, "resources": []}


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not ctx.authorize_cluster(Op.DESCRIBE):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "DESCRIBE on the cluster is needed to describe ACLs")
    auth = ctx.authorizer
    if auth is None:
        return _error(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured on the broker")
    f = filter_of(req)
    problem = f.problem()
    if problem is not None:
        return _error(ErrorCode.INVALID_REQUEST, problem)
    grouped: dict[Pattern, list[Entry]] = {}
    for pattern, entry in auth.describe(f):
        grouped.setdefault(pattern, []).append(entry)
    resources = [{**pattern_dict(p), "acls": [entry_dict(e) for e in sorted(
        entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]}
        for p, entries in sorted(grouped.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name))]
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "resources": resources}
