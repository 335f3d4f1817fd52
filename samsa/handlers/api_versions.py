"""ApiVersions (18): what this broker speaks, built from the handler registry itself.

v3+ also carries the feature flags (KIP-584). Samsa finalizes `transaction.version` at 2
(KIP-890 part 2): a client that knows the feature ends every transaction with an epoch bump
(EndTxn v5) and lets the partition leaders add partitions to its transaction (Produce v12,
TxnOffsetCommit v5); a client that does not know it uses transaction version 1, also served.
"""

from __future__ import annotations

from typing import Any

from samsa.server.context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

# name -> (lowest supported, highest supported, finalized level)
FEATURES = {"transaction.version": (0, 2, 2)}
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
                               for n, (_, _, level) in FEATURES.items()],
    }
