"""`samsa dump-log` without Java: segments built here, the lines Kafka's DumpLogSegments prints
for them (tests/compat/test_dump_log.py holds the tool against Kafka's own on a broker's files;
these pin the formats where no JDK is), the coordinator records' JSON, and the Java HashMap
order the summaries follow."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from samsa.cli import coordinator_json as cj
from samsa.cli import dump_log
from samsa.cli.java_order import hashmap_order, string_hash, topic_partition_hash
from samsa.coordinator import records as cr
from samsa.coordinator.txn_records import TxnLogValue, encode_key, encode_value
from samsa.protocol.batch import set_base_offset
from samsa.protocol.control import marker_batch
from samsa.protocol.records import build_batch

TS = 1_700_000_000_000


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    rc = dump_log.run(list(args))
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err.splitlines()


def segment(tmp_path: Path) -> Path:
    data = bytearray(build_batch([(b"k0", b"v0", [("h", b"1")], TS), (None, b"v1", [], TS + 1)], base_offset=5,
                                 producer_id=7, producer_epoch=0, base_sequence=0, partition_leader_epoch=2))
    marker = bytearray(marker_batch(7, 0, True, 3, TS + 2, partition_leader_epoch=2))
    set_base_offset(marker, 0, 7)
    path = tmp_path / "00000000000000000005.log"
    path.write_bytes(bytes(data + marker + data[:20]))  # (20 bytes of a batch cut short)
    return path


def test_a_segment_as_kafka_prints_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = segment(tmp_path)
    rc, out, err = run(capsys, "--files", str(path), "--print-data-log")
    assert rc == 0
    assert out[:2] == [f"Dumping {path}", "Log starting offset: 5"]
    first = out[2]
    assert first.startswith("baseOffset: 5 lastOffset: 6 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 "
                            "producerEpoch: 0 partitionLeaderEpoch: 2 isTransactional: false isControl: false "
                            "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000001 size: ")
    assert first.endswith(" magic: 2 compresscodec: none crc: " + first.split(" crc: ")[1].split()[0] + " isvalid: true")
    assert out[3:5] == [
        "| offset: 5 CreateTime: 1700000000000 keySize: 2 valueSize: 2 sequence: 0 headerKeys: [h] key: k0 payload: v0",
        "| offset: 6 CreateTime: 1700000000001 keySize: -1 valueSize: 2 sequence: 1 headerKeys: [] payload: v1"]
    assert " isTransactional: true isControl: true " in out[5]
    assert out[6] == ("| offset: 7 CreateTime: 1700000000002 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                      "endTxnMarker: COMMIT coordinatorEpoch: 3")
    assert out[7] == f"Found 20 invalid bytes at the end of {path.name}"
    # the first record of a segment follows offset -1, in Kafka 4.4's words
    assert err == [f"Non-consecutive offsets in {path}", "  -1 is followed by 5"]


def test_shallow_and_max_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = segment(tmp_path)
    _, out, _ = run(capsys, "--files", str(path))
    assert [line.split(" position: ")[0].split(" lastOffset")[0] for line in out[2:4]] == [
        "baseOffset: 5", "baseOffset: 7"]
    _, out, _ = run(capsys, "--files", str(path), "--max-bytes", "100")
    assert len(out) == 3  # the first batch only (85 bytes), and no "invalid bytes" line with a limit


def test_indexes_checked_against_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment(tmp_path)
    index = tmp_path / "00000000000000000005.index"
    index.write_bytes(struct.pack(">ii", 2, 0))  # offset 7 at position 0, where the batch ending at 6 is
    times = tmp_path / "00000000000000000005.timeindex"
    times.write_bytes(struct.pack(">qi", TS + 1, 1) + struct.pack(">qi", TS, 2))  # 7's is TS + 2, and decreasing
    rc, out, err = run(capsys, "--files", f"{index},{times}")
    assert rc == 0
    assert out == [f"Dumping {index}", "offset: 7 position: 0",
                   f"Dumping {times}", f"timestamp: {TS + 1} offset: 6", f"timestamp: {TS} offset: 7"]
    assert err == [f"Mismatches in :{index}", "  Index offset: 7, log offset: 6",
                   f"Found timestamp mismatch in :{times}", f"  Index timestamp: {TS}, log timestamp: {TS + 2}",
                   f"Found out of order timestamp in :{times}",
                   f"  Index timestamp: {TS}, Previously indexed timestamp: {TS + 1}"]
    # a broker's start-up check: the offsets pass, the decreasing timestamps do not (Kafka's words)
    rc, out, err = run(capsys, "--files", f"{index},{times}", "--index-sanity-check")
    assert out == [f"Dumping {index}", f"{index} passed sanity check.", f"Dumping {times}"]
    assert rc == 1 and err == [f"Corrupt time index found, time index file ({times}) has non-zero size but the "
                               f"last timestamp is {TS} which is less than the first timestamp {TS + 1}"]


def test_damage_is_one_line_and_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = segment(tmp_path)
    data = bytearray(path.read_bytes())
    struct.pack_into(">i", data, 8, 3)  # the first batch's length: impossible
    path.write_bytes(bytes(data))
    rc, out, err = run(capsys, "--files", str(path))
    assert rc == 1
    assert err[0] == (f"{path}: the batch at position 0 has a size of 3, smaller than the minimum record overhead "
                      "(14): the bytes from there on cannot be read")
    assert out[-1] == f"Found {len(data)} invalid bytes at the end of {path.name}"


# --- the coordinator records as JSON ---------------------------------------------------------------


def test_offsets_records(tmp_path: Path) -> None:
    key = cr.offset_commit_key("g1", "plain", 0)
    value = cr.offset_commit_value(cr.OffsetCommitValue(100, 0, "", 1795737226864))
    assert cj.coordinator_record(cj.OFFSETS_RECORDS, key, value, 1) == (
        '{"type":"1","data":{"group":"g1","topic":"plain","partition":0}}',
        '{"version":"3","data":{"offset":100,"leaderEpoch":0,"metadata":"","commitTimestamp":1795737226864}}')
    expiring = cr.offset_commit_value(cr.OffsetCommitValue(5, -1, "m", 10, 20))  # v1, with an expire timestamp
    assert cj.coordinator_record(cj.OFFSETS_RECORDS, key, expiring, 1)[1] == (
        '{"version":"1","data":{"offset":5,"metadata":"m","commitTimestamp":10,"expireTimestamp":20}}')
    subscription = struct.pack(">hih5sih", 3, 1, 5, b"plain", 0, 0)[:-2] + struct.pack(">iih", 0, -1, 0)
    assignment = struct.pack(">hih5sii", 3, 1, 5, b"plain", 1, 0) + struct.pack(">i", -1)
    member = cr.MemberMetadata("m-1", None, "rdkafka", "/127.0.0.1", 300000, 45000, subscription, assignment)
    group = cr.group_metadata_value(cr.GroupMetadataValue("consumer", 1, "range", "m-1", 1795737226711, (member,)))
    got_key, got_value = cj.coordinator_record(cj.OFFSETS_RECORDS, cr.group_metadata_key("g1"), group, 0)
    assert got_key == '{"type":"2","data":{"group":"g1"}}'
    assert got_value == (
        '{"version":"3","data":{"protocolType":"consumer","generation":1,"protocol":"range","leader":"m-1",'
        '"currentStateTimestamp":1795737226711,"members":[{"memberId":"m-1","groupInstanceId":null,'
        '"clientId":"rdkafka","clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,'
        '"subscription":{"topics":["plain"],"userData":"","ownedPartitions":[],"generationId":-1,"rackId":""},'
        '"assignment":{"assignedPartitions":[{"topic":"plain","partitions":[0]}],"userData":null}}]}}')
    assert cj.coordinator_record(cj.OFFSETS_RECORDS, cr.group_metadata_key("g1"), None, 0)[1] == "<DELETE>"
    assert cj.coordinator_record(cj.OFFSETS_RECORDS, b"\x00\x05rest", b"", 9) == (
        "Unknown record type 5 at offset 9, skipping.", None)
    bad = cj.coordinator_record(cj.OFFSETS_RECORDS, key, b"\x00\x03\x00", 4)
    assert bad[1] is None and bad[0].startswith("Error at offset 4, skipping. ")


def test_transaction_log_records() -> None:
    v0 = encode_value(TxnLogValue(4, 0, 60000, 2, {"txn": [0]}, 11, 10))
    assert cj.coordinator_record(cj.TRANSACTION_RECORDS, encode_key("tx-1"), v0, 0) == (
        '{"type":"0","data":{"transactionalId":"tx-1"}}',
        '{"version":"0","data":{"producerId":4,"producerEpoch":0,"transactionTimeoutMs":60000,'
        '"transactionStatus":"PrepareCommit","transactionPartitions":[{"topic":"txn","partitionIds":[0]}],'
        '"transactionLastUpdateTimestampMs":11,"transactionStartTimestampMs":10}}')
    v1 = encode_value(TxnLogValue(4, 1, 60000, 9, {}, 11, -1, previous_producer_id=3, client_transaction_version=2))
    assert cj.coordinator_record(cj.TRANSACTION_RECORDS, encode_key("tx-1"), v1, 0)[1] == (
        '{"version":"1","data":{"producerId":4,"previousProducerId":3,"producerEpoch":1,'
        '"transactionTimeoutMs":60000,"transactionStatus":"9","transactionPartitions":[],'
        '"transactionLastUpdateTimestampMs":11,"transactionStartTimestampMs":-1,"clientTransactionVersion":2}}')


def test_json_strings_as_jackson_writes_them() -> None:
    assert cj.json_string('a"b\\c\n\x01é/') == '"a\\"b\\\\c\\n\\u0001é/"'


# --- the order of Kafka's summaries --------------------------------------------------------------


def test_hashmap_order_is_javas() -> None:
    """Orders a java.util.HashMap gave for these keys (checked with a Java program)."""
    tps = [("alpha", p) for p in (0, 11, 5, 1, 2)]
    assert hashmap_order(tps, topic_partition_hash, computed=True) == [("alpha", p) for p in (5, 2, 0, 1, 11)]
    base = "/tmp/pytest-of-root/pytest-521/dump-broker0/data/plain-0/"
    paths = [base + f"{o:020d}.log" for o in (53, 120, 199)]
    assert [string_hash(p) for p in paths] == [-912062507, -113216842, 95498904]
    # (computeIfAbsent puts a new key first in its bucket: 53 and 120 share one)
    assert hashmap_order(paths, string_hash, computed=True) == [paths[1], paths[0], paths[2]]
    assert hashmap_order(paths, string_hash) == [paths[0], paths[1], paths[2]]
