"""ApiVersions (18): what this broker speaks, built from the handler registry itself."""

from __future__ import annotations

from typing import Any

from samsa.server.context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi}
            for k, lo, hi in ctx.api_versions
        ],
        "throttle_time": 0,
    }
