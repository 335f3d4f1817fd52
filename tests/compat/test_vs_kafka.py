"""Samsa against Apache Kafka itself: the same requests to both, the answers compared.

Each case sends one request sequence, over raw frames, to a real Apache Kafka 4.4 (KRaft, one
node: tests/kafkaproc.py) and to a Samsa broker. It keeps what a client acts on: error
codes, offsets, the bytes a fetch returns, config values and sources, whether the connection
stays open. The two answers must be equal, unless the case is in DIFFERENCES with the reason
Samsa differs on purpose. A listed difference that is gone fails too, so the list stays
true.

The cases on topics, produce, offsets, fetch, configs and bad frames are here; those on
consumer groups in vs_kafka_groups.py, on idempotence and transactions in vs_kafka_txn.py;
vs_kafka.py has what they share. Kafka's own Admin client against both is test_admin_vs_kafka.py.

The table in docs/compat.md ("Samsa beside Apache Kafka") is rendered from these results and
checked here. After a change, regenerate it with

    SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat/test_vs_kafka.py
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from typing import Any

import pytest

from tests.compat import vs_kafka_groups, vs_kafka_txn
from tests.compat.vs_kafka import CaseSet, Results, check_doc, differing, plain, render
from tests.compat.vs_kafka import batch as _batch
from tests.compat.vs_kafka import client as _client
from tests.compat.vs_kafka import closed as _closed
from tests.compat.vs_kafka import create as _create
from tests.compat.vs_kafka import name as _name
from tests.compat.vs_kafka import produce as _produce
from tests.compat.vs_kafka import ready as _ready
from tests.rawclient import RawClient

case = CaseSet()

# case -> {field: why Samsa answers differently}: exactly these fields differ (a difference
# that disappears fails too, so the list stays true)
DIFFERENCES: dict[str, dict[str, str]] = {
    "describe_topic_configs": {
        "min.insync.replicas": "Kafka 4.x's `kafka-storage format` writes min.insync.replicas=1 as a cluster-wide "
                               "dynamic default (for KIP-966's eligible leader replicas), so Kafka names its source "
                               "DYNAMIC_DEFAULT_BROKER_CONFIG (3); Samsa has no such record: DEFAULT_CONFIG (5)"},
    "bad_frames": {
        "unknown API key: connection closed": "Samsa answers a request it does not serve with its correlation id "
                                              "and UNSUPPORTED_VERSION and keeps the connection; Kafka closes it"},
    "protocol_migration": {
        field: "Samsa has no online migration between the classic and the consumer group protocols (KIP-848's "
               "group.consumer.migration.policy, whose default in Kafka is bidirectional): a group with members is "
               "of one kind, so a classic JoinGroup to a consumer group gets INCONSISTENT_GROUP_PROTOCOL (23) and a "
               "ConsumerGroupHeartbeat to a classic group GROUP_ID_NOT_FOUND (69); an empty group of either kind "
               "becomes the other (samsa/coordinator/consumer.py)"
        for field in ("JoinGroup to the consumer group", "ConsumerGroupHeartbeat to the classic group")},
    "list_transactions": {
        "longer than an hour": "KIP-994's duration filter keeps transactions running longer than the duration; Samsa "
                               "keeps open (Ongoing) ones that began that long ago. Kafka compares the start time "
                               "alone, and a transactional id with no transaction has start time -1, so its Empty "
                               "one is listed as running since 1970"},
}


# --------------------------------------------------------------------------- topics


@case("CreateTopics of a topic that exists")
def case_create_existing(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        first = _create(c, name)
        return {"first": first, "again": _create(c, name)}


@case("CreateTopics with 0 and with -2 partitions, and RF 0")
def case_create_bad_counts(b: str) -> dict[str, Any]:
    with _client(b) as c:
        return {"partitions 0": _create(c, _name(), partitions=0), "partitions -2": _create(c, _name(), partitions=-2),
                "rf 0": _create(c, _name(), rf=0)}


@case("CreateTopics with a replication factor above the broker count")
def case_create_rf_too_big(b: str) -> dict[str, Any]:
    with _client(b) as c:
        return {"rf 3": _create(c, _name(), rf=3)}


@case("CreateTopics with invalid names: '.', '..', 'a/b', 250 characters, empty")
def case_create_bad_names(b: str) -> dict[str, Any]:
    with _client(b) as c:
        return {repr(n if len(n) < 20 else f"{len(n)} chars"): _create(c, n)
                for n in (".", "..", "a/b", "x" * 250, "")}


@case("CreateTopics with a bad config value, an unknown config, a value out of range")
def case_create_bad_configs(b: str) -> dict[str, Any]:
    with _client(b) as c:
        return {"retention.ms=abc": _create(c, _name(), configs={"retention.ms": "abc"}),
                "no.such.config=1": _create(c, _name(), configs={"no.such.config": "1"}),
                "min.insync.replicas=0": _create(c, _name(), configs={"min.insync.replicas": "0"}),
                "cleanup.policy=bogus": _create(c, _name(), configs={"cleanup.policy": "bogus"})}


@case("CreateTopics with validate_only: answered, nothing created")
def case_create_validate_only(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        code = _create(c, name, partitions=3, validate_only=True)
        md = c.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        return {"validate": code, "metadata afterwards": int(md.topics[0].error_code)}


@case("DeleteTopics of a topic that does not exist")
def case_delete_unknown(b: str) -> dict[str, Any]:
    with _client(b) as c:
        resp = c.request(20, 6, {"topics": [{"name": _name(), "topic_id": None}], "timeout": 30000})
        return {"error": int(resp.responses[0].error_code)}


@case("CreatePartitions: fewer, the same, more; an unknown topic")
def case_create_partitions(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name, partitions=2)
        _ready(c, name, 2)

        def to(count: int, topic: str = name) -> int:
            resp = c.request(37, 3, {"topics": [{"name": topic, "count": count, "assignments": None}],
                                     "timeout": 30000, "validate_only": False})
            return int(resp.results[0].error_code)
        return {"1": to(1), "2": to(2), "3": to(3), "unknown topic": to(4, _name())}


@case("Metadata for an invalid topic name, for an unknown one without auto-creation; by topic id (v12: a known "
      "id, an unknown one; v10, which has the field but may not use it)")
def case_metadata_errors(b: str) -> dict[str, Any]:
    with _client(b) as c:
        out: dict[str, Any] = {}
        for label, n in (("'a/b'", "a/b"), ("unknown", _name())):
            md = c.request(3, 12, {"topics": [{"name": n}], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
            out[label] = int(md.topics[0].error_code)
        name = _name()
        _create(c, name)
        _ready(c, name)

        def by_id(version: int, topic_id: bytes) -> tuple[int, bool, bool]:
            """(error, named as the topic, its id echoed), asked by id with name "" (as the Admin asks)."""
            md = c.request(3, version, {"topics": [{"name": "", "topic_id": topic_id}],
                                        "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
            t = md.topics[0]
            return int(t.error_code), t.name == name, bytes(t.topic_id) == topic_id
        md = c.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        known = bytes(md.topics[0].topic_id)
        out["v12, by its id"] = by_id(12, known)
        out["v12, by an unknown id"] = by_id(12, uuid.uuid4().bytes)
        out["v10, by its id"] = by_id(10, known)
        return out


# --------------------------------------------------------------------------- produce


@case("Produce with acks=2, a batch over max.message.bytes, a corrupt CRC, an unknown partition")
def case_produce_errors(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name, configs={"max.message.bytes": "2000"})
        _ready(c, name)
        now = int(time.time() * 1000)
        ok = _batch([b"v"], now)
        corrupt = bytearray(ok)
        corrupt[-1] ^= 0xFF  # a byte of the record: the CRC no longer matches
        return {"acks=2": int(_produce(c, name, ok, acks=2).error_code),
                "too large": int(_produce(c, name, _batch([b"x" * 5000], now)).error_code),
                "corrupt": int(_produce(c, name, bytes(corrupt)).error_code),
                "partition 7": int(_produce(c, name, ok, partition=7).error_code),
                "then a good one": (int(_produce(c, name, ok).error_code), _produce(c, name, ok).base_offset)}


# --------------------------------------------------------------------------- offsets


def _list_offsets(c: RawClient, topic: str, ts: int, partition: int = 0) -> tuple[int, int]:
    resp = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1, "timestamp": ts}]}]})
    p = resp.topics[0].partitions[0]
    return int(p.error_code), int(p.offset)


@case("ListOffsets: earliest, latest, max timestamp, by timestamp (before, inside, between, after)")
def case_list_offsets(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name)
        _ready(c, name)
        t0 = int(time.time() * 1000) - 60_000
        for i in range(3):  # batches of 2 at offsets 0, 2, 4 with timestamps t0, t0+10, t0+20
            assert int(_produce(c, name, _batch([b"a", b"b"], t0 + 10 * i)).error_code) == 0
        return {"earliest": _list_offsets(c, name, -2), "latest": _list_offsets(c, name, -1),
                "max timestamp": _list_offsets(c, name, -3), "t0-5": _list_offsets(c, name, t0 - 5),
                "t0+10": _list_offsets(c, name, t0 + 10), "t0+15": _list_offsets(c, name, t0 + 15),
                "t0+99": _list_offsets(c, name, t0 + 99), "partition 3": _list_offsets(c, name, -1, partition=3)}


@case("DeleteRecords: to an offset, to -1 (the high watermark), beyond it; fetch below the new start; a "
      "compacted topic")
def case_delete_records(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name)
        _ready(c, name)
        now = int(time.time() * 1000)
        for _ in range(5):
            _produce(c, name, _batch([b"a", b"b"], now))

        def delete(offset: int) -> tuple[int, int]:
            resp = c.request(21, 2, {"topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": offset}]}],
                                     "timeout": 30000})
            p = resp.topics[0].partitions[0]
            return int(p.error_code), int(p.low_watermark)
        out: dict[str, Any] = {"to 3": delete(3), "beyond (20)": delete(20),
                               "earliest after": _list_offsets(c, name, -2)}
        fetched = _fetch(c, name, 0, 1 << 20, 1 << 20)
        out["fetch at 0"] = (fetched[0], fetched[3])
        out["to -1"] = delete(-1)
        compacted = _name()
        _create(c, compacted, configs={"cleanup.policy": "compact"})
        _ready(c, compacted)
        resp = c.request(21, 2, {"topics": [{"name": compacted, "partitions": [{"partition_index": 0, "offset": -1}]}],
                                 "timeout": 30000})
        out["a topic with cleanup.policy=compact, to -1"] = int(resp.topics[0].partitions[0].error_code)
        return out


# --------------------------------------------------------------------------- fetch


def _fetch(c: RawClient, topic: str, offset: int, max_bytes: int, partition_max: int) -> tuple[int, int, int, int]:
    """Fetch v11: (error, high watermark, bytes returned, log start offset)."""
    resp = c.request(1, 11, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                 {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                  "fetch_offset": offset, "log_start_offset": -1,
                                                                  "partition_max_bytes": partition_max}]}],
                             "forgotten_topics_data": [], "rack_id": ""})
    p = resp.responses[0].partitions[0]
    records = p.records
    size = 0 if records is None else len(bytes(records))
    return int(p.error_code), int(p.high_watermark), size, int(p.log_start_offset)


@case("Fetch limits: max_bytes and partition_max_bytes below one batch, both ample, at the end, past it")
def case_fetch_limits(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name)
        _ready(c, name)
        now = int(time.time() * 1000)
        batch = _batch([b"x" * 300] * 3, now)
        for _ in range(3):
            _produce(c, name, batch)
        one = len(batch)
        rel = lambda r: (r[0], r[1], round(r[2] / one, 2))  # noqa: E731  (bytes in batches)
        return {"max_bytes 10": rel(_fetch(c, name, 0, 10, 1 << 20)),
                "partition_max_bytes 10": rel(_fetch(c, name, 0, 1 << 20, 10)),
                "1.5 batches": rel(_fetch(c, name, 0, 1 << 20, one + one // 2)),
                "ample": rel(_fetch(c, name, 0, 1 << 20, 1 << 20)),
                "from the middle of a batch (4)": rel(_fetch(c, name, 4, 1 << 20, 1 << 20)),
                "at the end (9)": rel(_fetch(c, name, 9, 1 << 20, 1 << 20)),
                "past the end (10)": rel(_fetch(c, name, 10, 1 << 20, 1 << 20))}


# --------------------------------------------------------------------------- configs


TOPIC_KEYS = ("cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
              "flush.ms", "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes",
              "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
              "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
              "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
              "segment.ms", "unclean.leader.election.enable")


@case("DescribeConfigs of a new topic with one override: value, source, read-only, sensitive, type")
def case_describe_topic_configs(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name, configs={"retention.ms": "123456"})
        _ready(c, name)
        resp = c.request(32, 4, {"resources": [{"resource_type": 2, "resource_name": name,
                                                "configuration_keys": list(TOPIC_KEYS)}],
                                 "include_synonyms": False, "include_documentation": False})
        r = resp.results[0]
        got = {e.name: (e.value, int(e.config_source), bool(e.read_only), bool(e.is_sensitive), int(e.config_type))
               for e in r.configs}
        return {"error": int(r.error_code), **{k: got.get(k) for k in TOPIC_KEYS}}


@case("IncrementalAlterConfigs: a bad value, an unknown key, an unknown topic, a good value")
def case_alter_configs(b: str) -> dict[str, Any]:
    with _client(b) as c:
        name = _name()
        _create(c, name)
        _ready(c, name)

        def alter(topic: str, key: str, value: str) -> int:
            resp = c.request(44, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": [
                {"name": key, "config_operation": 0, "value": value}]}], "validate_only": False})
            return int(resp.responses[0].error_code)
        return {"retention.ms=abc": alter(name, "retention.ms", "abc"),
                "no.such.config": alter(name, "no.such.config", "1"),
                "unknown topic": alter(_name(), "retention.ms", "1000"),
                "retention.ms=1000": alter(name, "retention.ms", "1000")}


# --------------------------------------------------------------------------- bad requests


@case("ApiVersions at a version newer than any: the error and the versions listed")
def case_api_versions_too_new(b: str) -> dict[str, Any]:
    host, port = b.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        body = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 1) + b"x" + b"\x00"  # (header v2: no tags)
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(s, 4))[0]
        frame = _recv(s, size)
    cid, error, count = struct.unpack(">ihi", frame[:10])
    keys = sorted(struct.unpack(">h", frame[10 + 6 * i:12 + 6 * i])[0] for i in range(count))
    return {"correlation id": cid, "error": error, "API keys listed": keys}


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


@case("A request with an unknown API key, and a frame too short for a header")
def case_bad_frames(b: str) -> dict[str, Any]:
    out = {}
    with _client(b) as c:
        body = struct.pack(">hhi", 9999, 0, 1) + struct.pack(">h", -1)
        c.send_bytes(struct.pack(">i", len(body)) + body)
        out["unknown API key: connection closed"] = _closed(c)
    with _client(b) as c:
        c.send_bytes(struct.pack(">i", 3) + b"\x00\x00\x00")
        out["3-byte frame: connection closed"] = _closed(c)
    return out


# --------------------------------------------------------------------------- the comparison


CASES = {**case.cases, **vs_kafka_groups.case.cases, **vs_kafka_txn.case.cases}


@pytest.fixture(scope="module")
def results(apache_kafka: str, broker: Any) -> Results:
    """Every case against both brokers: {case: {"kafka": ..., "samsa": ...}}."""
    out: Results = {}
    for name, (_, fn) in CASES.items():
        out[name] = {"kafka": plain(fn(apache_kafka)), "samsa": plain(fn(broker.bootstrap))}
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_samsa_answers_as_kafka(results: Results, name: str) -> None:
    diff = differing(results[name])
    intended = DIFFERENCES.get(name, {})
    assert set(diff) == set(intended), (
        f"{name}: (kafka, samsa) differ at {diff}; the intended differences are {sorted(intended)}")


def test_the_compat_doc_shows_these_results(results: Results) -> None:
    table = render("vs-kafka", {n: what for n, (what, _) in CASES.items()}, results, DIFFERENCES)
    check_doc("vs-kafka", "Samsa beside Apache Kafka", table, "tests/compat/test_vs_kafka.py")
