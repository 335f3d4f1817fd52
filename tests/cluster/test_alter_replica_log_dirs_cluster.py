"""AlterReplicaLogDirs on a follower (server/alter_log_dirs.py), on a 2-broker cluster on
ZooKeeper where broker 1 has two log dirs: its replica of a partition led by broker 0 moves to
the other dir while a producer writes with acks=all. The follower keeps replicating around the
move (its replication pauses only for the swap), ends byte-identical to the leader, and leads
with every acknowledged record after the leader's kill -9. One broker:
tests/broker/test_alter_replica_log_dirs.py."""

from __future__ import annotations

import re
import threading
import uuid

import pytest
from confluent_kafka import KafkaError, Message

from samsa.protocol.errors import ErrorCode
from tests.broker.test_alter_replica_log_dirs import alter, await_future_replica, moved
from tests.cluster.cluster import Cluster, produce_sync
from tests.compat.helpers import ck_producer
from tests.rawclient import RawClient

pytestmark = pytest.mark.slow


def test_a_follower_replica_moves_between_log_dirs_while_it_replicates(cluster) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = cluster(2, start=False, default_replication_factor=2, offsets_topic_replication_factor=2,
                         replica_alter_log_dirs_io_max_bytes_per_second=str(2 << 20))
    follower = c.broker(1)
    d1, d2 = follower.workdir / "d1", follower.workdir / "d2"
    follower.config_path.write_text(re.sub(r"(?m)^log\.dirs=.*$", f"log.dirs={d1},{d2}",
                                           follower.config_path.read_text()))
    c.start_all()
    topic = f"mv-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, assignment=[[0, 1]])  # broker 0 leads, broker 1 follows
    first = produce_sync(c.bootstrap, topic, [b"a%06d" % i + b"x" * 120 for i in range(20_000)])
    assert all(err is None for _, _, err in first)
    src, dest = (d1, d2) if (d1 / f"{topic}-0").is_dir() else (d2, d1)

    acked: list[tuple[int, bytes]] = []
    errors: list[KafkaError] = []
    stop = threading.Event()

    def produce() -> None:
        p = ck_producer(c.bootstrap)
        i = 0

        def done(err: KafkaError | None, msg: Message) -> None:
            (errors.append(err) if err is not None else acked.append((msg.offset(), msg.value())))

        while not stop.is_set():
            for _ in range(50):
                p.produce(topic, b"b%06d" % i, partition=0, on_delivery=done)
                i += 1
            p.poll(0.02)
        p.flush(30)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        with RawClient(follower.bootstrap) as rc:
            assert alter(rc, {str(dest): [(topic, 0)]}) == {(topic, 0): ErrorCode.NONE}
            await_future_replica(rc, topic, dest)
            c.wait_for(lambda: moved(rc, topic, dest, src), 60, "the follower's replica to move")
        n = len(acked)
        c.wait_for(lambda: len(acked) > n + 1000, 30, "more records acknowledged after the move")
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors[:3]
    c.wait_full_isr(topic)

    leader_copy = c.broker(0).log_dir / f"{topic}-0"

    def identical() -> bool:
        return (b"".join(f.read_bytes() for f in sorted(leader_copy.glob("*.log")))
                == b"".join(f.read_bytes() for f in sorted((dest / f"{topic}-0").glob("*.log"))))

    c.wait_for(identical, 30, "the follower's moved copy to be byte-identical to the leader's")
    c.kill9(0)
    assert c.wait_leader_change(topic, 0, 0) == 1
    got = c.consume_all(topic, bootstrap=follower.bootstrap, timeout=60)[0]
    assert [v for _, _, v in got] == [v for v, _, _ in first] + [v for _, v in sorted(acked)]
    assert "Traceback" not in follower.log_text()
