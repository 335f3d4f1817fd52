"""The loop-lag monitor and rate-limited warnings."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from samsa.ratelimit import RateLimitedLog
from samsa.server.loop_monitor import LoopMonitor


def blocking_call_that_stalls_the_loop() -> None:
    time.sleep(0.35)  # the very thing the monitor is for: a blocking call on the loop


def test_a_stall_is_logged_with_its_length_and_what_was_running(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> LoopMonitor:
        mon = LoopMonitor(asyncio.get_running_loop(), threshold_s=0.1, tick_s=0.02)
        mon.start()
        await asyncio.sleep(0.1)
        asyncio.get_running_loop().call_soon(blocking_call_that_stalls_the_loop)
        await asyncio.sleep(0.2)
        mon.stop()
        return mon

    with caplog.at_level(logging.WARNING, "samsa.loop"):
        mon = asyncio.run(main())
    assert mon.stalls == 1 and 300 <= mon.longest_ms < 1000
    [record] = [r for r in caplog.records if "stalled" in r.getMessage()]
    assert "blocking_call_that_stalls_the_loop" in record.getMessage()


def test_a_loop_that_never_blocks_reports_nothing() -> None:
    async def main() -> LoopMonitor:
        mon = LoopMonitor(asyncio.get_running_loop(), threshold_s=0.1, tick_s=0.02)
        mon.start()
        for _ in range(30):
            await asyncio.sleep(0.01)
        mon.stop()
        return mon

    assert asyncio.run(main()).stalls == 0


def test_rate_limited_log_says_how_many_were_left_out(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = RateLimitedLog(logging.getLogger("test.rl"), interval_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "test.rl"):
        for i in range(669):
            log.warning("isr:t-0", "Could not change the ISR of t-0: %s", "not connected")
            log.warning("isr:t-1", "Could not change the ISR of t-1: %s", "not connected")
            now[0] += 0.01
        now[0] = 12.0
        log.warning("isr:t-0", "Could not change the ISR of t-0: %s", "not connected")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Could not change the ISR of t-0: not connected",
        "Could not change the ISR of t-1: not connected",
        "Could not change the ISR of t-0: not connected (and 668 more like it in the last 12 s)",
    ]
