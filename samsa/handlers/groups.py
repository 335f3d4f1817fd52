"""Shared plumbing of the consumer-group APIs: route to the group's shard, append what it
wrote, answer once the records are in the log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode


def shard_or_none(ctx: Any, group_id: str) -> Any:
    return ctx.broker.groups.shard_for(group_id)


def client_host(ctx: Any) -> str:
    peer = ctx.conn.peer
    return f"/{peer[0]}" if isinstance(peer, tuple) else str(peer)


def run(ctx: Any, shard: Any, op: Callable[[], Any]) -> Any:
    """Run a shard operation, then append its records before the answer goes out (and, with
    replicas, wait until they have them)."""
    try:
        result = op()
    finally:
        required = ctx.broker.groups.commit(shard)
    if required is None:
        return result
    return ctx.broker.groups.replicated(shard.partition, required, result)


def run_delayed(ctx: Any, shard: Any, op: Callable[[Callable[[dict[str, Any]], None]], None]) -> "asyncio.Future[Any]":
    """JoinGroup/SyncGroup: the shard answers through a callback, maybe during a later call.

    Setting a future's result only schedules its callbacks, so the answer is sent after the
    records of the call that produced it have been appended.
    """
    fut: asyncio.Future[Any] = ctx.broker.loop.create_future()

    def respond(body: dict[str, Any]) -> None:
        if not fut.done():
            fut.set_result(body)

    try:
        op(respond)
    finally:
        required = ctx.broker.groups.commit(shard)
    if required is None:
        return fut
    return ctx.broker.groups.replicated(shard.partition, required, fut)  # replicated, then the answer


NOT_COORDINATOR = int(ErrorCode.NOT_COORDINATOR)
