"""Fetch v16 (KIP-951) on a two-broker cluster: a partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH names the leader the broker knows (`current_leader`: id and epoch), and the
answer carries that leader's endpoint (`node_endpoints`), so that a client goes to it without a
Metadata request. v15 carries neither, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.cluster.cluster import Cluster
from tests.fetchwire import fetch, topic_id
from tests.rawclient import RawClient

pytestmark = pytest.mark.slow


def test_a_fetch_from_the_wrong_broker_or_epoch_names_the_leader(cluster: Callable[..., Cluster]) -> None:
    c = cluster(2)
    topic = "hints"
    c.create_topic(topic, assignment=[[0, 1]])
    # leadership moves to broker 1 with a new epoch (broker 0 stops; it comes back as a follower)
    c.sigterm(0)
    leader = c.wait_leader_change(topic, 0, old=0)
    assert leader == 1
    c.start(0)
    c.wait_full_isr(topic)
    c.wait_for(lambda: c.metadata_leader(topic, 0, via=0) == 1, what="broker 0 knows broker 1 leads")
    epoch = int(c.state(topic)["leader_epoch"])  # type: ignore[index]
    assert epoch >= 1
    follower, new_leader = c.broker(0), c.broker(1)

    def entry(resp: Any) -> tuple[int, Any, list[tuple[int, str, int]]]:
        part = resp.responses[0].partitions[0]
        cur = part.current_leader
        return (part.error_code, None if cur is None or cur.leader_id < 0 else (cur.leader_id, cur.leader_epoch),
                [(e.node_id, e.host, e.port) for e in (getattr(resp, "node_endpoints", None) or [])])

    with RawClient(follower.bootstrap) as f:
        tid = topic_id(f, topic)
        assert entry(fetch(f, 16, {tid: {0: 0}})) == (6, (1, epoch), [(1, "127.0.0.1", new_leader.port)])
        assert entry(fetch(f, 17, {tid: {0: 0}})) == (6, (1, epoch), [(1, "127.0.0.1", new_leader.port)])
        assert entry(fetch(f, 15, {tid: {0: 0}})) == (6, None, [])  # NOT_LEADER_OR_FOLLOWER, no hints
    with RawClient(new_leader.bootstrap) as ld:
        # an older epoch at the leader itself: FENCED_LEADER_EPOCH, and the leader names itself
        assert entry(fetch(ld, 16, {tid: {0: 0}}, leader_epoch=epoch - 1)) == (
            74, (1, epoch), [(1, "127.0.0.1", new_leader.port)])
        assert entry(fetch(ld, 16, {tid: {0: 0}}, leader_epoch=epoch))[0] == 0
