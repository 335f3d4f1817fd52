"""ApiVersions (18): what this broker speaks, built from the handler registry itself.

v3+ also carries the feature flags (KIP-584). Samsa finalizes `transaction.version` at the
broker config `transaction.version`, 2 by default (KIP-890 part 2): a client that knows the
feature ends every transaction with an epoch bump (EndTxn v5) and lets the partition leaders add
partitions to its transaction (Produce v12, TxnOffsetCommit v5); a client that does not know it,
or is told a level below 2, uses transaction version 1, also served. (Kafka serves both
whatever the level too: the level only tells clients which to use.) `group.version` is
finalized at 1, as in Kafka 4.x: the consumer group protocol (KIP-848) is served. A level of 0
is not listed, as Kafka lists no feature finalized at 0. Below v4 a supported feature whose
lowest level is 0 is left out (KAFKA-17492: clients of that time cannot read a 0 there), as
Kafka leaves it out.

v3+ requests name the client software; a name or version Kafka would not accept (letters,
digits, '.' and '-', starting and ending with a letter or digit) gets INVALID_REQUEST.

v5 (KIP-1242) carries the cluster id and node id the client means to reach (Kafka's Java client
4.4 sends them once it knows them from Metadata): both or neither (else INVALID_REQUEST); when
given and not this broker's, REBOOTSTRAP_REQUIRED, and the client goes back to its bootstrap
servers instead of talking to a broker a stale address now leads to. Those answers list no
APIs, as Kafka's.
"""

from __future__ import annotations

import re
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 5

SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")

# name -> (lowest supported, highest supported, the broker config holding its finalized level;
# None: always the highest)
FEATURES: dict[str, tuple[int, int, str | None]] = {
    "transaction.version": (0, 2, "transaction.version"),
    "group.version": (0, 1, None),
}
FEATURES_EPOCH = 1


def refusal(ctx: RequestContext, req: Any) -> ErrorCode | None:
    """Why this request is answered with an error and no API list, if it is."""
    version = ctx.version
    if version >= 5:
        cluster_id, node_id = req.cluster_id, req.node_id
        if (cluster_id is None) != (node_id == -1):
            return ErrorCode.INVALID_REQUEST
    if version >= 3 and not (SOFTWARE_NAME_OR_VERSION.fullmatch(req.client_software_name or "")
                             and SOFTWARE_NAME_OR_VERSION.fullmatch(req.client_software_version or "")):
        return ErrorCode.INVALID_REQUEST
    if version >= 5 and req.cluster_id is not None and (req.cluster_id != ctx.cluster_id
                                                        or req.node_id != ctx.node_id):
        return ErrorCode.REBOOTSTRAP_REQUIRED
    return None


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    refused = refusal(ctx, req)
    if refused is not None:
        return {"error_code": int(refused), "api_keys": [], "throttle_time": 0}
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in ctx.api_versions
        ],
        "throttle_time": 0,
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi, _) in FEATURES.items() if lo > 0 or ctx.version >= 4],
        "finalized_features_epoch": FEATURES_EPOCH,
        "finalized_features": [{"name": n, "max_version_level": level, "min_version_level": level}
                               for n, level in finalized(ctx).items() if level > 0],
    }


def finalized(ctx: RequestContext) -> dict[str, int]:
    """Each feature's finalized level, from the broker's config."""
    return {n: hi if key is None else int(ctx.config.get(key)) for n, (_, hi, key) in FEATURES.items()}
