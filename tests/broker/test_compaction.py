"""Log compaction through a real broker, with real clients (issue 20).

A topic with cleanup.policy=compact gets 300 keys x 60 versions, some keys ending in a
tombstone; the broker's cleaner (log.cleaner.backoff.ms short) compacts it, and a consumer
reading from the beginning must see exactly the latest record of each key, at the offset the
producer was told. The cleaned-up-to offset is awaited in the broker's log ("Cleaned T-0 up to
offset N"): the cleaner's own report of the event.
"""

from __future__ import annotations

import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from tests.brokerproc import BrokerProcess

KEYS, VERSIONS = 300, 60
SEGMENT = 64 * 1024  # small segments: the data spans many, and the pad below rolls the last one
CLEANER = {"log_cleaner_backoff_ms": "100"}


def keyed_records() -> Iterator[tuple[bytes, bytes | None]]:
    """KEYS x VERSIONS records, version-major; every 10th key ends with a tombstone."""
    for v in range(VERSIONS):
        for k in range(KEYS):
            last = v == VERSIONS - 1
            yield f"key-{k}".encode(), None if last and k % 10 == 0 else f"k{k}-v{v}-{'x' * 40}".encode()


def create_compacted(b: BrokerProcess, topic: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    cfg = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT), "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "3600000", **configs}
    admin.create_topics([NewTopic(topic, 1, 1, config=cfg)])[topic].result(30)


def produce_confluent(b: BrokerProcess, topic: str, records: list[tuple[bytes, bytes | None]],
                      **conf: Any) -> list[int]:
    """The offset of each record, from its delivery report."""
    offsets: list[int] = [-1] * len(records)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5, "acks": "all", "batch.size": 16384, **conf})

    def report(i: int) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            offsets[i] = msg.offset()
        return done

    for i, (k, v) in enumerate(records):
        p.produce(topic, key=k, value=v, on_delivery=report(i))
        p.poll(0)
    assert p.flush(60) == 0
    return offsets


def pad(b: BrokerProcess, topic: str) -> int:
    """Enough records of one key to roll the segment holding the data (the active segment is
    never cleaned); the offset after the data."""
    offsets = produce_confluent(b, topic, [(b"__pad__", b"p" * 1000)] * (2 * SEGMENT // 1000))
    return offsets[0]


def read_all(b: BrokerProcess, topic: str, start: int = 0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from `start` to the log end."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        c.assign([TopicPartition(topic, 0, start)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                assert m.error() is None, m.error()
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def cleaned_up_to(b: BrokerProcess, topic: str) -> int:
    found = re.findall(rf"Cleaned {re.escape(topic)}-0 up to offset (\d+)", b.log_text())
    return max(map(int, found), default=-1)


def await_cleaned(b: BrokerProcess, topic: str, offset: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while cleaned_up_to(b, topic) < offset:
        assert time.monotonic() < deadline, (
            f"{topic} not cleaned up to {offset} within {timeout} s (reached {cleaned_up_to(b, topic)}); "
            f"broker log:\n{b.log_text()[-4000:]}")
        time.sleep(0.1)  # the clean is reported in the broker's log; polled


def latest_per_key(records: list[tuple[bytes, bytes | None]], offsets: list[int]) -> dict[bytes, tuple[int, bytes | None]]:
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for (k, v), off in zip(records, offsets, strict=True):
        latest[k] = (off, v)
    return latest


@pytest.fixture
def cleaning_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(**CLEANER)


def test_compaction_keeps_the_latest_record_of_each_key_at_its_offset(cleaning_broker: BrokerProcess,
                                                                     topic_name: str) -> None:
    b = cleaning_broker
    create_compacted(b, topic_name)
    records = list(keyed_records())
    offsets = produce_confluent(b, topic_name, records)
    end_of_data = pad(b, topic_name)
    await_cleaned(b, topic_name, end_of_data)

    got = read_all(b, topic_name)
    data = [(o, k, v) for o, k, v in got if k != b"__pad__"]
    expected = latest_per_key(records, offsets)
    assert [(o, k, v) for o, k, v in data] == sorted((o, k, v) for k, (o, v) in expected.items())
    assert sum(1 for _, _, v in data if v is None) == KEYS // 10  # tombstones kept (delete.retention.ms 1 h)

    # A consumer positioned inside a removed range continues at the next record kept.
    removed = offsets[KEYS * 30 + 7]  # key-7, version 30: superseded
    after = read_all(b, topic_name, start=removed)
    assert after[0][0] == min(o for o, _, _ in got if o > removed)


def test_tombstones_go_after_delete_retention_ms(broker_factory: Callable[..., BrokerProcess],
                                                 topic_name: str) -> None:
    b = broker_factory(**CLEANER)
    create_compacted(b, topic_name, **{"delete.retention.ms": "500"})
    records = list(keyed_records())
    produce_confluent(b, topic_name, records)
    await_cleaned(b, topic_name, pad(b, topic_name))
    tombstones = [k for _, k, v in read_all(b, topic_name) if v is None]
    assert len(tombstones) == KEYS // 10  # the first clean keeps them (their horizon starts there)

    # Later cleans (more data makes the log dirty again) drop them once the horizon has passed.
    deadline = time.monotonic() + 90
    while True:
        more = [(f"key-{k}".encode(), b"again") for k in range(KEYS) if k % 10 != 0]
        produce_confluent(b, topic_name, more)
        await_cleaned(b, topic_name, pad(b, topic_name))
        got = read_all(b, topic_name)
        if not any(v is None for _, _, v in got):
            break
        assert time.monotonic() < deadline, "tombstones still there 90 s after their delete.retention.ms of 0.5 s"
    keys = {k for _, k, _ in got} - {b"__pad__"}
    assert keys == {f"key-{k}".encode() for k in range(KEYS) if k % 10 != 0}


def test_kafka_python_sees_the_same_compacted_log(cleaning_broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    b = cleaning_broker
    create_compacted(b, topic_name, **{"compression.type": "producer"})
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=5, compression_type="gzip", batch_size=16384)
    records = list(keyed_records())
    futures = [p.send(topic_name, key=k, value=v) for k, v in records]
    p.flush(60)
    offsets = [f.get(30).offset for f in futures]
    p.close()
    await_cleaned(b, topic_name, pad(b, topic_name))

    c = KafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000)
    tp = KTP(topic_name, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [(m.offset, m.key, m.value) for m in c if m.key != b"__pad__"]
    c.close()
    expected = latest_per_key(records, offsets)
    assert got == sorted((o, k, v) for k, (o, v) in expected.items())


def test_cleanup_policy_changes_on_a_live_topic(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory(**CLEANER, log_retention_check_interval_ms="200")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": str(SEGMENT),
                                                            "min.cleanable.dirty.ratio": "0.01"})])[topic_name].result(30)
    records = list(keyed_records())
    offsets = produce_confluent(b, topic_name, records)
    end = pad(b, topic_name)
    assert cleaned_up_to(b, topic_name) == -1  # cleanup.policy=delete: nothing compacts it

    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    await_cleaned(b, topic_name, end)
    data = [(o, k, v) for o, k, v in read_all(b, topic_name) if k != b"__pad__"]
    assert data == sorted((o, k, v) for k, (o, v) in latest_per_key(records, offsets).items())

    # and back: delete with a short retention removes whole segments, the cleaner leaves it alone
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}"})
    deadline = time.monotonic() + 60
    while c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)[0] < end:
        assert time.monotonic() < deadline, "retention did not delete the compacted segments"
        time.sleep(0.1)  # retention runs every log.retention.check.interval.ms; polled
    c.close()


def test_a_compacted_consumer_offsets_restores_every_group(broker_factory: Callable[..., BrokerProcess],
                                                           topic_name: str) -> None:
    """__consumer_offsets is cleaned by the same cleaner; after a restart every group's last
    commit is back."""
    b = broker_factory(**CLEANER, offsets_topic_num_partitions="1", offsets_topic_segment_bytes=str(SEGMENT))
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(30)
    groups = [f"g{i}-{uuid.uuid4().hex[:6]}" for i in range(20)]
    consumers = {g: Consumer({"bootstrap.servers": b.bootstrap, "group.id": g, "enable.auto.commit": False})
                 for g in groups}
    last: dict[str, list[int]] = {}
    for n in range(1, 41):
        for i, g in enumerate(groups):
            offs = [n * 10 + i + p for p in range(4)]
            consumers[g].commit(offsets=[TopicPartition(topic_name, p, o) for p, o in enumerate(offs)],
                                asynchronous=False)
            last[g] = offs
    for c in consumers.values():
        c.close()
    await_cleaned(b, "__consumer_offsets", 1)
    b.restart()
    for g in groups:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": g})
        got = c.committed([TopicPartition(topic_name, p) for p in range(4)], timeout=30)
        c.close()
        assert [t.offset for t in got] == last[g]


def test_aborted_records_go_whatever_their_key(cleaning_broker: BrokerProcess, topic_name: str) -> None:
    """Records of an aborted transaction are removed by the clean even where no later record of
    their key supersedes them; committed ones follow the latest-per-key rule."""
    b = cleaning_broker
    create_compacted(b, topic_name)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"tx-{topic_name}", "batch.size": 16384})
    p.init_transactions(30)
    for version, commit, keys in (("v1", True, range(100)), ("v2", False, range(100)), ("v3", True, range(50))):
        p.begin_transaction()
        for k in keys:
            p.produce(topic_name, key=f"key-{k}".encode(), value=f"{version}-{k}".encode())
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    await_cleaned(b, topic_name, pad(b, topic_name))
    for isolation in ("read_uncommitted", "read_committed"):
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                      "enable.auto.commit": False, "isolation.level": isolation})
        c.assign([TopicPartition(topic_name, 0, 0)])
        got: dict[bytes, bytes] = {}
        seen = 0
        while True:
            msgs = c.consume(1000, 3.0)
            if not msgs:
                break
            for m in msgs:
                if m.key() != b"__pad__":
                    got[m.key()] = m.value()
                    seen += 1
        c.close()
        assert seen == 100, f"{isolation}: {seen} records of the 100 keys (aborted or superseded ones remain)"
        assert got == {f"key-{k}".encode(): (f"v3-{k}" if k < 50 else f"v1-{k}").encode() for k in range(100)}


def test_a_corrupt_batch_makes_its_log_uncleanable_and_nothing_else(broker_factory: Callable[..., BrokerProcess],
                                                                     tmp_path: Any) -> None:
    import subprocess
    import sys

    b = broker_factory(**CLEANER)
    bad, good = "cmp-bad", "cmp-good"
    for t in (bad, good):
        create_compacted(b, t, **{"min.cleanable.dirty.ratio": "1.0"})  # (nothing cleanable yet)
        produce_confluent(b, t, list(keyed_records())[: KEYS * 10])
        pad(b, t)
    b.stop()
    seg = b.log_dir / f"{bad}-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[200] ^= 0xFF  # a record byte of the first batch: its CRC no longer matches
    seg.write_bytes(bytes(data))
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for t in (bad, good):
        res = ConfigResource("topic", t, incremental_configs=[
            ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
    await_cleaned(b, good, 1)
    deadline = time.monotonic() + 60
    while f"Marking {bad}-0 uncleanable" not in b.log_text():
        assert time.monotonic() < deadline, b.log_text()[-3000:]
        time.sleep(0.1)  # the cleaner's report, in the broker's log
    assert cleaned_up_to(b, bad) == -1
    out = subprocess.run([sys.executable, "-m", "samsa", "log-dirs", "--bootstrap-server", b.bootstrap, "--describe",
                          "--cleaner"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[1]: line for line in out.stdout.splitlines() if line.startswith("0 ")}
    assert "uncleanable:" in rows[f"{bad}-0"] and "CRC" in rows[f"{bad}-0"], out.stdout
    assert rows[f"{good}-0"].rstrip().endswith("ok"), out.stdout
    # the broker still serves the bad log's other records and takes new ones
    produce_confluent(b, bad, [(b"after", b"still works")])


def test_compact_and_delete_apply_both(broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    """cleanup.policy=compact,delete: the cleaner compacts it, and retention still deletes
    whole segments past retention.ms."""
    b = broker_factory(**CLEANER, log_retention_check_interval_ms="200")
    create_compacted(b, topic_name, **{"cleanup.policy": "compact,delete"})
    records = list(keyed_records())
    offsets = produce_confluent(b, topic_name, records)
    await_cleaned(b, topic_name, pad(b, topic_name))
    data = [(o, k, v) for o, k, v in read_all(b, topic_name) if k != b"__pad__"]
    assert data == sorted((o, k, v) for k, (o, v) in latest_per_key(records, offsets).items())
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}"})
    deadline = time.monotonic() + 60
    while c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)[0] <= offsets[-1]:
        assert time.monotonic() < deadline, "retention did not delete the compacted segments"
        time.sleep(0.1)  # retention runs every log.retention.check.interval.ms; polled
    c.close()


def _children(pid: int, marker: str) -> list[int]:
    """Live child processes of `pid` whose command line holds `marker`."""
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmdline = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # (state, ppid, ...) after the command's name
        if int(fields[1]) == pid and fields[0] != "Z" and marker in cmdline:
            found.append(int(d.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cleaner's child process is Linux's")
def test_a_clean_runs_in_a_child_that_gives_way_and_dies_with_the_broker(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    """Each clean runs in a child process at nice 10 under SCHED_IDLE, with a GIL of its own: the event loop
    never waits for it. A kill -9 of the broker takes the child with it (no orphan writing
    beside the restarted broker's recovery), and the restarted broker serves every key's latest
    record at its offset, and nothing but records produced at those offsets."""
    b = broker_factory(**CLEANER, log_cleaner_io_max_bytes_per_second="50000")  # (a clean of ~1 minute)
    create_compacted(b, topic_name)
    records = list(keyed_records())
    offsets = produce_confluent(b, topic_name, records)
    pad(b, topic_name)
    assert b.proc is not None
    deadline = time.monotonic() + 60
    while not (child := _children(b.proc.pid, "samsa.server.clean_process")):
        assert time.monotonic() < deadline, f"no cleaner process started; broker log:\n{b.log_text()[-3000:]}"
        time.sleep(0.05)  # another process's start: polled

    def priority() -> tuple[int, int]:  # (nice, scheduling policy), once the child has set them
        stat = (Path("/proc") / str(child[0]) / "stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[16]), int(stat[38])

    while priority()[1] != os.SCHED_IDLE and time.monotonic() < deadline:
        time.sleep(0.05)  # the child sets its own priority as it starts: polled
    assert priority() == (10, os.SCHED_IDLE)
    b.kill9()
    deadline = time.monotonic() + 10
    while _alive(child[0]):
        assert time.monotonic() < deadline, "the cleaner process outlived the broker"
        time.sleep(0.05)  # its death signal: polled

    b.start()
    produced = {o: (k, v) for (k, v), o in zip(records, offsets, strict=True)}
    data = [(o, k, v) for o, k, v in read_all(b, topic_name) if k != b"__pad__"]
    assert all(produced[o] == (k, v) for o, k, v in data)
    assert {(o, k, v) for k, (o, v) in latest_per_key(records, offsets).items()} <= set(data)
