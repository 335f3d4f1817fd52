"""Replication across three real brokers on ZooKeeper, observed from outside: the partition
state znodes, `samsa topics --describe`, real producers and consumers, the replicas' files.

Every expectation is Kafka's documented behaviour (ZooKeeper mode): the ISR, the high
watermark (= min log end offset over the ISR), acks=all with min.insync.replicas, followers
that catch up and rejoin the ISR, and replicas whose logs end up byte-identical.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.cluster.cluster import Cluster, produce_sync

pytestmark = pytest.mark.slow

PART_LINE = re.compile(
    r"Topic:\s*(?P<topic>\S+)\s+Partition:\s*(?P<p>\d+)\s+Leader:\s*(?P<leader>\S+)\s+"
    r"Replicas:\s*(?P<replicas>[\d,]*)\s+Isr:\s*(?P<isr>[\d,]*)"
)


def partition_lines(out: str, topic: str) -> dict[int, dict[str, object]]:
    rows: dict[int, dict[str, object]] = {}
    for m in PART_LINE.finditer(out):
        if m["topic"] != topic:
            continue
        rows[int(m["p"])] = {
            "leader": None if m["leader"] == "none" else int(m["leader"]),
            "replicas": [int(x) for x in m["replicas"].split(",") if x],
            "isr": [int(x) for x in m["isr"].split(",") if x],
        }
    return rows


def topic_name() -> str:
    return f"r-{uuid.uuid4().hex[:8]}"


def values(n: int, tag: str = "v", size: int = 0) -> list[bytes]:
    return [f"{tag}{i:06d}".encode().ljust(size, b".") for i in range(n)]


def assert_delivered(reports: list[tuple[bytes, int, KafkaError | None]]) -> list[int]:
    errors = [(v, e) for v, _, e in reports if e is not None]
    assert not errors, f"{len(errors)} of {len(reports)} deliveries failed, first: {errors[:3]}"
    offsets = [o for _, o, _ in reports]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), "acknowledged offsets out of order"
    return offsets


def high_watermark(c: Cluster, topic: str, p: int = 0) -> int:
    """ListOffsets(latest) as a consumer sees it: the high watermark."""
    cons = Consumer({"bootstrap.servers": c.live_bootstrap(), "group.id": "hw-probe", "enable.auto.commit": False})
    try:
        return int(cons.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1])
    finally:
        cons.close()


def controller_leads(c: Cluster) -> list[list[int]]:
    """A one-partition assignment led by the controller: faults on its followers then hit
    followers only (the controller's own failover is tested on its own)."""
    ctrl = c.controller()
    assert ctrl is not None
    return [[ctrl, *(i for i in range(c.n) if i != ctrl)]]


def pure_follower(c: Cluster, t: str) -> int:
    """A follower of t-0 that is not the controller."""
    return next(f for f in c.followers(t, 0) if f != c.controller())


# --- the cluster itself --------------------------------------------------------------------------


def test_three_brokers_register_and_elect_one_controller(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    assert c.registered() == {0, 1, 2}
    for i in range(3):
        reg = json.loads(c.zk.get(f"{c.chroot}/brokers/ids/{i}")[0])
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{c.broker(i).port}"]
    assert c.controller() in {0, 1, 2}
    for i in range(3):  # every broker tells clients about the whole cluster and its controller
        assert c.metadata_brokers(i) == {0, 1, 2}
        c.wait_for(lambda i=i: c.admin(c.broker(i).bootstrap).list_topics(timeout=5).controller_id == c.controller(),
                   10, f"broker {i} names the controller in Metadata")


def test_brokers_started_together_all_register(cluster) -> None:  # type: ignore[no-untyped-def]
    """The brokers of a cluster are usually started at the same moment."""
    c = cluster(3, start=False)
    c.start_all(parallel=True)
    assert c.registered() == {0, 1, 2}


# --- describe ------------------------------------------------------------------------------------


def test_describe_shows_leader_replicas_and_full_isr(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=3, rf=3)
    out = c.topics_tool("--describe", "--topic", t)
    assert out.returncode == 0, out.stderr
    assert re.search(rf"Topic: {t}\s.*PartitionCount: 3\s+ReplicationFactor: 3", out.stdout), out.stdout
    rows = partition_lines(out.stdout, t)
    assert sorted(rows) == [0, 1, 2], out.stdout
    for p, row in rows.items():
        assert sorted(row["replicas"]) == [0, 1, 2], out.stdout  # type: ignore[arg-type]
        assert sorted(row["isr"]) == [0, 1, 2], out.stdout  # type: ignore[arg-type]
        assert row["leader"] == c.leader_of(t, p), (out.stdout, c.state(t, p))
        assert row["replicas"] == c.assignment(t)[p]
        # A fresh topic is led by its preferred replica, the first of the assignment.
        assert row["leader"] == row["replicas"][0], out.stdout  # type: ignore[index]
    # Kafka's assignment spreads leadership: with 3 partitions on 3 brokers, one each.
    assert {row["leader"] for row in rows.values()} == {0, 1, 2}, out.stdout
    for p in range(3):
        assert c.state(t, p)["leader_epoch"] == 0  # type: ignore[index]


# --- acks=all, reads through every leader, identical replicas -------------------------------------


def test_acks_all_records_are_readable_through_every_leader(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    sent = values(300)
    offsets = assert_delivered(produce_sync(c.bootstrap, t, sent))
    assert offsets == list(range(300))

    leaders = []
    for step in range(3):
        leader = c.leader_of(t, 0)
        assert leader is not None and leader not in leaders
        leaders.append(leader)
        # Kafka (KIP-207): a new leader answers ListOffsets with OFFSET_NOT_AVAILABLE until its
        # high watermark has caught up, so a consumer never sees the high watermark go back.
        seen: list[int] = []

        def hw_is_300() -> bool:
            seen.append(high_watermark(c, t))
            return seen[-1] == 300

        c.wait_for(hw_is_300, 15, lambda: f"the high watermark is 300 on leader {leader} (saw {seen})")
        assert min(seen) == 300, f"the high watermark went back after the leader moved to {leader}: {seen}"
        got = c.consume_all(t, [0])[0]
        assert [v for _, _, v in got] == sent, (f"reading through leader {leader}: {len(got)} records "
                                                f"(high watermark now {high_watermark(c, t)})")
        assert [o for o, _, _ in got] == list(range(300))
        if step < 2:
            # Controlled shutdown of the leader: leadership moves to another in-sync replica.
            assert c.sigterm(leader) == 0
            c.wait_leader_change(t, 0, leader)
            c.wait_for(lambda: c.metadata_leader(t, 0) not in (None, leader), 20,
                       f"clients are told the new leader of {t}-0")
    assert sorted(leaders) == [0, 1, 2]

    for i in leaders[:2]:
        c.start(i)
    c.wait_full_isr(t)
    c.wait_replicas_identical(t)


def test_replicas_are_byte_identical_when_idle(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=3, rf=3, configs={"segment.bytes": "50000"})  # several segments
    for p in range(3):
        small_batches = {"batch.size": 16384}  # a batch larger than a segment is refused
        assert_delivered(produce_sync(c.bootstrap, t, values(500, f"p{p}-", 200), partition=p, **small_batches))
        assert_delivered(produce_sync(c.bootstrap, t, values(200, f"a1-p{p}-", 200), partition=p, acks="1",
                                      idempotent=False, **small_batches))
    for p in range(3):
        for i in range(3):
            assert c.partition_dir(i, t, p).is_dir(), f"broker {i} has no replica of {t}-{p}"
    c.wait_replicas_identical(t, range(3))
    for p in range(3):
        assert len(list(c.partition_dir(0, t, p).glob("*.log"))) > 1
        assert len(c.consume_all(t, [p])[p]) == 700


# --- the tools' reports --------------------------------------------------------------------------


def test_under_replicated_partitions_lists_partition_after_follower_dies(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3)
    before = c.topics_tool("--describe", "--under-replicated-partitions", "--topic", t)
    assert before.returncode == 0, before.stderr
    assert partition_lines(before.stdout, t) == {}, before.stdout

    leader = c.leader_of(t, 0)
    follower = pure_follower(c, t)
    c.kill9(follower)
    c.wait_for(lambda: follower not in c.isr(t, 0), 20, f"broker {follower} leaves the ISR of {t}-0")

    def listed() -> dict[int, dict[str, object]]:
        return partition_lines(c.topics_tool("--describe", "--under-replicated-partitions", "--topic", t).stdout, t)

    rows = c.wait_for(listed, 20, f"{t}-0 is reported under-replicated")
    assert list(rows) == [0]
    assert rows[0]["leader"] == leader
    assert sorted(rows[0]["replicas"]) == [0, 1, 2]  # type: ignore[arg-type]
    assert follower not in rows[0]["isr"] and len(rows[0]["isr"]) == 2  # type: ignore[operator,arg-type]


def test_unavailable_partitions_lists_rf1_partitions_of_a_dead_broker(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=3, rf=1)
    assignment = c.assignment(t)
    assert sorted(r[0] for r in assignment.values()) == [0, 1, 2]  # spread, one per broker
    before = c.topics_tool("--describe", "--unavailable-partitions", "--topic", t)
    assert before.returncode == 0, before.stderr
    assert partition_lines(before.stdout, t) == {}, before.stdout

    victim = assignment[0][0]
    c.kill9(victim)
    c.wait_for(lambda: victim not in c.registered(), 20, f"broker {victim}'s session expires")

    def listed() -> dict[int, dict[str, object]]:
        return partition_lines(c.topics_tool("--describe", "--unavailable-partitions", "--topic", t).stdout, t)

    rows = c.wait_for(listed, 20, f"{t}-0 is reported unavailable")
    assert list(rows) == [0], rows  # only the partition whose only replica is down
    assert rows[0]["leader"] in (None, victim)
    # Without unclean election nobody else may lead it: the controller leaves it leaderless.
    c.wait_for(lambda: c.state(t, 0)["leader"] == -1, 20, f"{t}-0 has no leader")  # type: ignore[index]

    c.start(victim)
    c.wait_for(lambda: c.leader_of(t, 0) == victim, 20, f"broker {victim} leads {t}-0 again")
    c.wait_for(lambda: partition_lines(c.topics_tool("--describe", "--unavailable-partitions", "--topic", t).stdout,
                                       t) == {}, 20, "no partition is reported unavailable")


# --- followers -----------------------------------------------------------------------------------


def test_follower_restarted_after_kill9_catches_up_and_rejoins_isr(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    first = values(300, "a")
    assert_delivered(produce_sync(c.bootstrap, t, first))
    follower = pure_follower(c, t)
    c.kill9(follower)
    c.wait_for(lambda: follower not in c.isr(t, 0), 20, f"broker {follower} leaves the ISR")
    second = values(300, "b")
    assert_delivered(produce_sync(c.bootstrap, t, second))  # 2 in-sync replicas are enough

    c.start(follower)
    c.wait_for(lambda: follower in c.isr(t, 0), 30, f"broker {follower} catches up and rejoins the ISR")
    c.wait_replicas_identical(t)
    assert [v for _, _, v in c.consume_all(t, [0])[0]] == first + second


def test_new_controller_takes_a_dead_follower_out_of_the_isr(cluster) -> None:  # type: ignore[no-untyped-def]
    """The controller dies, and it was a follower of an idle partition. Kafka's new controller
    marks the replicas of dead brokers offline at its start-up, which takes them out of the ISR
    (the leader alone would not: a follower with the leader's log end offset is never "lagging")."""
    c = cluster(3)
    t = topic_name()
    ctrl = c.controller()
    assert ctrl is not None
    others = [i for i in range(3) if i != ctrl]
    c.create_topic(t, assignment=[[others[0], ctrl, others[1]]])
    assert_delivered(produce_sync(c.bootstrap, t, values(20)))
    c.kill9(ctrl)
    c.wait_for(lambda: c.controller() in others, 20, "another broker becomes the controller")
    c.wait_for(lambda: ctrl not in c.isr(t, 0), 20, f"the dead controller {ctrl} leaves the ISR of {t}-0")
    assert c.leader_of(t, 0) == others[0]
    c.start(ctrl)
    c.wait_full_isr(t)
    c.wait_replicas_identical(t)


# --- min.insync.replicas and the high watermark ----------------------------------------------------


def test_acks_all_needs_min_insync_replicas_and_acks_1_does_not(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3, min_insync_replicas=2)
    t = topic_name()
    c.create_topic(t, assignment=controller_leads(c))
    before = values(100, "a")
    assert_delivered(produce_sync(c.bootstrap, t, before))
    leader = c.leader_of(t, 0)
    followers = c.followers(t, 0)
    for f in followers:
        c.kill9(f)
    c.wait_for(lambda: c.isr(t, 0) == [leader], 20, f"the ISR of {t}-0 shrinks to the leader {leader}")

    # Kafka: "NotEnoughReplicas: messages are rejected since there are fewer in-sync replicas
    # than required" (checked before the append, so nothing is written).
    [(_, _, err)] = produce_sync(c.live_bootstrap(), t, [b"refused"], idempotent=False, retries=0)
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err

    # acks=1 does not care about min.insync.replicas; with the ISR = {leader} the high
    # watermark is the leader's log end, so those records are visible at once.
    one = values(50, "one")
    assert_delivered(produce_sync(c.live_bootstrap(), t, one, acks="1", idempotent=False))
    assert high_watermark(c, t) == 150
    got = [v for _, _, v in c.consume_all(t, [0])[0]]
    assert got == before + one

    for f in followers:
        c.start(f)
    c.wait_full_isr(t)
    after = values(10, "c")
    assert_delivered(produce_sync(c.bootstrap, t, after))
    c.wait_replicas_identical(t)
    assert [v for _, _, v in c.consume_all(t, [0])[0]] == before + one + after


def test_acks_all_waits_for_every_replica_in_the_isr(cluster) -> None:  # type: ignore[no-untyped-def]
    """Kafka's acks=all: the leader answers once the full ISR has the record, not once
    min.insync.replicas have it. A paused follower (its port still accepts connections) stays in
    the ISR until it lags too long or its session expires; until then nothing is acknowledged."""
    c = cluster(3, zookeeper_session_timeout_ms=6000, replica_lag_time_max_ms=3000)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    assert_delivered(produce_sync(c.bootstrap, t, values(10)))
    follower = pure_follower(c, t)
    c.pause(follower)
    t0 = time.monotonic()
    isr_at_ack: list[list[int]] = []
    p = Producer({"bootstrap.servers": c.live_bootstrap(), "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 60000, "request.timeout.ms": 30000})
    p.produce(t, b"needs-the-full-isr", partition=0,
              on_delivery=lambda err, msg: isr_at_ack.append(c.isr(t, 0) if err is None else [err.code()]))
    assert p.flush(60) == 0
    waited = time.monotonic() - t0
    print(f"\nacks=all with a paused follower in the ISR answered after {waited:.2f} s, ISR then {isr_at_ack}")
    assert isr_at_ack and follower not in isr_at_ack[0], (
        f"acknowledged while the paused broker {follower} was still in the ISR {isr_at_ack}")
    c.resume(follower)
    c.wait_full_isr(t, timeout=40)
    c.wait_replicas_identical(t)


def test_consumer_never_sees_past_the_high_watermark(cluster) -> None:  # type: ignore[no-untyped-def]
    # Long enough lag and session timeouts that the paused followers stay in the ISR for the
    # first checks (they take well under a second).
    c = cluster(3, zookeeper_session_timeout_ms=6000, replica_lag_time_max_ms=10000)
    t = topic_name()
    c.create_topic(t, assignment=controller_leads(c))
    assert_delivered(produce_sync(c.bootstrap, t, values(10)))
    c.wait_for(lambda: high_watermark(c, t) == 10, 10, "the high watermark reaches 10")
    leader = c.leader_of(t, 0)
    followers = c.followers(t, 0)
    for f in followers:
        c.pause(f)
    t_pause = time.monotonic()

    [(_, offset, err)] = produce_sync(c.broker(leader).bootstrap, t, [b"beyond-hw"], acks="1", idempotent=False)
    assert (offset, err) == (10, None)
    hw = high_watermark(c, t)
    cons = Consumer({"bootstrap.servers": c.broker(leader).bootstrap, "group.id": "hw-reader",
                     "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        cons.assign([TopicPartition(t, 0, 10)])
        seen = []
        deadline = time.monotonic() + 1.0  # a bounded negative check: nothing may arrive
        while time.monotonic() < deadline:
            m = cons.poll(0.1)
            if m is not None and m.error() is None:
                seen.append(m.value())
        still_in_sync = sorted(c.isr(t, 0)) == [0, 1, 2] and set(followers) <= c.registered()
        assert still_in_sync, f"the paused followers left the ISR too early ({time.monotonic() - t_pause:.1f} s)"
        # The followers have not fetched offset 10: the high watermark stays at 10, and a
        # consumer does not see the record yet.
        assert hw == 10
        assert seen == []

        # Once the followers drop out of the ISR (session expiry or replica lag), the high
        # watermark is the leader's log end and the record is delivered.
        c.wait_for(lambda: c.isr(t, 0) == [leader], 30, f"the paused followers leave the ISR of {t}-0")
        c.wait_for(lambda: high_watermark(c, t) == 11, 10, "the high watermark moves to 11")
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            m = cons.poll(0.2)
            if m is not None and m.error() is None:
                seen.append(m.value())
        assert seen == [b"beyond-hw"]
    finally:
        cons.close()
    for f in followers:
        c.resume(f)
    c.wait_full_isr(t, timeout=40)
    c.wait_replicas_identical(t)


# --- __consumer_offsets --------------------------------------------------------------------------


def test_committed_offsets_survive_the_coordinators_death(cluster) -> None:  # type: ignore[no-untyped-def]
    c = cluster(3)
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3)
    assert_delivered(produce_sync(c.bootstrap, t, values(50)))
    group = f"g-{uuid.uuid4().hex[:8]}"
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        cons.commit(offsets=[TopicPartition(t, 0, 42)], asynchronous=False)
    finally:
        cons.close()

    # offsets.topic.replication.factor=3: the internal topic is replicated like any other.
    offsets_assignment = c.assignment("__consumer_offsets")
    assert offsets_assignment, "__consumer_offsets is not in ZooKeeper"
    assert {len(r) for r in offsets_assignment.values()} == {3}, offsets_assignment
    c.wait_full_isr("__consumer_offsets")

    admin: AdminClient = c.admin(c.bootstrap)
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    coordinator = desc.coordinator.id
    c.kill9(coordinator)

    seen: list[int] = []

    def committed() -> bool:
        reader = Consumer({"bootstrap.servers": c.live_bootstrap(), "group.id": group, "enable.auto.commit": False})
        try:
            seen.append(reader.committed([TopicPartition(t, 0)], timeout=5)[0].offset)
            return seen[-1] == 42
        finally:
            reader.close()

    c.wait_for(committed, 30, lambda: f"the committed offset 42 is read back from a new coordinator (read: {seen})")
    live_admin = c.admin()
    new = live_admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).coordinator.id
    assert new != coordinator


def test_replicas_are_spread_across_racks(cluster) -> None:  # type: ignore[no-untyped-def]
    """Kafka's rack-aware placement: with racks a, a, b, every partition of an RF=2 topic
    has one replica in each rack, and leadership is spread over the brokers."""
    c: Cluster = cluster(3, start=False)
    racks = {0: "a", 1: "a", 2: "b"}
    for i, rack in racks.items():
        b = c.broker(i)
        b.config_path.write_text(b.config_path.read_text() + f"broker.rack={rack}\n")
    c.start_all()
    t = topic_name()
    c.create_topic(t, partitions=6, rf=2)
    assignment = c.assignment(t)
    assert len(assignment) == 6
    for p, replicas in assignment.items():
        assert sorted(racks[r] for r in replicas) == ["a", "b"], (p, replicas)
    assert {replicas[0] for replicas in assignment.values()} == {0, 1, 2}
    out = c.topics_tool("--describe", "--topic", t)
    assert out.returncode == 0, out.stderr
    rows = partition_lines(out.stdout, t)
    assert {p: r["replicas"] for p, r in rows.items()} == assignment


def test_delete_records_waits_for_every_live_follower(cluster) -> None:  # type: ignore[no-untyped-def]
    """Kafka's DelayedDeleteRecords: the answer's low watermark is the smallest log start
    offset of the leader and its followers on live brokers, so a deletion is answered once
    every replica has it; a follower that does not fetch holds the answer to its timeout."""
    from samsa.protocol.errors import ErrorCode
    from tests.rawclient import RawClient

    c: Cluster = cluster(3)
    topic = topic_name()
    c.create_topic(topic, rf=3)
    assert all(err is None for _, _, err in produce_sync(c.bootstrap, topic, values(100)))
    leader = c.leader_of(topic)
    assert leader is not None
    follower = next(i for i in c.followers(topic) if i != c.controller())

    def delete_records(offset: int, timeout_ms: int) -> tuple[int, int]:
        with RawClient(c.broker(leader).bootstrap, timeout=timeout_ms / 1000 + 10) as rc:
            resp = rc.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0,
                                                                                 "offset": offset}]}],
                                      "timeout": timeout_ms})
        part = resp.topics[0].partitions[0]
        return int(part.error_code), int(part.low_watermark)

    assert delete_records(30, 20_000) == (0, 30)  # every replica moved: answered
    c.pause(follower)  # alive to the cluster (its ZooKeeper session holds) but not fetching
    try:
        started = time.monotonic()
        assert delete_records(60, 1500) == (ErrorCode.REQUEST_TIMED_OUT, -1)
        assert time.monotonic() - started >= 1.4
    finally:
        c.resume(follower)
    assert delete_records(60, 20_000) == (0, 60)  # the same again: it has caught up


def test_flush_messages_flushes_the_leader_and_the_followers(cluster) -> None:  # type: ignore[no-untyped-def]
    """flush.messages=1 on an RF=3 topic: every record acknowledged and read back, and every
    replica's recovery point (checkpointed every 50 ms) reaches the log end: the followers flush
    what they replicate too (in worker threads, as the leader)."""
    from samsa.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets

    c = cluster(3, **{"log.flush.offset.checkpoint.interval.ms": "50"})
    t = topic_name()
    c.create_topic(t, partitions=1, rf=3, configs={"min.insync.replicas": "2", "flush.messages": "1"})
    sent = values(500)
    assert assert_delivered(produce_sync(c.bootstrap, t, sent)) == list(range(500))
    assert [v for _, _, v in c.consume_all(t, [0])[0]] == sent
    c.wait_full_isr(t)
    for i in range(3):
        c.wait_for(lambda i=i: read_offsets(c.broker(i).log_dir / RECOVERY_POINT_CHECKPOINT).get((t, 0)) == 500, 30,
                   f"broker {i}'s recovery point of {t}-0 reaches 500")
