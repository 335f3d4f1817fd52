"""ApiVersions (18): what this broker speaks, built from the handler registry itself.

v3+ also carries the feature flags (KIP-584). Samsa finalizes `transaction.version` at the
broker config `transaction.version`, 2 by default (KIP-890 part 2): a client that knows the
feature ends every transaction with an epoch bump (EndTxn v5) and lets the partition leaders add
partitions to its transaction (Produce v12, TxnOffsetCommit v5); a client that does not know it,
or is told a level below 2, uses transaction version 1, also served. (Kafka serves both
whatever the level too: the level only tells clients which to use.) A level of 0 is not listed,
as Kafka lists no feature finalized at 0.
"""

from __future__ import annotations

from typing import Any

from samsa.server.context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

# name -> (lowest supported, highest supported, the broker config holding its finalized level)
FEATURES = {"transaction.version": (0, 2, "transaction.version")}
FEATURES_EPOCH = 1


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in ctx.api_versions
        ],
        "throttle_time": 0,
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi, _) in FEATURES.items()],
        "finalized_features_epoch": FEATURES_EPOCH,
        "finalized_features": [{"name": n, "max_version_level": level, "min_version_level": level}
                               for n, level in finalized(ctx).items() if level > 0],
    }


def finalized(ctx: RequestContext) -> dict[str, int]:
    """Each feature's finalized level, from the broker's config."""
    return {n: int(ctx.config.get(key)) for n, (_, _, key) in FEATURES.items()}
