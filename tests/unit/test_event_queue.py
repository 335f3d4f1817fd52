"""The controller's event queue: one task, events in order, results for calls, failures that
do not stop it, and slices that yield to the loop (with an injected clock)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from samsa.controller.event_queue import EventQueue
from samsa.metadata.store import StoreError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_events_run_in_order_one_at_a_time() -> None:
    async def main() -> list[str]:
        q = EventQueue("test", logging.getLogger("test"))
        seen: list[str] = []
        running = 0

        async def slow(name: str) -> None:
            nonlocal running
            running += 1
            assert running == 1, "two events ran at once"
            await asyncio.sleep(0.01)
            seen.append(name)
            running -= 1

        q.put(slow, "a")  # queued before start: kept
        q.start()
        q.put(seen.append, "b")
        q.put(slow, "c")
        assert await q.call(lambda: "result") == "result"
        await q.stop()
        return seen

    assert asyncio.run(main()) == ["a", "b", "c"]


def test_a_failing_event_is_logged_and_the_queue_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> list[int]:
        q = EventQueue("test", logging.getLogger("test.queue"))
        q.start()
        done: list[int] = []

        def bug() -> None:
            raise ValueError("a bug")

        def store_down() -> None:
            raise StoreError("ZooKeeper away")

        q.put(bug)
        q.put(store_down)
        q.put(store_down)  # the same warning again within the interval: counted, not logged
        q.put(done.append, 1)
        with pytest.raises(StoreError):
            await q.call(store_down)  # a caller gets the error itself
        await q.stop()
        return done

    with caplog.at_level(logging.WARNING, "test.queue"):
        assert asyncio.run(main()) == [1]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(errors) == 1 and "a bug" in (errors[0].exc_text or "")
    assert len(warnings) == 1 and "ZooKeeper away" in warnings[0].getMessage()


def test_a_long_burst_yields_to_the_loop_every_slice() -> None:
    """10,000 events of 1 ms each (by the injected clock) with 20 ms slices: the loop runs
    other callbacks every 20 events, and all events still run in order."""

    async def main() -> tuple[list[int], list[int]]:
        clock = Clock()
        q = EventQueue("test", logging.getLogger("test"), clock=clock, slice_s=0.02)
        order: list[int] = []
        interleaved: list[int] = []

        def work(i: int) -> None:
            clock.now += 0.001
            order.append(i)

        for i in range(10_000):
            q.put(work, i)
        stop = asyncio.Event()

        async def other() -> None:  # another task on the loop (a client connection)
            while not stop.is_set():
                interleaved.append(len(order))
                await asyncio.sleep(0)

        t = asyncio.get_running_loop().create_task(other())
        q.start()
        await q.call(lambda: None)
        stop.set()
        await t
        await q.stop()
        return order, interleaved

    order, interleaved = asyncio.run(main())
    assert order == list(range(10_000))
    gaps = [b - a for a, b in zip(interleaved, interleaved[1:]) if b > a]
    assert gaps and max(gaps) <= 21, f"the loop waited for up to {max(gaps)} events"


def test_stop_fails_pending_calls() -> None:
    async def main() -> None:
        q = EventQueue("test", logging.getLogger("test"))
        fut = asyncio.ensure_future(q.call(lambda: 1))  # never started: stays queued
        await asyncio.sleep(0)
        await q.stop()
        with pytest.raises(StoreError):
            await fut

    asyncio.run(main())


def test_burst_log_keeps_the_first_lines_and_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    from samsa.ratelimit import BurstLog

    clock = Clock()
    b = BurstLog(logging.getLogger("test.burst"), per_second=3, clock=clock)
    with caplog.at_level(logging.INFO, "test.burst"):
        for i in range(1000):
            b.note("leaderships" if i % 2 else "followings", "role %d", i)
        clock.now += 1.5
        b.note("leaderships", "role %d", 1000)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[:3] == ["role 0", "role 1", "role 2"]
    assert "... and 498 more followings in the last 1.5 s" in lines
    assert "... and 499 more leaderships in the last 1.5 s" in lines
    assert lines[-1] == "role 1000"
    assert len(lines) == 6


def test_drained_waits_for_events_that_queue_more_events() -> None:
    async def main() -> list[str]:
        q = EventQueue("test", logging.getLogger("test"))
        seen: list[str] = []

        async def first() -> None:
            await asyncio.sleep(0.01)
            q.put(seen.append, "second")  # queued by an event, as a watch's first delivery is

        q.put(first)
        q.start()
        await q.drained()
        seen.append("drained")
        await q.stop()
        return seen

    assert asyncio.run(main()) == ["second", "drained"]


def test_stop_ends_the_task_even_when_a_wait_for_swallows_the_cancellation() -> None:
    """Python 3.11's asyncio.wait_for returns normally when the cancellation arrives as its inner
    wait completes: the queue's task then carried on and waited for events forever, and a
    broker stopping just after start-up hung (the controller's failover waits so for the view)."""

    async def main() -> None:
        q = EventQueue("t", logging.getLogger("t"))
        q.start()
        done = asyncio.Event()
        waiting = asyncio.Event()

        async def handler() -> None:
            waiting.set()
            await asyncio.wait_for(done.wait(), 30)

        q.put(handler)
        await waiting.wait()
        done.set()  # the inner wait completes in the same turn as the cancellation below
        stopping = asyncio.ensure_future(q.stop())
        finished, _ = await asyncio.wait({stopping}, timeout=5)
        if not finished:
            stopping.cancel()
        assert finished, "EventQueue.stop() did not return"

    asyncio.run(main())
