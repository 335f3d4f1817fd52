"""Transaction markers on a 3-broker cluster (RF=3), over raw requests: the markers and the
aborted-transaction indexes are the same on every replica, and a follower that becomes leader
(after kill -9 of the leader) holds the same open transaction, aborts and last stable offset."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from samsa.storage.txn_index import ENTRY_SIZE
from tests.cluster.cluster import Cluster
from tests.rawclient import RawClient
from tests.txnwire import (
    READ_COMMITTED,
    committed_values,
    describe_producers,
    fetch,
    init_pid,
    list_offset,
    produce,
    txn_batch,
    write_markers,
)

pytestmark = pytest.mark.slow


def txn_entries(cl: Cluster, i: int, topic: str) -> bytes:
    """Broker i's aborted-transaction index entries, in order, whatever its segment boundaries."""
    d = cl.partition_dir(i, topic)
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.txnindex")))


def test_markers_replicate_and_a_new_leader_holds_the_open_transaction(cluster: Callable[..., Cluster]) -> None:
    cl = cluster(3, min_insync_replicas=2)
    topic = "txn-rep"
    cl.create_topic(topic, rf=3, configs={"segment.bytes": "2048", "min.insync.replicas": "2"})
    leader = cl.leader_of(topic)
    assert leader is not None
    with RawClient(cl.broker(leader).bootstrap) as c:
        (a, ea), (b, eb), (k, ek) = init_pid(c), init_pid(c), init_pid(c)
        assert produce(c, topic, txn_batch(a, ea, 0, [b"a0", b"a1"])).error_code == 0  # 0-1: aborted
        assert produce(c, topic, txn_batch(k, ek, 0, [b"k0"])).error_code == 0  # 2: committed
        assert write_markers(c, a, ea, False, {topic: [0]}) == {(topic, 0): 0}  # 3
        assert write_markers(c, k, ek, True, {topic: [0]}) == {(topic, 0): 0}  # 4
        for i in range(10):
            assert produce(c, topic, txn_batch(k, ek, 1 + i, [b"k%d" % (i + 1) + b"." * 300])).error_code == 0
            assert write_markers(c, k, ek, i % 2 == 0, {topic: [0]}) == {(topic, 0): 0}
        first_open = produce(c, topic, txn_batch(b, eb, 0, [b"open"])).base_offset  # stays open
        assert list_offset(c, topic, READ_COMMITTED) == first_open
    cl.wait_replicas_identical(topic)
    indexes = {i: txn_entries(cl, i, topic) for i in range(3)}
    assert len(indexes[leader]) == 6 * ENTRY_SIZE, indexes  # a's abort and five of k's
    assert len(set(indexes.values())) == 1, "the replicas' aborted-transaction indexes differ"

    cl.kill9(leader)
    new = cl.wait_leader_change(topic, 0, leader)
    with RawClient(cl.broker(new).bootstrap) as c:
        assert cl.wait_for(lambda: list_offset(c, topic, READ_COMMITTED) == first_open, 30,
                           "the new leader's LSO is the open transaction's first offset")
        (p,) = [p for p in describe_producers(c, topic).active_producers if p.producer_id == b]
        assert p.current_txn_start_offset == first_open
        rc: Any = fetch(c, topic, 0, READ_COMMITTED)
        assert (a, 0) in [(t.producer_id, t.first_offset) for t in rc.aborted_transactions]
        assert b"a0" not in committed_values(rc.records, rc.aborted_transactions)
        assert write_markers(c, b, eb, True, {topic: [0]}, coordinator_epoch=1) == {(topic, 0): 0}
        assert list_offset(c, topic, READ_COMMITTED) == first_open + 2
    cl.start(leader)
    cl.wait_full_isr(topic)
    cl.wait_replicas_identical(topic)
    assert len({txn_entries(cl, i, topic) for i in range(3)}) == 1
