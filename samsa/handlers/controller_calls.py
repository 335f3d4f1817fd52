"""Shared plumbing of the APIs only the active controller serves (ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments).

Every broker advertises these APIs; a broker that is not the active controller answers
NOT_CONTROLLER and the client looks the controller up again (Metadata's controller_id) and
retries there. The controller's work runs to completion even when the request's timeout
passes first: the client then hears REQUEST_TIMED_OUT, but a half-applied election or
reassignment is never abandoned because nobody waits for it any more.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable
from typing import Any

from samsa.server.context import Controller, RequestContext

TopicPartition = tuple[str, int]


def active_controller(ctx: RequestContext) -> Controller | None:
    """The controller when this broker is the active controller, else None."""
    controller = ctx.controller
    return controller if controller.active else None


async def with_timeout(result: Any, timeout_ms: int) -> Any:
    """Await ``result`` (a plain value is returned as is) for at most ``timeout_ms``;
    raises TimeoutError on expiry without cancelling the controller's work."""
    if not inspect.isawaitable(result):
        return result
    task = asyncio.ensure_future(result)
    try:
        return await asyncio.wait_for(asyncio.shield(task), max(0, timeout_ms) / 1000)
    except TimeoutError:
        task.add_done_callback(_consume_exception)
        raise TimeoutError from None


def _consume_exception(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a late failure nobody waits for: do not log "never retrieved"


def by_topic(items: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """Group ``(topic, item)`` pairs by topic, topics in order of first appearance."""
    out: dict[str, list[Any]] = {}
    for topic, item in items:
        out.setdefault(topic, []).append(item)
    return out
