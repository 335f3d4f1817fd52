"""Raw-wire helpers for the log side of transactions: transactional batches, WriteTxnMarkers,
read_committed fetches, and what a read_committed client makes of a fetch (Kafka's consumer
algorithm, written out here so a test can check the broker's aborted_transactions against it)."""

from __future__ import annotations

import time
from typing import Any

from samsa.protocol.batch import parse_header
from samsa.protocol.control import parse_marker
from samsa.protocol.records import build_batch, decode_records, scan_batches
from tests.rawclient import RawClient

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes], *, transactional: bool = True) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([(None, v, [], now) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=transactional)


def init_pid(c: RawClient) -> tuple[int, int]:
    resp = c.request(22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1})
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def produce(c: RawClient, topic: str, records: bytes, partition: int = 0, acks: int = -1) -> Any:
    resp = c.request(0, 9, {"acks": acks, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def write_markers(c: RawClient, pid: int, epoch: int, commit: bool, partitions: dict[str, list[int]],
                  coordinator_epoch: int = 0) -> dict[tuple[str, int], int]:
    """WriteTxnMarkers v1 with one marker; {(topic, partition): error code}."""
    resp = c.request(27, 1, {"markers": [{
        "producer_id": pid, "producer_epoch": epoch, "transaction_result": commit,
        "topics": [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()],
        "coordinator_epoch": coordinator_epoch}]})
    (m,) = resp.markers
    assert m.producer_id == pid
    return {(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}


def fetch(c: RawClient, topic: str, offset: int, isolation: int, partition: int = 0, max_wait: int = 0,
          version: int = 12) -> Any:
    resp = c.request(1, version, {
        "replica_id": -1, "max_wait": max_wait, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    return resp.responses[0].partitions[0]


def list_offset(c: RawClient, topic: str, isolation: int, partition: int = 0, timestamp: int = -1) -> int:
    resp = c.request(2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp,
                                        "current_leader_epoch": -1}]}]})
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def describe_producers(c: RawClient, topic: str, partition: int = 0) -> Any:
    resp = c.request(61, 0, {"topics": [{"name": topic, "partition_indexes": [partition]}]})
    return resp.topics[0].partitions[0]


def batches(data: bytes) -> list[tuple[Any, bytes]]:
    """(header, whole batch bytes) of every complete batch in a fetch's records."""
    out = []
    for pos, h in scan_batches(data, verify_crc=True, allow_partial_tail=True):
        out.append((h, data[pos:pos + h.size]))
    return out


def committed_values(records: bytes, aborted: list[Any] | None) -> list[bytes | None]:
    """The values a read_committed consumer hands the application from one fetch answer: it
    skips control batches and, from an aborted transaction's first offset until that
    producer's ABORT marker, the producer's transactional batches (Kafka's Fetcher)."""
    pending = sorted((a.first_offset, a.producer_id) for a in (aborted or []))
    skipping: set[int] = set()
    out: list[bytes | None] = []
    for h, raw in batches(records):
        while pending and pending[0][0] <= h.base_offset + h.last_offset_delta:
            skipping.add(pending.pop(0)[1])
        if h.is_control:
            marker = parse_marker(raw)
            if marker is not None and not marker.commit:
                skipping.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in skipping:
            continue
        out.extend(r.value for r in decode_records(raw, parse_header(raw)))
    return out


def all_values(records: bytes) -> list[bytes | None]:
    """What read_uncommitted hands the application: every record but the control ones."""
    out: list[bytes | None] = []
    for h, raw in batches(records):
        if not h.is_control:
            out.extend(r.value for r in decode_records(raw, h))
    return out


def control_offsets(records: bytes) -> list[int]:
    return [h.base_offset for h, _ in batches(records) if h.is_control]
