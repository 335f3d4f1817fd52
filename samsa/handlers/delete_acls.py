"""DeleteAcls (31): remove the ACLs each filter matches; each filter's answer lists them.

As Kafka's: ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED on every filter); a
broker without an authorizer answers SECURITY_DISABLED; a filter with unknown elements gets
INVALID_REQUEST and removes nothing. An ACL that two filters match is reported under the
first.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.acl_bindings import entry_dict, filter_of, pattern_dict
from samsa.protocol.errors import ErrorCode
from samsa.server.context import BindingFilter, Op, RequestContext

API_KEY = 31
MIN_VERSION = 0
MAX_VERSION = 3


def _failed(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message, "matching_acls": []}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    filters = list(req.filters)
    if not ctx.authorize_cluster(Op.ALTER):
        return {"throttle_time": 0, "filter_results": [
            _failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed to delete ACLs")
        ] * len(filters)}
    auth = ctx.authorizer
    if auth is None:
        return {"throttle_time": 0, "filter_results": [
            _failed(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * len(filters)}
    out: list[dict[str, Any] | None] = []
    valid: list[tuple[int, BindingFilter]] = []
    for i, raw in enumerate(filters):
        f = filter_of(raw)
        problem = f.problem()
        if problem is not None:
            out.append(_failed(ErrorCode.INVALID_REQUEST, problem))
        else:
            out.append(None)
            valid.append((i, f))
    if valid:
        removed = await auth.delete([f for _, f in valid])
        for (i, _), bindings in zip(valid, removed):
            out[i] = {"error_code": 0, "error_message": None, "matching_acls": [
                {"error_code": 0 if error is None else int(ErrorCode.UNKNOWN_SERVER_ERROR),
                 "error_message": None if error is None else str(error), **pattern_dict(p), **entry_dict(e)}
                for (p, e), error in bindings]}
    return {"throttle_time": 0, "filter_results": out}
