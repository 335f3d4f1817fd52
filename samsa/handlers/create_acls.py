"""CreateAcls (30): add ACL bindings (stored by the authorizer, every broker told).

As Kafka's: ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED on every binding); a
broker without an authorizer answers SECURITY_DISABLED; a malformed binding (unknown type,
operation or permission, pattern ANY/MATCH, empty name or one with a `/`, a cluster not named
kafka-cluster, a principal not of the form Type:name) gets INVALID_REQUEST and is not stored,
while the request's other bindings are.
"""

from __future__ import annotations

from typing import Any

from samsa.handlers.acl_bindings import binding_of
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Binding, Op, RequestContext, binding_problem

API_KEY = 30
MIN_VERSION = 0
MAX_VERSION = 3


def _result(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": int(code), "error_message": message}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    creations = list(req.creations)
    if not ctx.authorize_cluster(Op.ALTER):
        refused = _result(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed to create ACLs")
        return {"throttle_time": 0, "results": [refused] * len(creations)}
    auth = ctx.authorizer
    if auth is None:
        return {"throttle_time": 0, "results": [_result(ErrorCode.SECURITY_DISABLED,
                                                        "No Authorizer is configured.")] * len(creations)}
    results: list[dict[str, Any] | None] = []
    valid: list[tuple[int, Binding]] = []
    for i, c in enumerate(creations):
        binding = binding_of(c)
        problem = binding_problem(*binding)
        if problem is not None:
            results.append(_result(ErrorCode.INVALID_REQUEST, f"Failed to create ACL: {problem}"))
        else:
            results.append(None)
            valid.append((i, binding))
    if valid:
        errors = await auth.create([b for _, b in valid])
        for (i, _), error in zip(valid, errors):
            results[i] = _result(ErrorCode.NONE) if error is None else \
                _result(ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to store the ACL: {error}")
    return {"throttle_time": 0, "results": results}
