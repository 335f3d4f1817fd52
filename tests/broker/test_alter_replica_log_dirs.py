"""AlterReplicaLogDirs (34): a replica moves to another log dir of its broker while it stays
online (server/alter_log_dirs.py, storage/log_move.py), seen from outside: real brokers over
TCP, confluent-kafka producers and consumers, DescribeLogDirs (the future replica while it
moves), the directories on disk, a restart and a kill -9 mid-move. Kafka's own tools driving a
move: tests/compat/test_kafka_tools.py::test_reassign_partitions_moves_a_replica_between_log_dirs."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, OffsetSpec

from samsa.protocol.errors import ErrorCode
from tests.broker.test_bad_input import latest_offset, produce
from tests.broker.test_idempotence import init_producer_id, seq_batch
from tests.brokerproc import BrokerProcess
from tests.compat.helpers import ck_admin, ck_create_topic, ck_list_offset, ck_producer, ck_read, wait_until
from tests.rawclient import RawClient

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
TP = tuple[str, int]


def two_dir_broker(tmp_path: Path, **overrides: str) -> tuple[BrokerProcess, Path, Path]:
    a, b = tmp_path / "dir-a", tmp_path / "dir-b"
    props = {"log.dirs": f"{a},{b}", "log.segment.bytes": str(1 << 20)}
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    broker = BrokerProcess(tmp_path / "broker", props)
    broker.start()
    return broker, a, b


def alter(c: RawClient, moves: dict[str, list[TP]], version: int = 2) -> dict[TP, int]:
    """AlterReplicaLogDirs: {log dir: [(topic, partition)]} -> {(topic, partition): error code}."""
    dirs = []
    for path, tps in moves.items():
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        dirs.append({"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    resp = c.request(34, version, {"dirs": dirs})
    return {(r.topic_name, p.partition_index): p.error_code for r in resp.results for p in r.partitions}


def replicas(c: RawClient, topic: str, partition: int = 0) -> list[tuple[str, bool, int, int]]:
    """DescribeLogDirs of one partition: (log dir, is future, size, offset lag) of each replica."""
    resp = c.request(35, 4, {"topics": [{"topic": topic, "partitions": [partition]}]})
    assert resp.error_code == 0
    return sorted((r.log_dir, p.is_future_key, p.partition_size, p.offset_lag) for r in resp.results
                  for t in r.topics if t.name == topic for p in t.partitions if p.partition_index == partition)


def partition_dirs(log_dir: Path, topic: str, partition: int = 0) -> list[str]:
    """The entries of `log_dir` that belong to the partition (its dir, a future copy, a doomed one)."""
    name = f"{topic}-{partition}"
    return sorted(e.name for e in log_dir.iterdir() if e.name == name or e.name.startswith(name + "."))


def moved(c: RawClient, topic: str, dest: Path, src: Path, partition: int = 0) -> bool:
    """The replica is in `dest` (DescribeLogDirs, no future replica left) and on disk only there."""
    listed = replicas(c, topic, partition)
    return ([r[:2] for r in listed] == [(str(dest), False)] and listed[0][3] == 0
            and partition_dirs(dest, topic, partition) == [f"{topic}-{partition}"]
            and partition_dirs(src, topic, partition) == [])


def current_dir(a: Path, b: Path, topic: str) -> tuple[Path, Path]:
    """(the log dir holding the partition, the other one)."""
    return (a, b) if (a / f"{topic}-0").is_dir() else (b, a)


def produce_all(bootstrap: str | Producer, topic: str, n: int, tag: str, **conf: Any) -> list[tuple[int, bytes]]:
    """Produce n records (acks=all; with a new producer, or the one given) and wait for them:
    (offset, value) of each, in order."""
    p = ck_producer(bootstrap, **conf) if isinstance(bootstrap, str) else bootstrap
    out: list[tuple[int, bytes]] = []
    errors: list[KafkaError] = []

    def done(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            out.append((msg.offset(), msg.value()))

    for i in range(n):
        p.produce(topic, f"{tag}-{i:07d}-".encode() + b"x" * 100, partition=0, on_delivery=done)
        if i % 1000 == 999:
            p.poll(0)
    assert p.flush(30) == 0 and not errors, errors[:3]
    return out


def read_all(bootstrap: str, topic: str, n: int) -> list[tuple[int, bytes]]:
    return [(m.offset(), m.value()) for m in ck_read(bootstrap, topic, n, timeout=60)]


class BackgroundProducer:
    """Produces (acks=all) in a thread at a modest pace until stopped; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, purge: bool = False, **conf: Any) -> None:
        self.producer = ck_producer(bootstrap, **conf)
        self.purge = purge  # at the end, give up what is not acknowledged (the broker was killed)
        self.topic = topic
        self.acked: list[tuple[int, bytes]] = []
        self.errors: list[KafkaError] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append((msg.offset(), msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for _ in range(50):
                self.producer.produce(self.topic, f"bg-{i:07d}".encode(), partition=0, on_delivery=self._done)
                i += 1
            self.producer.poll(0.02)  # (about 2,500 records a second: the move keeps up with it)
        if self.purge:
            self.producer.purge()  # (nothing in flight is sent again to the restarted broker either)
        self.producer.flush(30)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def wait_for_more(self, than: int) -> None:
        wait_until(lambda: len(self.acked) > than, what="more acknowledged records")


def await_future_replica(c: RawClient, topic: str, dest: Path) -> list[tuple[str, bool, int, int]]:
    """DescribeLogDirs of the partition once it lists a future replica (with data) in `dest`."""
    def listed() -> list[tuple[str, bool, int, int]] | None:
        rows = replicas(c, topic)
        return rows if any(d == str(dest) and future and size > 0 for d, future, size, _ in rows) else None

    rows = wait_until(listed, what=f"a future replica of {topic}-0 in {dest}")
    assert isinstance(rows, list)
    return rows


def test_a_replica_moves_to_the_other_log_dir_while_clients_produce(tmp_path: Path, topic_name: str) -> None:
    b, a_dir, b_dir = two_dir_broker(tmp_path, **{THROTTLE: str(2 << 20)})  # (about 2 s for 4 MB)
    try:
        ck_create_topic(b.bootstrap, topic_name)
        first = produce_all(b.bootstrap, topic_name, 30_000, "before")
        src, dest = current_dir(a_dir, b_dir, topic_name)
        with RawClient(b.bootstrap) as c, BackgroundProducer(b.bootstrap, topic_name) as bg:
            bg.wait_for_more(0)
            assert alter(c, {str(dest): [(topic_name, 0)]}) == {(topic_name, 0): ErrorCode.NONE}
            listed = {(d, future): (size, lag) for d, future, size, lag in await_future_replica(c, topic_name, dest)}
            assert set(listed) == {(str(src), False), (str(dest), True)}  # (listed while it moves, with its lag)
            assert listed[(str(src), False)][0] > listed[(str(dest), True)][0] and listed[(str(dest), True)][1] > 0
            wait_until(lambda: moved(c, topic_name, dest, src), timeout=60, what="the move to end")
            during = len(bg.acked)
            bg.wait_for_more(during)  # the producer carries on after the swap, into the new dir
        assert not bg.errors, bg.errors[:3]
        acked = sorted(first + bg.acked)
        assert [o for o, _ in acked] == list(range(len(acked)))  # every acknowledged offset, once
        assert read_all(b.bootstrap, topic_name, len(acked)) == acked  # same offsets, same values
        assert (dest / f"{topic_name}-0" / "00000000000000000000.log").exists()
        assert "Moved" in b.log_text()
    finally:
        b.close()


def transactions(bootstrap: str, topic: str) -> None:
    """100 records in an aborted transaction, then 100 in a committed one."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"mover-{topic}", "linger.ms": 5})
    p.init_transactions(20)
    for outcome in ("aborted", "committed"):
        p.begin_transaction()
        for i in range(100):
            p.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        p.flush(20)
        (p.abort_transaction if outcome == "aborted" else p.commit_transaction)(20)


def test_a_moved_log_keeps_its_start_offset_transactions_and_producers_through_a_restart(
        tmp_path: Path, topic_name: str) -> None:
    b, a_dir, b_dir = two_dir_broker(tmp_path)
    try:
        ck_create_topic(b.bootstrap, topic_name)
        idempotent = ck_producer(b.bootstrap, **{"enable.idempotence": True})  # (one producer id throughout)
        first = produce_all(idempotent, topic_name, 5_000, "before")
        transactions(b.bootstrap, topic_name)  # (5000..5099 aborted, marker, 5101..5200 committed, marker)
        admin = ck_admin(b.bootstrap)
        deleted = admin.delete_records([TopicPartition(topic_name, 0, 2_501)])  # (inside a batch, most likely)
        assert next(iter(deleted.values())).result(20).low_watermark == 2_501
        src, dest = current_dir(a_dir, b_dir, topic_name)
        with RawClient(b.bootstrap) as c:
            pid, epoch = init_producer_id(c)
            assert produce(c, topic_name, seq_batch(pid, epoch, 0)).base_offset == 5_202
            assert alter(c, {str(dest): [(topic_name, 0)]}) == {(topic_name, 0): ErrorCode.NONE}
            wait_until(lambda: moved(c, topic_name, dest, src), what="the move to end")
            retry = produce(c, topic_name, seq_batch(pid, epoch, 0))  # (the producer state moved with the log)
            assert (retry.error_code, retry.base_offset, latest_offset(c, topic_name)) == (0, 5_202, 5_204)
        assert ck_list_offset(b.bootstrap, topic_name, OffsetSpec.earliest()) == 2_501
        after = produce_all(idempotent, topic_name, 1_000, "after")
        assert [o for o, _ in after] == list(range(5_204, 6_204))
        assert b.stop() == 0
        b.start()
        with RawClient(b.bootstrap) as c:
            assert moved(c, topic_name, dest, src)
            assert produce(c, topic_name, seq_batch(pid, epoch, 0)).base_offset == 5_202
        assert ck_list_offset(b.bootstrap, topic_name, OffsetSpec.earliest()) == 2_501
        again = produce_all(idempotent, topic_name, 1_000, "again")  # (its sequence numbers go on)
        assert [o for o, _ in again] == list(range(6_204, 7_204))
        committed = [m.value() for m in ck_read(b.bootstrap, topic_name, 4_601, start=2_501,
                                                 **{"isolation.level": "read_committed"})]
        assert committed == ([v for _, v in first[2_501:]] + [f"committed-{i}".encode() for i in range(100)]
                             + [b"r0", b"r1"] + [v for _, v in after + again])
        everything = [m.value() for m in ck_read(b.bootstrap, topic_name, 4_701, start=2_501,
                                                  **{"isolation.level": "read_uncommitted"})]
        assert everything[2_499:2_601] == [f"aborted-{i}".encode() for i in range(100)] + [b"committed-0",
                                                                                          b"committed-1"]
    finally:
        b.close()


def test_errors_and_changes_of_destination(tmp_path: Path, topic_name: str) -> None:
    b, a_dir, b_dir = two_dir_broker(tmp_path, **{THROTTLE: str(100 << 10)})  # (slow: a move stays in progress)
    try:
        ck_create_topic(b.bootstrap, topic_name)
        produce_all(b.bootstrap, topic_name, 5_000, "x")  # (about 700 KB: 7 s at that rate)
        src, dest = current_dir(a_dir, b_dir, topic_name)
        tp = (topic_name, 0)
        with RawClient(b.bootstrap) as c:
            # not a log dir of this broker (absolute paths compared), not a hosted partition
            assert alter(c, {str(tmp_path / "elsewhere"): [tp]}) == {tp: ErrorCode.LOG_DIR_NOT_FOUND}
            assert alter(c, {dest.name: [tp]}) == {tp: ErrorCode.LOG_DIR_NOT_FOUND}
            assert alter(c, {str(dest): [("no-such-topic", 0), (topic_name, 7)]}) == {
                ("no-such-topic", 0): ErrorCode.REPLICA_NOT_AVAILABLE, (topic_name, 7): ErrorCode.REPLICA_NOT_AVAILABLE}
            # already there: nothing happens (v1 too)
            assert alter(c, {str(src): [tp]}, version=1) == {tp: ErrorCode.NONE}
            assert replicas(c, topic_name)[0][:2] == (str(src), False) and len(replicas(c, topic_name)) == 1
            assert partition_dirs(dest, topic_name) == []
            # moving; asked again for the same dir: nothing new; then back where it is: the move stops
            assert alter(c, {str(dest): [tp]}) == {tp: ErrorCode.NONE}
            await_future_replica(c, topic_name, dest)
            assert alter(c, {str(dest): [tp]}) == {tp: ErrorCode.NONE}
            assert alter(c, {str(src): [tp]}) == {tp: ErrorCode.NONE}
            wait_until(lambda: partition_dirs(dest, topic_name) == [], what="the abandoned copy to be deleted")
            assert [r[:2] for r in replicas(c, topic_name)] == [(str(src), False)]
            assert partition_dirs(src, topic_name) == [f"{topic_name}-0"]
            # REPLICA_NOT_AVAILABLE remembered the dir, as Kafka does: the partition is created there
            other = topic_name + "-later"
            assert alter(c, {str(src): [(other, 0)]}) == {(other, 0): ErrorCode.REPLICA_NOT_AVAILABLE}
            ck_create_topic(b.bootstrap, other)
            assert [r[:2] for r in replicas(c, other)] == [(str(src), False)]
    finally:
        b.close()


def test_kill9_during_a_move_loses_nothing_and_keeps_one_live_copy(tmp_path: Path, topic_name: str) -> None:
    b, a_dir, b_dir = two_dir_broker(tmp_path, **{THROTTLE: str(100 << 10)})
    try:
        ck_create_topic(b.bootstrap, topic_name)
        acked = produce_all(b.bootstrap, topic_name, 10_000, "x")  # (1.4 MB: 14 s at that rate)
        src, dest = current_dir(a_dir, b_dir, topic_name)
        with RawClient(b.bootstrap) as c, BackgroundProducer(b.bootstrap, topic_name, purge=True) as bg:
            assert alter(c, {str(dest): [(topic_name, 0)]}) == {(topic_name, 0): ErrorCode.NONE}
            await_future_replica(c, topic_name, dest)
            assert any(n.endswith("-future") for n in partition_dirs(dest, topic_name))
            bg.wait_for_more(len(bg.acked))
            b.kill9()
        acked = sorted(acked + bg.acked)  # (whatever was acknowledged before the kill)
        assert [o for o, _ in acked] == list(range(len(acked)))
        b.start()
        assert partition_dirs(src, topic_name) == [f"{topic_name}-0"]  # the one live copy
        assert f"{topic_name}-0" not in partition_dirs(dest, topic_name)
        assert read_all(b.bootstrap, topic_name, len(acked)) == acked
        with RawClient(b.bootstrap) as c:
            # the move starts again; let it run at full speed (a dynamic broker config, as in Kafka)
            await_future_replica(c, topic_name, dest)
            set_broker_config(b.bootstrap, THROTTLE, str(2**63 - 1))
            wait_until(lambda: moved(c, topic_name, dest, src), timeout=60, what="the resumed move to end")
        assert read_all(b.bootstrap, topic_name, len(acked)) == acked
    finally:
        b.close()


def set_broker_config(bootstrap: str, key: str, value: str) -> None:
    admin = ck_admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(20)
