"""AlterUserScramCredentials (51): upsert and delete users' SCRAM credentials, with Kafka's
ZooKeeper-mode checks (ZkAdminManager) and one result per user.

An upsertion carries the salt and the salted password (the client ran PBKDF2); the broker
stores Kafka's credential string (salt, stored_key, server_key, iterations) derived from them
in /config/users/<user>, by compare-and-set plus a change notification (every broker's
credential cache follows). Per user, in this order:

    empty name                         UNACCEPTABLE_CREDENTIAL  Username must not be empty
    unknown mechanism                  UNSUPPORTED_SASL_MECHANISM
    iterations outside 4096..16384     UNACCEPTABLE_CREDENTIAL  Too few / Too many iterations
    empty salt or salted password      UNACCEPTABLE_CREDENTIAL  (Kafka lets them through)
    a (user, mechanism) given twice    DUPLICATE_RESOURCE
    deleting a credential it lacks     RESOURCE_NOT_FOUND

A user with any of these errors is left as it was: nothing of the request is stored for it.
The other users are written, each atomically (its deletions then its upsertions). It needs
ALTER on the cluster (else every user is CLUSTER_AUTHORIZATION_FAILED and nothing is stored)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from samsa.metadata.scram import BY_TYPE, credential_from_salted, credential_to_string, user_entity
from samsa.metadata.store import StoreError
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

_EMPTY_USER = "Username must not be empty"
_UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"


def _deletion_error(d: Any) -> str | None:
    if not d.name:
        return _EMPTY_USER
    return _UNKNOWN_MECHANISM if d.mechanism not in BY_TYPE else None


def _upsertion_error(u: Any) -> str | None:
    if not u.name:
        return _EMPTY_USER
    m = BY_TYPE.get(u.mechanism)
    if m is None:
        return _UNKNOWN_MECHANISM
    if u.iterations < m.min_iterations:
        return "Too few iterations"
    if u.iterations > m.max_iterations:
        return "Too many iterations"
    if not u.salt:
        return "Salt must not be empty"
    if not u.salted_password:
        return "Salted password must not be empty"
    return None


def _result(user: str, code: ErrorCode = ErrorCode.NONE, message: str | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": int(code), "error_message": message}


async def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    deletions, upsertions = list(req.deletions), list(req.upsertions)
    results: list[dict[str, Any]] = []
    if not ctx.authorize_cluster(Op.ALTER):  # as Kafka's
        return {"throttle_time": 0, "results": [
            _result(user, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster is needed")
            for user in sorted({x.name for x in deletions + upsertions})]}
    illegal: dict[str, str] = {}  # user -> message (a later error of the same user replaces an earlier one)
    for d in deletions:
        if (why := _deletion_error(d)) is not None:
            illegal[d.name] = why
    for u in upsertions:
        if (why := _upsertion_error(u)) is not None:
            illegal[u.name] = why
    for user, why in illegal.items():
        code = ErrorCode.UNSUPPORTED_SASL_MECHANISM if why == _UNKNOWN_MECHANISM else ErrorCode.UNACCEPTABLE_CREDENTIAL
        results.append(_result(user, code, why))

    pairs = Counter((x.name, x.mechanism) for x in deletions + upsertions if x.name not in illegal)
    duplicated = sorted({user for (user, _), n in pairs.items() if n > 1})
    for user in duplicated:
        results.append(_result(user, ErrorCode.DUPLICATE_RESOURCE,
                               "A user credential cannot be altered twice in the same request"))

    users = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
    for user in users:
        gone = [BY_TYPE[d.mechanism].name for d in deletions if d.name == user]
        new = {BY_TYPE[u.mechanism].name: credential_to_string(credential_from_salted(
            BY_TYPE[u.mechanism], bytes(u.salt), bytes(u.salted_password), u.iterations))
            for u in upsertions if u.name == user}
        missing = False

        def change(config: dict[str, str], gone: list[str] = gone, new: dict[str, str] = new) -> dict[str, str] | None:
            nonlocal missing
            missing = any(name not in config for name in gone)
            if missing:
                return None
            for name in gone:
                del config[name]
            config.update(new)
            return config

        try:
            await ctx.entity_configs.alter(user_entity(user), change)
        except StoreError as e:
            results.append(_result(user, ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata store unavailable: {e}"))
            continue
        if missing:
            results.append(_result(user, ErrorCode.RESOURCE_NOT_FOUND,
                                   "Attempt to delete a user credential that does not exist"))
        else:
            results.append(_result(user))
    return {"throttle_time": 0, "results": results}
