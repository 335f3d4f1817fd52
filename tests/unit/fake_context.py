"""A `RequestContext` for handler tests: the real context class over a stand-in for the broker's
services, holding only the services the test gives (a handler reaching for another one fails
with AttributeError, which names what it used)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from samsa.config import BrokerConfig
from samsa.server.context import ANONYMOUS, RequestContext


def fake_context(version: int = 0, *, header: Any = None, peer: Any = ("127.0.0.1", 40000),
                 listener: str = "PLAINTEXT", config: BrokerConfig | None = None, **services: Any) -> RequestContext:
    """`services` by their `BrokerServices` names (replicas=..., topics=..., purgatory=...)."""
    if config is not None:
        services["current_config"] = lambda: config
    if header is None:
        header = SimpleNamespace(api_key=-1, api_version=version, correlation_id=1, client_id="test")
    conn = SimpleNamespace(peer=peer, peer_str=str(peer), client_id=header.client_id, principal=ANONYMOUS,
                           listener=listener)
    services.setdefault("authorizer", None)  # (no authorizer: every request is allowed, as without authorizer.class.name)
    return RequestContext(SimpleNamespace(**services), conn, header)  # type: ignore[arg-type]
