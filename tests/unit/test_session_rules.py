"""The rules of a broker's ZooKeeper session, as tables: registration and self-fencing."""

from __future__ import annotations

import pytest

from samsa.controller.session import (
    REGISTRATION_MARGIN_S,
    Registration,
    attest_window_s,
    fence_deadline_s,
    must_fence,
    registration_verdict,
)

ME = ["PLAINTEXT://127.0.0.1:9092"]
OTHER = ["PLAINTEXT://127.0.0.1:9093"]


@pytest.mark.parametrize("owner, mine, theirs, waited, verdict", [
    # The node is our own session's: a stale watch or a retry. Never wait, never conflict,
    # whatever its content says (the freeze of issue 15 came from judging by content).
    (77, 77, ME, 0.0, Registration.OURS),
    (77, 77, OTHER, 100.0, Registration.OURS),
    # Our previous process's session, not expired yet: wait, up to the session timeout + margin.
    (76, 77, ME, 0.0, Registration.WAIT),
    (76, 77, ME, 6.0 + REGISTRATION_MARGIN_S, Registration.WAIT),
    (76, 77, ME, 6.0 + REGISTRATION_MARGIN_S + 0.1, Registration.CONFLICT),
    # Another live broker with our id.
    (76, 77, OTHER, 0.0, Registration.CONFLICT),
    (76, 77, None, 0.0, Registration.CONFLICT),
    # A persistent node (owner 0) is never ours, even for a session id of 0.
    (0, 0, ME, 0.0, Registration.WAIT),
])
def test_registration_verdict(owner: int, mine: int, theirs: list[str] | None, waited: float,
                              verdict: Registration) -> None:
    assert registration_verdict(owner, mine, theirs, ME, waited, session_timeout_s=6.0) is verdict


def test_fence_deadline_is_within_the_last_third_of_the_session() -> None:
    # kazoo reports the loss after 2/3 of the session timeout without an answer: the leader
    # must step down before the remaining third is over.
    for ms in (1000, 3000, 6000, 18000, 30000):
        d = fence_deadline_s(ms)
        assert 0 < d < ms / 3000
        assert d >= ms / 3000 * 0.75
    assert fence_deadline_s(18000) == pytest.approx(5.8)


NOBODY: dict[int, float] = {}
BOTH = {2: 0.2, 3: 1.4}  # seconds since each follower's last fetch at this leader's epoch


@pytest.mark.parametrize("gone, replicas, isr, unclean, since_fetch, fence", [
    (0.5, [1, 2, 3], [1, 2, 3], False, NOBODY, False),  # not yet past the deadline
    (1.0, [1, 2, 3], [1, 2, 3], False, NOBODY, True),  # another ISR member may be leader by now
    (1.0, [1, 2, 3], [1, 2], False, NOBODY, True),
    # Every other ISR member still fetches from this leader: nobody else was elected
    # (ZooKeeper is down for everyone, not just for this broker).
    (30.0, [1, 2, 3], [1, 2, 3], False, BOTH, False),
    (30.0, [1, 2, 3], [1, 2, 3], False, {2: 0.2, 3: 1.6}, True),  # one stopped: it may lead now
    (30.0, [1, 2, 3], [1, 2, 3], False, {2: 0.2}, True),
    (30.0, [1, 2, 3], [1, 2], False, {2: 0.1, 3: 9.0}, False),  # 3 is out of the ISR: cannot be elected cleanly
    (30.0, [1, 2, 3], [1, 2], True, {2: 0.1, 3: 9.0}, False),  # (and 2 would have stopped if it led)
    (1.0, [1, 2, 3], [1], False, NOBODY, False),  # ISR is this broker alone: no clean election elsewhere
    (1.0, [1, 2, 3], [1], True, NOBODY, True),  # ... unless unclean election may pick another
    (1.0, [1], [1], True, NOBODY, False),  # the only replica
    (9.0, [1], [1], False, NOBODY, False),
])
def test_must_fence(gone: float, replicas: list[int], isr: list[int], unclean: bool, since_fetch: dict[int, float],
                    fence: bool) -> None:
    assert must_fence(gone, 1.0, 1, replicas, isr, unclean, since_fetch, attest_s=1.5) is fence


def test_attest_window_covers_a_parked_follower_fetch() -> None:
    assert attest_window_s(500) == 1.5
    assert attest_window_s(100) > 0.1 * 2
