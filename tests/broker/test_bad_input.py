"""Bad input over a real TCP connection: the right error, nothing appended, the broker stays up."""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest

from samsa.handlers import api_versions
from samsa.protocol.batch import HEADER_SIZE
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import encode_request
from samsa.protocol.records import build_batch, seal_batch
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

PRODUCE_V = 9
LIST_OFFSETS_V = 7
# (v3+ names the client software; Kafka refuses an empty name with INVALID_REQUEST)
API_VERSIONS_V3 = {"client_software_name": "t", "client_software_version": "1"}


def create_topic(c: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    resp = c.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                          "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                             "timeout": 5000})
    assert resp.topics[0].error_code == 0, resp


def produce(c: RawClient, topic: str, records: bytes | bytearray, partition: int = 0) -> object:
    resp = c.request(0, PRODUCE_V, {"acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": bytes(records)}]}]})
    return resp.responses[0].partition_responses[0]


def latest_offset(c: RawClient, topic: str, partition: int = 0) -> int:
    resp = c.request(2, LIST_OFFSETS_V, {"replica_id": -1, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}]})
    return int(resp.topics[0].partitions[0].offset)


def batch(n: int = 3, size: int = 10) -> bytearray:
    return bytearray(build_batch([(b"k", b"v" * size, [], int(time.time() * 1000))] * n))


def broker_alive(b: BrokerProcess) -> bool:
    with RawClient(b.bootstrap) as c:
        return c.request(18, 3, {"client_software_name": "t", "client_software_version": "1"}).error_code == 0


def test_bad_crc_is_corrupt_message_and_nothing_is_appended(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        good = produce(c, topic_name, batch())
        assert good.error_code == 0 and latest_offset(c, topic_name) == 3
        bad = batch()
        bad[-1] ^= 0xFF  # flip a byte inside the CRC'd range
        resp = produce(c, topic_name, bad)
        assert resp.error_code == ErrorCode.CORRUPT_MESSAGE
        assert latest_offset(c, topic_name) == 3


def test_batch_over_max_message_bytes_is_message_too_large(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, configs={"max.message.bytes": "1000"})
        resp = produce(c, topic_name, batch(n=5, size=400))
        assert resp.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(c, topic_name, batch(n=1, size=100)).error_code == 0
        assert latest_offset(c, topic_name) == 1


@pytest.mark.parametrize("name", ["bad name", "a/b", "x" * 250, ".."])
def test_bad_topic_name_is_invalid_topic_exception(broker: BrokerProcess, name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(19, 7, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1}], "timeout": 5000})
        assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert produce(c, name, batch()).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        meta = c.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": True})
        assert meta.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_unsupported_version_gets_unsupported_version(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        # Produce v2 (below Kafka 4.0's minimum): header + error code, connection stays usable.
        c.correlation_id += 1
        frame = struct.pack(">hhih", 0, 2, c.correlation_id, 1) + b"c" + b"\x00" * 8
        c.send_bytes(struct.pack(">i", len(frame)) + frame)
        resp = c.read_frame()
        assert struct.unpack_from(">ih", resp) == (c.correlation_id, ErrorCode.UNSUPPORTED_VERSION)
        # ApiVersions v99 gets a v0 answer with UNSUPPORTED_VERSION and ApiVersions' own range
        # (KIP-511: what the client needs to ask again), as from Kafka.
        c.correlation_id += 1
        frame = struct.pack(">hhih", 18, 99, c.correlation_id, -1)
        c.send_bytes(struct.pack(">i", len(frame)) + frame)
        body = c.read_frame()
        cid, err, n = struct.unpack_from(">ihi", body)
        assert (cid, err, n) == (c.correlation_id, ErrorCode.UNSUPPORTED_VERSION, 1)
        assert struct.unpack_from(">hhh", body, 10) == (18, 0, api_versions.MAX_VERSION)
        assert c.request(18, 3, API_VERSIONS_V3).error_code == 0


def test_malformed_frame_closes_only_that_connection(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as bystander, RawClient(broker.bootstrap) as c:
        assert bystander.request(18, 3, API_VERSIONS_V3).error_code == 0
        # Metadata v12 whose body is a compact array claiming 4 billion topics.
        frame = bytes(encode_request(3, 12, 1, "c", {"topics": []}))[4:]
        head = frame[: len(frame) - 4]  # drop the 4-byte body: topics, two booleans, tagged fields
        evil = head + bytes.fromhex("ffffffff0f")
        c.send_bytes(struct.pack(">i", len(evil)) + evil)
        assert c.is_closed_by_peer()
        assert bystander.request(18, 3, API_VERSIONS_V3).error_code == 0
    assert "malformed request" in broker.log_text()


def test_frame_over_socket_request_max_bytes_is_refused(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory(**{"socket.request.max.bytes": "1000"})
    with RawClient(b.bootstrap) as c:
        c.send_bytes(struct.pack(">i", 5000) + b"\x00" * 100)
        assert c.is_closed_by_peer()
    with RawClient(b.bootstrap) as c:
        c.send_bytes(struct.pack(">i", 3) + b"abc")  # too small for any request header
        assert c.is_closed_by_peer()
    assert broker_alive(b)
    assert "exceeds socket.request.max.bytes=1000" in b.log_text()


def test_sigterm_shuts_down_cleanly(broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = broker_factory()
    assert b.stop() == 0
    assert "stopped cleanly" in b.log_text()
    assert (b.log_dir / ".kafka_cleanshutdown").exists()


def test_topic_compression_type_recompresses(broker: BrokerProcess, topic_name: str) -> None:
    from samsa.protocol.batch import parse_header
    from samsa.protocol.records import iter_all_records

    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, configs={"compression.type": "zstd"})
        assert produce(c, topic_name, batch(n=4)).error_code == 0
        resp = c.request(1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                 "topics": [{"topic": topic_name, "partitions": [
                                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]})
        records = bytes(resp.responses[0].partitions[0].records)
        assert parse_header(records).compression == 4
        assert [r.value for r in iter_all_records(records)] == [b"v" * 10] * 4


def test_acks_all_below_min_insync_replicas_is_refused(broker: BrokerProcess, topic_name: str) -> None:
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, configs={"min.insync.replicas": "2"})
        assert produce(c, topic_name, batch()).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        acks1 = c.request(0, PRODUCE_V, {"acks": 1, "timeout": 5000, "topic_data": [
            {"name": topic_name, "partition_data": [{"index": 0, "records": bytes(batch())}]}]})
        assert acks1.responses[0].partition_responses[0].error_code == 0
        assert latest_offset(c, topic_name) == 3


def test_fetch_max_bytes_caps_what_a_consumer_asks_for(broker_factory: Any, topic_name: str) -> None:
    """A Fetch asking for 2^31-1 bytes once got 382 MiB in one response; the broker's
    fetch.max.bytes caps it (the first batch still comes whole, KIP-74)."""
    b = broker_factory(fetch_max_bytes="4096")
    with RawClient(b.bootstrap) as c:
        create_topic(c, topic_name)
        for _ in range(10):
            assert produce(c, topic_name, batch(n=1, size=1000)).error_code == 0
        resp = c.request(1, 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 0x7FFFFFFF, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "topics": [{"topic": topic_name, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 0x7FFFFFFF}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        records = resp.responses[0].partitions[0].records
        one = len(batch(n=1, size=1000))
        assert one < len(records) <= 4096, len(records)  # several batches, never past the cap


def test_timestamps_out_of_bounds_are_refused_and_nothing_is_appended(broker: BrokerProcess, topic_name: str) -> None:
    """2100 is past Kafka 4's default message.timestamp.after.max.ms (one hour); 1970 is past the
    topic's message.timestamp.before.max.ms. Either would have held or ended retention early."""
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name, configs={"message.timestamp.before.max.ms": "86400000"})
        for ts in (4_102_444_800_000, 1000):
            bad = bytearray(build_batch([(b"k", b"v", [], ts)]))
            resp = produce(c, topic_name, bad)
            assert resp.error_code == ErrorCode.INVALID_TIMESTAMP, ts
        assert latest_offset(c, topic_name) == 0
        assert produce(c, topic_name, batch()).error_code == 0  # now: fine


def test_a_record_out_of_bounds_is_named_in_record_errors(broker: BrokerProcess, topic_name: str) -> None:
    """ProduceResponse v8+ carries the index of each record at fault, as Kafka's does."""
    now = int(time.time() * 1000)
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        records = [(b"k", b"v", [], ts) for ts in (now, now + 3 * 3_600_000, now, now + 5 * 3_600_000)]
        resp = produce(c, topic_name, build_batch(records))
        assert resp.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in resp.record_errors] == [1, 3]
        assert all("out of range" in (e.batch_index_error_message or "") for e in resp.record_errors)
        assert latest_offset(c, topic_name) == 0


def test_a_batch_claiming_more_records_than_it_holds_moves_nothing(broker: BrokerProcess, topic_name: str) -> None:
    """The poison batch: 2^31-1 records claimed (lastOffsetDelta to match, CRC valid) in a few
    dozen bytes. The log end offset would have jumped by two billion."""
    one = build_batch([(b"k", b"v", [], int(time.time() * 1000))])
    poison = seal_batch(one[HEADER_SIZE:], 2**31 - 1, int(time.time() * 1000), int(time.time() * 1000))
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)
        resp = produce(c, topic_name, poison)
        assert resp.error_code == ErrorCode.INVALID_RECORD and "holds 1" in resp.error_message
        assert latest_offset(c, topic_name) == 0
        assert produce(c, topic_name, one).error_code == 0 and latest_offset(c, topic_name) == 1
