"""The purgatory (samsa/server/purgatory.py) on a manual clock: completion before, at and after
the deadline, several keys, a failing check, cancellation, many deadlines in order, and the
timer: one at a time, at the earliest live deadline."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.server.purgatory import CLUSTER_METADATA, DelayedOperation, DelayedResponse, Purgatory
from samsa.server.responses import Pending
from tests.unit.manual_scheduler import ManualScheduler


class Op(DelayedOperation):
    """Completes when `ready` is set; records what happened to it."""

    def __init__(self, timeout_ms: float | None, name: str = "op", log: list[str] | None = None) -> None:
        super().__init__(timeout_ms)
        self.name = name
        self.ready = False
        self.checks = 0
        self.completions: list[str] = []
        self.failures: list[Exception] = []
        self.log = log if log is not None else []
        self.raise_in_check: Exception | None = None
        self.raise_in_complete: Exception | None = None

    def try_complete(self) -> bool:
        self.checks += 1
        if self.raise_in_check is not None:
            raise self.raise_in_check
        return self.ready

    def on_complete(self) -> None:
        self.completions.append("expired" if self.expired else "completed")
        self.log.append(self.name)
        if self.raise_in_complete is not None:
            raise self.raise_in_complete

    def on_failure(self, error: Exception) -> None:
        self.failures.append(error)


@pytest.fixture
def sched() -> ManualScheduler:
    return ManualScheduler()


@pytest.fixture
def purgatory(sched: ManualScheduler) -> Purgatory:
    return Purgatory(sched)


def test_completes_when_a_key_is_checked_before_the_deadline(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(500)
    assert not purgatory.try_complete_else_watch(op, ["p0"])
    assert op.checks == 1 and purgatory.watched("p0") == 1 and len(purgatory) == 1
    sched.advance(0.2)
    assert purgatory.check_and_complete("p0") == 0, "not ready yet: stays watched"
    op.ready = True
    sched.advance(0.1)
    assert purgatory.check_and_complete("p0") == 1
    assert op.completions == ["completed"] and op.completed and not op.expired
    assert purgatory.watched("p0") == 0 and len(purgatory) == 0
    sched.advance(10)
    assert op.completions == ["completed"], "the deadline passing later changes nothing"
    assert purgatory.check_and_complete("p0") == 0


def test_completes_at_once_when_it_can(purgatory: Purgatory, sched: ManualScheduler) -> None:
    op = Op(500)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["p0"])
    assert op.completions == ["completed"]
    assert purgatory.watched("p0") == 0 and len(purgatory) == 0 and sched.live_timers() == []


def test_expires_at_the_deadline_not_before(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(500)
    purgatory.watch(op, ["p0"])
    assert op.deadline == pytest.approx(1000.5)
    sched.advance(0.498)
    assert op.completions == []
    sched.advance(0.002)
    assert op.completions == ["expired"] and op.expired
    assert purgatory.watched("p0") == 0 and len(purgatory) == 0
    op.ready = True
    assert purgatory.check_and_complete("p0") == 0, "completed once only"
    assert op.completions == ["expired"]


def test_a_check_after_the_deadline_passed_but_before_the_timer_ran(sched: ManualScheduler,
                                                                     purgatory: Purgatory) -> None:
    """A loop running late: the change is seen before the expiry timer runs. The operation
    completes through the check, and the timer then finds nothing to expire."""
    op = Op(100)
    purgatory.watch(op, ["p0"])
    sched.now += 0.5  # past the deadline, timers not run
    op.ready = True
    assert purgatory.check_and_complete("p0") == 1
    sched.advance(0)
    assert op.completions == ["completed"]


def test_zero_timeout_expires_inside_watch(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(0)
    purgatory.watch(op, ["p0"])
    assert op.completions == ["expired"]
    assert purgatory.watched("p0") == 0 and len(purgatory) == 0 and sched.live_timers() == []


def test_no_deadline_waits_until_checked(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(None)
    purgatory.watch(op, ["p0"])
    sched.advance(3600)
    assert op.completions == [] and sched.live_timers() == []
    op.ready = True
    assert purgatory.check_and_complete("p0") == 1 and len(purgatory) == 0


def test_watched_under_several_keys_completes_once(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(1000)
    purgatory.watch(op, ["p0", "p1", CLUSTER_METADATA])
    assert [purgatory.watched(k) for k in ("p0", "p1", CLUSTER_METADATA)] == [1, 1, 1]
    op.ready = True
    assert purgatory.check_and_complete("p1") == 1
    assert [purgatory.watched(k) for k in ("p0", "p1", CLUSTER_METADATA)] == [0, 0, 0]
    assert purgatory.check_and_complete("p0") == 0
    assert purgatory.check_and_complete(CLUSTER_METADATA) == 0
    sched.advance(2)
    assert op.completions == ["completed"] and op.checks == 1


def test_a_check_that_raises_fails_that_operation_only(sched: ManualScheduler, purgatory: Purgatory) -> None:
    bad, good = Op(1000, "bad"), Op(1000, "good")
    purgatory.watch(bad, ["p0"])
    purgatory.watch(good, ["p0", "p1"])
    bad.raise_in_check = RuntimeError("broken check")
    good.ready = True
    assert purgatory.check_and_complete("p0") == 2, "the caller (an append) sees no exception"
    assert [str(e) for e in bad.failures] == ["broken check"] and bad.completions == [] and bad.completed
    assert good.completions == ["completed"]
    assert purgatory.watched("p0") == 0 and purgatory.watched("p1") == 0 and len(purgatory) == 0
    sched.advance(2)
    assert bad.completions == [] and len(bad.failures) == 1


def test_an_on_complete_that_raises_is_a_failure(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(100)
    op.raise_in_complete = ValueError("cannot encode")
    purgatory.watch(op, ["p0"])
    sched.advance(1)
    assert op.completions == ["expired"] and [str(e) for e in op.failures] == ["cannot encode"]


def test_cancel_leaves_without_completing(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(100)
    purgatory.watch(op, ["p0", "p1"])
    op.cancel()
    assert purgatory.watched("p0") == 0 and purgatory.watched("p1") == 0 and len(purgatory) == 0
    op.ready = True
    assert purgatory.check_and_complete("p0") == 0
    sched.advance(1)
    assert op.completions == [] and op.failures == []
    assert not op.force_complete(), "a cancelled operation never completes"


def test_a_closed_connection_cancels_a_delayed_response(sched: ManualScheduler, purgatory: Purgatory) -> None:
    class Answer(DelayedResponse):
        def try_complete(self) -> bool:
            return False

        def on_complete(self) -> None:
            self.pending.complete("late")

    op = Answer(100)
    purgatory.watch(op, ["p0"])
    # what dispatch and the connection do with it
    outer = op.pending.then(lambda body: body)
    got: list[Any] = []
    outer.on_done(lambda v, e: got.append((v, e)))
    outer.cancel()  # the connection closed
    assert op.completed and purgatory.watched("p0") == 0 and len(purgatory) == 0
    sched.advance(1)
    assert got == []


def test_a_delayed_response_that_fails_fails_its_pending(sched: ManualScheduler, purgatory: Purgatory) -> None:
    class Broken(DelayedResponse):
        def try_complete(self) -> bool:
            raise KeyError("gone")

        def on_complete(self) -> None:
            raise AssertionError("not reached")

    op = Broken(100)
    purgatory.watch(op, ["p0"])
    got: list[Any] = []
    op.pending.on_done(lambda v, e: got.append(e))
    purgatory.check_and_complete("p0")
    assert len(got) == 1 and isinstance(got[0], KeyError)


def test_many_operations_expire_in_deadline_order(sched: ManualScheduler, purgatory: Purgatory) -> None:
    order: list[str] = []
    timeouts = [(i * 37) % 101 + 1 for i in range(300)]  # shuffled deadlines, with ties
    ops = [Op(t, f"{t:04d}-{i:04d}", order) for i, t in enumerate(timeouts)]
    for i, op in enumerate(ops):
        purgatory.watch(op, [f"p{i % 3}"])
    # a third of them complete early: their dead entries must not disturb the rest
    for op in ops[::3]:
        op.ready = True
    for k in ("p0", "p1", "p2"):
        purgatory.check_and_complete(k)
    early = set(order)
    order.clear()
    assert len(early) == 100
    sched.advance(0.2)
    assert order == sorted(op.name for op in ops if op.name not in early), \
        "by deadline, and by arrival for equal deadlines"
    assert all(op.completions in (["completed"], ["expired"]) for op in ops)
    assert len(purgatory) == 0 and sched.live_timers() == []


def test_one_timer_at_the_earliest_live_deadline(sched: ManualScheduler, purgatory: Purgatory) -> None:
    a, b, c = Op(300, "a"), Op(100, "b"), Op(200, "c")
    purgatory.watch(a, ["k"])
    assert sched.live_timers() == [pytest.approx(1000.3)]
    purgatory.watch(b, ["k"])
    assert sched.live_timers() == [pytest.approx(1000.1)], "an earlier deadline moves the timer"
    purgatory.watch(c, ["k"])
    assert sched.live_timers() == [pytest.approx(1000.1)], "a later one does not add one"
    b.cancel()
    sched.advance(0.1)  # b's timer finds nothing due and moves on to c
    assert sched.live_timers() == [pytest.approx(1000.2)]
    sched.advance(0.1)
    assert c.completions == ["expired"] and sched.live_timers() == [pytest.approx(1000.3)]
    sched.advance(0.1)
    assert a.completions == ["expired"] and sched.live_timers() == []


def test_dead_entries_are_swept(sched: ManualScheduler, purgatory: Purgatory) -> None:
    """A hot partition: each fetch completes by the next append long before its deadline; the
    heap stays small without waiting for the deadlines to pass."""
    for _ in range(10_000):
        op = Op(30_000)
        op.ready = False
        purgatory.watch(op, ["hot"])
        op.ready = True
        purgatory.check_and_complete("hot")
    assert len(purgatory._heap) < 200 and all(e[2] is None or not e[2].completed for e in purgatory._heap)
    assert len(purgatory) == 0


def test_an_expiring_operation_may_watch_a_new_one(sched: ManualScheduler, purgatory: Purgatory) -> None:
    """on_complete that starts another delayed operation (a retry, the next fetch) is safe
    from inside the timer, and the new one gets its own deadline."""
    later = Op(50, "later")
    early_live = Op(400, "live")
    purgatory.watch(early_live, ["k"])

    class Chain(Op):
        def on_complete(self) -> None:
            super().on_complete()
            purgatory.watch(later, ["k"])

    first = Chain(100, "first")
    purgatory.watch(first, ["k"])
    sched.advance(0.1)
    assert first.completions == ["expired"] and later.deadline == pytest.approx(1000.15)
    sched.advance(0.05)
    assert later.completions == ["expired"]
    sched.advance(0.25)
    assert early_live.completions == ["expired"]


def test_check_soon_runs_on_a_later_turn(sched: ManualScheduler, purgatory: Purgatory) -> None:
    op = Op(1000)
    purgatory.watch(op, ["p0"])
    op.ready = True
    purgatory.check_soon("p0")
    assert op.completions == []
    sched.run_soon()
    assert op.completions == ["completed"]


def test_close_cancels_everything(sched: ManualScheduler, purgatory: Purgatory) -> None:
    ops = [Op(100), Op(None)]
    for op in ops:
        purgatory.watch(op, ["p0"])
    purgatory.close()
    sched.advance(1)
    assert all(op.completed and op.completions == [] for op in ops)
    assert len(purgatory) == 0 and purgatory.watched("p0") == 0


def test_gather() -> None:
    parts = [Pending(), Pending(), Pending()]
    out = Pending.gather(parts)
    got: list[Any] = []
    out.on_done(lambda v, e: got.append((v, e)))
    parts[2].complete("c")
    parts[0].complete("a")
    assert got == []
    parts[1].complete("b")
    assert got == [(["a", "b", "c"], None)]
    assert Pending.gather([]).done
    cancelled: list[int] = []
    p = Pending()
    p.on_cancel(lambda: cancelled.append(1))
    Pending.gather([p]).cancel()
    assert cancelled == [1]
