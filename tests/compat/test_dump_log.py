"""`samsa dump-log` beside Kafka's own DumpLogSegments (kafka-dump-log.sh, Kafka 4.4) on the same
files: a log directory written by a real Samsa broker, then edited and damaged copies of it.

The broker writes every kind of file the tool reads: several segments of a topic (small
segment.bytes and index.interval.bytes, so .index and .timeindex have many entries), the five
codecs, null keys and values, headers, non-UTF-8 bytes; a LogAppendTime topic; committed and
aborted transactions (control records, a .txnindex, producer snapshots); a consumer group's
commits, a transactional offset commit and the group's deletion in __consumer_offsets; and
__transaction_state. It is stopped before the dumps, so the indexes are on disk.

Each comparison runs both tools over a list of files with the same options and asserts the
same stdout and stderr (Kafka's summaries of what it found go to stderr). Where Kafka's tool
stops with a stack trace (damage it does not expect), Samsa's prints one line per problem and
exits 1: those cases are checked on Samsa's side alone.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.brokerproc import BrokerProcess
from tests.compat.kafkatools import KafkaTools

TS = 1_700_000_000_000
BROKER_CONFIG = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
                 "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.min.isr": "1"}


def _fill(bootstrap: str) -> None:
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([
        NewTopic("plain", 1, 1, config={"segment.bytes": "2000", "index.interval.bytes": "300"}),
        NewTopic("appendtime", 1, 1, config={"message.timestamp.type": "LogAppendTime"}),
        NewTopic("txn", 1, 1),
    ])
    for f in fs.values():
        f.result(20)
    for n, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        p = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec, "linger.ms": 5,
                      "batch.num.messages": 13, "enable.idempotence": n % 2 == 1})
        for i in range(40):
            key = None if i % 7 == 0 else f"k{i}".encode()
            value = None if i % 11 == 0 else (f"{codec}-{i}-" + "x" * (i % 30) + " é\t\"q\"").encode()
            if i == 3:
                value = b"\xff\xfe bad utf-8 \xc3"
            headers = [("h1", b"v"), ("h2", None)] if i % 5 == 0 else None
            p.produce("plain", value=value, key=key, partition=0, headers=headers, timestamp=TS + 40 * n + i)
        assert p.flush(20) == 0
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        p.produce("appendtime", value=f"a{i}".encode(), partition=0, timestamp=TS + i)
        p.flush(20)
    tp = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-dump"})
    tp.init_transactions(20)
    for n, commit in [(3, True), (2, False), (4, True)]:
        tp.begin_transaction()
        for i in range(n):
            tp.produce("txn", value=f"t{i}".encode(), key=b"k", partition=0)
        tp.flush(20)
        (tp.commit_transaction if commit else tp.abort_transaction)(20)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dump-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["plain"])
    got = 0
    for _ in range(200):
        if got >= 50:
            break
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    c.close()
    # a transactional offset commit (a transactional batch and its marker in __consumer_offsets)
    tp.begin_transaction()
    tp.produce("txn", value=b"with-offsets", partition=0)
    tp.send_offsets_to_transaction([TopicPartition("plain", 0, 77)],
                                   Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-group"})
                                   .consumer_group_metadata(), 20)
    tp.commit_transaction(20)
    a.delete_consumer_groups(["dump-group"])["dump-group"].result(20)  # tombstones


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    b = BrokerProcess(tmp_path_factory.mktemp("dump-broker"), BROKER_CONFIG)
    b.start()
    try:
        _fill(b.bootstrap)
    finally:
        assert b.stop() == 0
    yield b.log_dir


def files(d: Path, *patterns: str) -> list[str]:
    return sorted(str(p) for pattern in patterns for p in d.glob(pattern))


def samsa_dump(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa", "dump-log", *args], capture_output=True, text=True,
                          timeout=120)


def kafka_dump(tools: KafkaTools, *args: str) -> subprocess.CompletedProcess[str]:
    java, *rest = tools.command("kafka-dump-log", *args)
    # (the records hold UTF-8 text: Java 17 writes stdout in the locale's charset otherwise)
    cmd = [java, "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8", *rest]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def same_as_kafka(tools: KafkaTools, *args: str) -> subprocess.CompletedProcess[str]:
    ours, theirs = samsa_dump(*args), kafka_dump(tools, *args)
    assert theirs.returncode == 0, theirs.stderr
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == theirs.stdout.splitlines()
    assert ours.stderr.splitlines() == theirs.stderr.splitlines()
    return ours


def test_segments_indexes_and_snapshots_as_kafka_prints_them(log_dir: Path, kafka_tools: KafkaTools) -> None:
    plain = files(log_dir / "plain-0", "*.log", "*.index", "*.timeindex", "*.snapshot")
    others = files(log_dir / "appendtime-0", "*.log") + files(log_dir / "txn-0", "*.log", "*.txnindex", "*.snapshot")
    assert len(files(log_dir / "plain-0", "*.log")) >= 3  # rolled: segments with a base offset other than 0
    assert files(log_dir / "txn-0", "*.txnindex")
    out = same_as_kafka(kafka_tools, "--files", ",".join(plain + others), "--print-data-log")
    assert "endTxnMarker: ABORT coordinatorEpoch: 0" in out.stdout
    assert "compresscodec: zstd" in out.stdout and "LogAppendTime: " in out.stdout
    assert "Non-consecutive offsets in" in out.stderr  # (a segment's first offset follows -1, in Kafka's words)
    # shallow, and the batches of the first --max-bytes bytes only
    same_as_kafka(kafka_tools, "--files", ",".join(plain + others))
    same_as_kafka(kafka_tools, "--files", ",".join(files(log_dir / "plain-0", "*.log")), "--max-bytes", "1500",
                  "--deep-iteration")


def test_index_checks_as_kafka(log_dir: Path, kafka_tools: KafkaTools) -> None:
    indexes = files(log_dir, "*/*.index", "*/*.timeindex")
    out = same_as_kafka(kafka_tools, "--files", ",".join(indexes), "--verify-index-only")
    # (nothing but the file names, and which indexes have no entries)
    assert [line for line in out.stdout.splitlines() if not line.endswith(" is empty.")] == [
        f"Dumping {f}" for f in indexes]
    out = same_as_kafka(kafka_tools, "--files", ",".join(indexes), "--index-sanity-check")
    assert any(line.endswith("passed sanity check.") for line in out.stdout.splitlines())


def test_coordinator_records_as_kafka_decodes_them(log_dir: Path, kafka_tools: KafkaTools) -> None:
    out = same_as_kafka(kafka_tools, "--files", ",".join(files(log_dir / "__consumer_offsets-0", "*.log")),
                        "--offsets-decoder")
    assert '"protocolType":"consumer"' in out.stdout and "payload: <DELETE>" in out.stdout
    assert '"subscription":{"topics":["plain"]' in out.stdout
    out = same_as_kafka(kafka_tools, "--files", ",".join(files(log_dir / "__transaction_state-0", "*.log")),
                        "--transaction-log-decoder")
    assert '"transactionStatus":"CompleteAbort"' in out.stdout


# --- damaged copies -----------------------------------------------------------------------------


def _copy_segment(src: Path, dst: Path, base: str) -> dict[str, Path]:
    dst.mkdir(parents=True, exist_ok=True)
    out = {}
    for suffix in (".log", ".index", ".timeindex"):
        if (src / f"{base}{suffix}").exists():
            out[suffix] = dst / f"{base}{suffix}"
            shutil.copy(src / f"{base}{suffix}", out[suffix])
    return out


def _batches(data: bytes) -> list[tuple[int, int]]:
    """(position, size) of each batch."""
    out, pos = [], 0
    while pos + 12 <= len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((pos, size))
        pos += size
    return out


def test_damage_kafka_reports_is_reported_alike(log_dir: Path, kafka_tools: KafkaTools, tmp_path: Path) -> None:
    """Index entries that point at the wrong batch, time index entries with the wrong or
    decreasing timestamps, a batch removed from the middle (offsets jump), a CRC that no longer
    holds and bytes after the last whole batch: findings Kafka's tool reports without stopping."""
    src = log_dir / "plain-0"
    base = sorted(p.stem for p in src.glob("*.index") if p.stat().st_size >= 16)[0]
    seg = _copy_segment(src, tmp_path / "a" / "plain-0", base)  # the indexes damaged
    index = bytearray(seg[".index"].read_bytes())
    struct.pack_into(">i", index, 0, struct.unpack_from(">i", index, 0)[0] + 1)  # first entry: wrong offset
    seg[".index"].write_bytes(bytes(index))
    times = bytearray(seg[".timeindex"].read_bytes())
    struct.pack_into(">q", times, 0, 5)  # first entry: a timestamp no record has
    if len(times) >= 24:
        struct.pack_into(">q", times, 12, 4)  # second: one lower than the first
    seg[".timeindex"].write_bytes(bytes(times))
    damaged = _copy_segment(src, tmp_path / "b" / "plain-0", base)[".log"]  # the log damaged
    log = bytearray(damaged.read_bytes())
    pos, size = _batches(bytes(log))[1]
    del log[pos:pos + size]  # the second batch: its offsets are missing now
    log[17] ^= 0xFF  # the first batch's stored CRC: it no longer holds
    log += log[:30]  # the start of a batch, not a whole one
    damaged.write_bytes(bytes(log))
    out = same_as_kafka(kafka_tools, "--files", ",".join(str(p) for p in (damaged, seg[".index"], seg[".timeindex"])),
                        "--deep-iteration")
    assert "isvalid: false" in out.stdout and "Found 30 invalid bytes at the end of" in out.stdout
    assert f"Mismatches in :{seg['.index']}" in out.stderr
    assert f"Found timestamp mismatch in :{seg['.timeindex']}" in out.stderr
    assert f"Non-consecutive offsets in {damaged}" in out.stderr

    # a snapshot whose CRC fails: Kafka prints why and goes on
    snap = sorted(src.glob("*.snapshot"))[-1]
    bad = tmp_path / "a" / "plain-0" / snap.name
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0x01
    bad.write_bytes(bytes(data))
    ours, theirs = samsa_dump("--files", str(bad)), kafka_dump(kafka_tools, "--files", str(bad))
    assert ours.stdout == theirs.stdout and ours.stderr == theirs.stderr
    assert "Snapshot is corrupt (CRC is no longer valid)" in ours.stderr and ours.returncode == 1


def test_damage_kafka_stops_at_is_one_line_each(log_dir: Path, tmp_path: Path) -> None:
    """What makes Kafka's tool end with a stack trace: each is one line naming the file here, the
    dump goes on with the next batch or file, and the exit status is 1."""
    src = log_dir / "plain-0"
    base = sorted(p.stem for p in src.glob("*.log"))[0]
    d = tmp_path / "plain-0"
    seg = _copy_segment(src, d, base)
    log = bytearray(seg[".log"].read_bytes())
    (p0, s0), (p1, _s1) = _batches(bytes(log))[:2]
    broken_size = d / "00000000000000000100.log"  # the second batch's length field says 3
    impossible = bytearray(log)
    struct.pack_into(">i", impossible, p1 + 8, 3)
    broken_size.write_bytes(bytes(impossible))
    broken_records = d / "00000000000000000200.log"  # a compressed batch whose body is garbage
    data = bytearray(log)
    codec_batch = next(p for p, s in _batches(bytes(log)) if struct.unpack_from(">h", log, p + 21)[0] & 7)
    data[codec_batch + 61:codec_batch + 71] = b"\x00" * 10
    broken_records.write_bytes(bytes(data))
    orphan_index = tmp_path / "other" / "00000000000000000300.index"  # no .log beside it
    orphan_index.parent.mkdir()
    orphan_index.write_bytes(struct.pack(">ii", 1, 0))
    no_offset = d / "segment.log"
    no_offset.write_bytes(bytes(log[p0:p0 + s0]))
    txn = d / "00000000000000000000.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 7, 1, 2, 3) + b"\x00\x05")
    args = [str(p) for p in (broken_size, broken_records, orphan_index, no_offset, txn, seg[".log"])]
    r = samsa_dump("--files", ",".join(args), "--deep-iteration")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    problems = r.stderr.splitlines()
    assert any(str(broken_size) in p and "size of 3" in p for p in problems), problems
    assert any(str(broken_records) in p and "cannot be read" in p for p in problems), problems
    assert any(str(orphan_index.with_suffix(".log")) in p and "cannot open" in p for p in problems), problems
    assert any(str(no_offset) in p and "base offset" in p for p in problems), problems
    assert any(str(txn) in p and "2 bytes at the end" in p for p in problems), problems
    # every file still dumped, the undamaged one whole
    assert [line for line in r.stdout.splitlines() if line.startswith("Dumping ")] == [f"Dumping {a}" for a in args]
    assert "version: 0 producerId: 7 firstOffset: 1 lastOffset: 2 lastStableOffset: 3" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1].startswith("| offset: ")


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    r = samsa_dump()
    assert r.returncode == 2 and "--files" in r.stderr and "Traceback" not in r.stderr
    missing = tmp_path / "00000000000000000000.log"
    r = samsa_dump("--files", str(missing))
    assert r.returncode == 1 and r.stderr.strip() == f"{missing}: cannot open: No such file or directory"
    assert r.stdout.splitlines() == [f"Dumping {missing}", "Log starting offset: 0"]
    r = samsa_dump("--files", str(tmp_path / "notes.txt"))
    assert r.returncode == 0 and r.stderr.strip() == f"Ignoring unknown file {tmp_path / 'notes.txt'}"
