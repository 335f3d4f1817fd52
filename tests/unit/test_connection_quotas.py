"""ConnectionQuotas with an injected clock: per-address and broker-wide counts, the idle and
mid-request checks, and the request-memory bound's waiters. The connections are stand-ins
(the unit below the network layer); tests/broker/test_connection_limits.py drives a real
broker over TCP."""

from __future__ import annotations

import asyncio

import pytest

from samsa.server.connection_quotas import CHECK_EVERY_S, STALL_S, ConnectionQuotas, Limits, parse_overrides


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Conn:
    def __init__(self, host: str = "10.0.0.1", mid_request: bool = False) -> None:
        self.peer_host = host
        self.closed = False
        self.last_active = 0.0
        self.mid_request = mid_request
        self.retried = 0
        self.quotas: ConnectionQuotas | None = None

    def close(self) -> None:
        self.closed = True
        assert self.quotas is not None
        self.quotas.removed(self, 0)

    def stalled_mid_request(self) -> bool:
        return self.mid_request

    def retry_frames(self) -> None:
        self.retried += 1


def _quotas(limits: Limits) -> tuple[ConnectionQuotas, Clock, asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    clock = Clock()
    return ConnectionQuotas(loop, lambda: limits, clock=clock), clock, loop


def _open(q: ConnectionQuotas, conn: Conn) -> Conn:
    assert q.admit(conn.peer_host)
    conn.quotas = q
    q.added(conn)
    return conn


def test_per_address_limit_and_its_overrides() -> None:
    q, _, loop = _quotas(Limits(max_per_ip=2, per_ip_overrides={"10.0.0.9": 3}))
    assert q.admit("10.0.0.1") and q.admit("10.0.0.1")
    assert not q.admit("10.0.0.1")  # the third from one address is refused
    assert q.admit("10.0.0.2")  # others are not affected
    assert q.admit("10.0.0.9") and q.admit("10.0.0.9") and q.admit("10.0.0.9")
    assert not q.admit("10.0.0.9")
    assert q.total == 6 and q.refused_per_ip == 2
    loop.close()


def test_max_connections_pauses_accepting_until_one_closes() -> None:
    q, _, loop = _quotas(Limits(max_connections=2))
    a, _b = _open(q, Conn()), _open(q, Conn())
    assert q.at_max()
    resumed: list[bool] = []
    q.pause_accepting(lambda: resumed.append(True))
    a.close()
    assert resumed == [True] and not q.at_max() and q.total == 1
    loop.close()


def test_idle_connections_close_after_the_idle_limit_and_busy_ones_stay() -> None:
    q, clock, loop = _quotas(Limits(idle_ms=60_000))
    idle, busy = _open(q, Conn()), _open(q, Conn())
    clock.now += 59
    q._check()  # (activity is stamped with the time of the last check)
    assert not idle.closed
    q.touch(busy)
    clock.now += 2  # idle: 61 s without a byte; busy: 2 s
    q._check()
    assert idle.closed and not busy.closed and q.closed_idle == 1
    loop.close()


def test_a_connection_stopped_mid_request_closes_before_the_idle_limit() -> None:
    q, clock, loop = _quotas(Limits(idle_ms=600_000))
    waiting, stalled = _open(q, Conn()), _open(q, Conn(mid_request=True))
    clock.now += STALL_S + 1
    q._check()
    assert stalled.closed and not waiting.closed  # between requests, a client may be quiet for long
    assert q.closed_stalled == 1
    loop.close()


def test_the_stall_limit_is_never_longer_than_the_idle_limit() -> None:
    q, clock, loop = _quotas(Limits(idle_ms=2_000))
    stalled = _open(q, Conn(mid_request=True))
    clock.now += 2.5
    q._check()
    assert stalled.closed
    loop.close()


def test_the_check_runs_on_a_timer_while_there_are_connections() -> None:
    q, clock, loop = _quotas(Limits(idle_ms=1))
    conn = _open(q, Conn())
    clock.now += 1

    async def main() -> None:
        await asyncio.sleep(CHECK_EVERY_S * 1.5)

    loop.run_until_complete(main())
    assert conn.closed
    loop.close()


def test_memory_bound_blocks_and_wakes_waiters_in_order() -> None:
    q, _, loop = _quotas(Limits(max_request_bytes_queued=1000))
    a, b = _open(q, Conn()), _open(q, Conn())
    q.hold(600)
    assert q.memory_available()
    q.hold(600)
    assert not q.memory_available()
    q.wait_for_memory(a)
    q.wait_for_memory(b)
    q.wait_for_memory(a)  # once only
    q.hold(-100)  # still over: nobody is woken
    loop.run_until_complete(asyncio.sleep(0))
    assert (a.retried, b.retried) == (0, 0)
    q.hold(-700)
    loop.run_until_complete(asyncio.sleep(0))
    assert (a.retried, b.retried) == (1, 1) and q.memory_used == 400
    loop.close()


def test_no_memory_bound_by_default() -> None:
    q, _, loop = _quotas(Limits())
    q.hold(10**12)
    assert q.memory_available()
    loop.close()


def test_overrides_parse_hosts_with_colons_and_refuse_garbage() -> None:
    assert parse_overrides("10.0.0.1:5, ::1:7,[fe80::1]:2") == {"10.0.0.1": 5, "::1": 7, "fe80::1": 2}
    assert parse_overrides("") == {}
    with pytest.raises(ValueError):
        parse_overrides("10.0.0.1")
