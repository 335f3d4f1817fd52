"""The log cleaner's throttle (log.cleaner.io.max.bytes.per.second), on a fake clock."""

from __future__ import annotations

from samsa.server.log_cleaner import Throttler


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_bytes_over_the_rate_wait_their_time() -> None:
    c = Clock()
    t = Throttler(lambda: 1000.0, clock=c.time, sleep=c.sleep)
    t(1000)  # a second's worth at once: the credit
    assert c.slept == []
    t(500)  # then held to 1000 B/s
    assert c.slept == [0.5]
    t(500)
    assert c.slept == [0.5, 0.5]
    assert abs(t.throttled_s - 1.0) < 1e-9


def test_a_steady_rate_under_the_limit_never_waits() -> None:
    c = Clock()
    t = Throttler(lambda: 1000.0, clock=c.time, sleep=c.sleep)
    for _ in range(50):
        t(100)
        c.now += 0.2  # 500 B/s
    assert c.slept == []


def test_faster_than_the_rate_is_held_to_it() -> None:
    c = Clock()
    t = Throttler(lambda: 1000.0, clock=c.time, sleep=c.sleep)
    start = c.now
    for _ in range(100):
        t(100)  # as fast as it can: 10 KB
    assert abs((c.now - start) - 9.0) < 1e-6  # 10 s of bytes at 1000 B/s, less the second of credit


def test_unlimited_and_changed_rates() -> None:
    c = Clock()
    rate = [1.7976931348623157e308]
    t = Throttler(lambda: rate[0], clock=c.time, sleep=c.sleep)
    t(10**12)
    assert c.slept == []  # Kafka's default: no limit
    rate[0] = 100.0  # dynamic: the next bytes are held to the new rate
    t(300)
    assert c.slept == [2.0]  # 3 s of bytes, less the second of credit
