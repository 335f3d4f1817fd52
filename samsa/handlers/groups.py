"""Shared plumbing of the consumer-group APIs: find the group's shard; run an operation on it
through the group manager (`GroupManager.execute`: the answer is a Pending, completed once the
records it depends on are replicated)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode
from samsa.server.responses import Pending


def shard_or_none(ctx: Any, group_id: str) -> Any:
    return ctx.broker.groups.shard_for(group_id)


def client_host(ctx: Any) -> str:
    peer = ctx.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) else str(peer)


def execute(ctx: Any, shard: Any, op: Callable[[Callable[[Any], None]], None]) -> Pending:
    """`op(respond)` on the shard (JoinGroup, SyncGroup: the shard calls `respond`, maybe later)."""
    answer: Pending = ctx.broker.groups.execute(shard, op)
    return answer


def call(ctx: Any, shard: Any, fn: Callable[[], Any]) -> Pending:
    """A shard operation that answers by returning: `fn()` is the answer."""
    answer: Pending = ctx.broker.groups.execute(shard, lambda respond: respond(fn()))
    return answer


NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
