"""DescribeUserScramCredentials (50): each user's SCRAM mechanisms and iterations (never a salt
or key), read from the store (/config/users/<user>), as Kafka's ZooKeeper-mode broker does.

No users (null or empty): every user that has a credential, sorted by name. Named users: one
result per distinct name, in the request's order; an empty name or a user without a credential
is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE (Kafka's messages). It needs
DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED, top-level and per user)."""

from __future__ import annotations

from typing import Any

from samsa.metadata.scram import MECHANISMS, credential_from_string, user_entity
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0


def _result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None,
            infos: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": int(code), "error_message": message, "credential_infos": infos or []}


def _described(user: str, config: dict[str, str]) -> dict[str, Any] | None:
    """The user's result, None if it has no SCRAM credential."""
    present = [m for name, m in MECHANISMS.items() if name in config]
    if not present:
        return None
    try:
        infos = [{"mechanism": m.type, "iterations": credential_from_string(config[m.name]).iterations}
                 for m in present]
    except ValueError:
        return _result(user, ErrorCode.UNKNOWN_SERVER_ERROR,
                       "Error processing describe user SCRAM credential configs request")
    return _result(user, infos=infos)


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    if not ctx.authorize_cluster(Op.DESCRIBE):  # as Kafka's
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = "DESCRIBE on the cluster is needed"
        return {"throttle_time": 0, "error_code": int(denied), "error_message": message,
                "results": [_result(u.name, denied, message) for u in req.users or []]}
    if not req.users:
        configs = await ctx.entity_configs.read_users()
        for user in sorted(configs):
            r = _described(user, configs[user])
            if r is not None:
                results.append(r)
    else:
        names = [u.name for u in req.users]
        seen: set[str] = set()
        for user in names:
            if user in seen:
                continue
            seen.add(user)
            if not user:
                results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty"))
            elif names.count(user) > 1:
                results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for "
                                       f"the same user twice in a single request: {user}"))
            else:
                r = _described(user, await ctx.entity_configs.read(user_entity(user)))
                results.append(r if r is not None else _result(
                    user, ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {user}"))
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}
