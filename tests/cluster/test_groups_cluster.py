"""Consumer groups on three real brokers, `__consumer_offsets` replicated three times: group
writes wait for their replicas, and the coordinator hands its groups over when its partition's
leadership moves.

Observed from outside with real clients (confluent_kafka's AdminClient and Consumer) and with
raw requests where a test must hold a request in flight (a JoinGroup parked in a rebalance).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import decode_response, encode_request
from tests.cluster.cluster import Cluster, produce_sync
from tests.rawclient import RawClient

pytestmark = pytest.mark.slow

PROTOCOLS = [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00"}]


def commit_offsets(c: Cluster, group: str, topic: str, offset: int) -> None:
    """Commit `offset` for `topic`-0 as `group` without joining it (the group stays Empty)."""
    consumer = Consumer({"bootstrap.servers": c.live_bootstrap(), "group.id": group,
                         "enable.auto.commit": False, "log_level": 2})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        got = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert got[0].offset == offset
    finally:
        consumer.close()


def test_delete_groups_with_a_replicated_offsets_topic(cluster: Callable[..., Cluster]) -> None:
    """DeleteGroups writes tombstones that must reach every replica of `__consumer_offsets`
    before the answer: the answer is the group's error code once they have."""
    c = cluster(3)
    topic = f"dg-{uuid.uuid4().hex[:8]}"
    c.create_topic(topic, rf=3)
    produce_sync(c.live_bootstrap(), topic, [b"a", b"b", b"c"])
    groups = [f"g-{uuid.uuid4().hex[:8]}" for _ in range(3)]
    for g in groups:
        commit_offsets(c, g, topic, 2)
    admin = c.admin()
    futures = admin.delete_consumer_groups(groups, request_timeout=30)
    for g in groups:
        futures[g].result(timeout=60)  # raises on an error code or no answer
    listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(timeout=60).valid}
    assert not listed & set(groups)
    again = admin.delete_consumer_groups(groups[:1], request_timeout=30)
    with pytest.raises(Exception) as err:
        again[groups[0]].result(timeout=60)
    assert "GROUP_ID_NOT_FOUND" in str(err.value)


def find_coordinator(c: Cluster, group: str) -> int:
    def ask() -> int:
        with RawClient(c.live_bootstrap().split(",")[0]) as rc:
            r: Any = rc.request(10, 3, {"key": group, "key_type": 0})
            return int(r.node_id) + 1 if r.error_code == 0 else 0  # +1: broker 0 is falsy

    return c.wait_for(ask, 30, f"a coordinator for {group}") - 1


def join_request(group: str, member_id: str) -> dict[str, Any]:
    return {"group_id": group, "session_timeout": 60000, "rebalance_timeout": 60000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocols": PROTOCOLS}


def joined(rc: RawClient, group: str) -> Any:
    # The broker asked named the coordinator from its own view; the coordinator may take a moment
    # more to see itself lead that __consumer_offsets partition (NOT_COORDINATOR meanwhile, which
    # a client retries): wait for it, as a client would, then expect Kafka's answer.
    deadline = time.monotonic() + 30
    while True:
        first: Any = rc.request(11, 7, join_request(group, ""))
        if first.error_code not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return first.member_id


def test_a_join_parked_in_a_rebalance_gets_not_coordinator_when_leadership_moves(
        cluster: Callable[..., Cluster]) -> None:
    """Member B's JoinGroup waits for member A to rejoin; meanwhile the coordinator stops (a
    controlled shutdown moves its `__consumer_offsets` leadership first): B is answered
    NOT_COORDINATOR, as Kafka answers requests parked in a shard that unloads, and finds the new
    coordinator."""
    c = cluster(3)
    group = f"pj-{uuid.uuid4().hex[:8]}"
    coord = find_coordinator(c, group)
    boot = c.broker(coord).bootstrap
    with RawClient(boot, timeout=60) as a, RawClient(boot, timeout=60) as b, RawClient(boot, timeout=60) as look:
        a_id = joined(a, group)
        first: Any = a.request(11, 7, join_request(group, a_id))
        assert first.error_code == 0 and first.leader == a_id
        sync: Any = a.request(14, 5, {"group_id": group, "generation_id": first.generation_id, "member_id": a_id,
                                 "protocol_type": "consumer", "protocol_name": "range",
                                 "assignments": [{"member_id": a_id, "assignment": b"A"}]})
        assert sync.error_code == 0
        b_id = joined(b, group)
        b.correlation_id += 1
        b.send_bytes(bytes(encode_request(11, 7, b.correlation_id, "raw-test", join_request(group, b_id))))

        def rebalancing() -> bool:
            d: Any = look.request(15, 5, {"groups": [group], "include_authorized_operations": False})
            return d.groups[0].group_state == "PreparingRebalance"

        c.wait_for(rebalancing, 30, "B's join starts a rebalance that waits for A")
        assert c.sigterm(coord, timeout=60) == 0
        cid, resp = decode_response(11, 7, b.read_frame())
        answer: Any = resp  # the connection must not just close
        assert cid == b.correlation_id
        assert answer.error_code == ErrorCode.NOT_COORDINATOR
    new = find_coordinator(c, group)
    assert new != coord
    with RawClient(c.broker(new).bootstrap) as rc:  # the new coordinator has the group
        d: Any = rc.request(15, 5, {"groups": [group], "include_authorized_operations": False})
        d = d.groups[0]
        assert d.error_code == 0 and d.group_state != "Dead", d
