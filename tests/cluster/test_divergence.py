"""A returning replica truncates what it wrote but nobody else has (leader epochs, KIP-101).

The scenario Kafka's leader epochs exist for: a leader appends records its followers never
fetch, dies, another replica becomes leader and takes new records at the same offsets. When the old leader comes back it must drop its divergent tail (OffsetForLeaderEpoch)
and copy the new leader's records, so that the replicas end up byte for byte identical and
consumers see one history.
"""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.cluster import Cluster, produce_sync

pytestmark = pytest.mark.slow


def test_returning_leader_truncates_its_divergent_tail(cluster) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = cluster(3, auto_leader_rebalance_enable="false")
    old = c.controller()  # it sees its followers die at once (its probes) and shrinks the ISR
    assert old is not None
    followers = [i for i in range(3) if i != old]
    t = f"d-{uuid.uuid4().hex[:8]}"
    # Unclean election lets a replica without the old leader's last records lead: the way to
    # make two replicas hold different records at the same offsets.
    c.create_topic(t, configs={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
                   assignment=[[old, *followers]])

    first = [f"a{i:04d}".encode() for i in range(100)]
    assert all(e is None for _, _, e in produce_sync(c.bootstrap, t, first))
    c.wait_replicas_identical(t)

    for f in followers:
        c.kill9(f)
    c.wait_for(lambda: c.isr(t) == [old], 20, "the ISR to shrink to the leader")
    lost = [f"lost{i:04d}".encode() for i in range(50)]
    reports = produce_sync(c.broker(old).bootstrap, t, lost)
    assert [o for _, o, _ in reports] == list(range(100, 150))  # acknowledged by an ISR of one
    c.kill9(old)
    for f in followers:
        c.start(f)

    new = c.wait_leader_change(t, 0, old)
    assert new in followers
    assert c.state(t)["leader_epoch"] >= 1  # type: ignore[index]
    second = [f"b{i:04d}".encode() for i in range(30)]
    reports = produce_sync(c.live_bootstrap(), t, second)
    assert [o for _, o, e in reports if e is None] == list(range(100, 130))  # the same offsets again

    c.start(old)
    c.wait_full_isr(t, timeout=30)
    c.wait_replicas_identical(t)
    assert "Truncating" in c.broker(old).log_text()
    got = [v for _, _, v in c.consume_all(t)[0]]
    assert got == first + second  # one history: the old leader's divergent tail is gone
