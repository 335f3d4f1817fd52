"""Shared plumbing of the consumer-group APIs: find the group's shard; run an operation on it
through the group manager (`GroupManager.execute`: the answer is a Pending, completed once the
records it depends on are replicated); authorize on the group and its topics as Kafka does
(READ on the group to join, sync, heartbeat, leave and commit; DESCRIBE to describe it and
fetch its offsets; DELETE to delete it or its offsets)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.coordinator.shard import GroupCoordinatorShard
from samsa.protocol.errors import ErrorCode
from samsa.server.context import Op, RequestContext, ResourceType
from samsa.server.responses import Pending


def shard_or_none(ctx: RequestContext, group_id: str) -> GroupCoordinatorShard | None:
    return ctx.groups.shard_for(group_id)


def client_host(ctx: RequestContext) -> str:
    peer = ctx.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) else str(peer)


def execute(ctx: RequestContext, shard: GroupCoordinatorShard, op: Callable[[Callable[[Any], None]], None]) -> Pending:
    """`op(respond)` on the shard (JoinGroup, SyncGroup: the shard calls `respond`, maybe later)."""
    return ctx.groups.execute(shard, op)


def call(ctx: RequestContext, shard: GroupCoordinatorShard, fn: Callable[[], Any]) -> Pending:
    """A shard operation that answers by returning: `fn()` is the answer."""
    return ctx.groups.execute(shard, lambda respond: respond(fn()))


NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
GROUP_AUTHORIZATION_FAILED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def group_denied(ctx: RequestContext, op: Op, group_id: str) -> bool:
    return not ctx.authorize(op, ResourceType.GROUP, group_id)


def topic_allowed(ctx: RequestContext, op: Op, topic: str, log_denied: bool = True) -> bool:
    return ctx.authorize(op, ResourceType.TOPIC, topic, log_denied)
