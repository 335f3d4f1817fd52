"""Samsa against Apache Kafka itself: the same requests to both, the answers compared.

Each case sends one request sequence, over raw frames, to a real Apache Kafka 4.4 (KRaft, one
node: tests/kafkaproc.py) and to a Samsa broker. It keeps what a client acts on: error
codes, offsets, the bytes a fetch returns, config values and sources, whether the connection
stays open. The two answers must be equal, unless the case is in DIFFERENCES with the reason
Samsa differs on purpose. A listed difference that is gone fails too, so the list stays
true.

The table in docs/compat.md ("Samsa beside Apache Kafka") is rendered from these results and
checked here. After a change, regenerate it with

    SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest tests/compat/test_vs_kafka.py
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.protocol.records import build_batch
from tests.rawclient import RawClient

Case = Callable[[str], dict[str, Any]]
CASES: dict[str, tuple[str, Case]] = {}

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
}

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"
START, END = "<!-- vs-kafka:start -->", "<!-- vs-kafka:end -->"


def case(what: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[fn.__name__.removeprefix("case_")] = (what, fn)
        return fn
    return register


def _name() -> str:
    return "vs-" + uuid.uuid4().hex[:10]


def _client(bootstrap: str) -> RawClient:
    return RawClient(bootstrap, timeout=30)


def _create(c: RawClient, name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str] | None = None,
            validate_only: bool = False) -> tuple[int, int]:
    """CreateTopics v7: (error code, topic config error code)."""
    resp = c.request(19, 7, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                         "assignments": [], "configs": [{"name": k, "value": v}
                                                                        for k, v in (configs or {}).items()]}],
                             "timeout": 30000, "validate_only": validate_only})
    t = resp.topics[0]
    return int(t.error_code), int(t.topic_config_error_code)


def _ready(c: RawClient, name: str, partitions: int = 1) -> None:
    """Until Metadata names a leader for every partition (Kafka's KRaft answers CreateTopics first)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = c.request(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        t = md.topics[0]
        if int(t.error_code) == 0 and len(t.partitions) == partitions and all(p.leader_id >= 0 for p in t.partitions):
            return
        time.sleep(0.05)  # metadata propagation has no event a client can await
    raise AssertionError(f"{name} has no leaders after 30 s")


def _produce(c: RawClient, topic: str, records: bytes, acks: int = -1, partition: int = 0) -> Any:
    resp = c.request(0, 9, {"transactional_id": None, "acks": acks, "timeout": 30000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


def _batch(values: list[bytes], timestamp: int) -> bytes:
    return build_batch([(b"k", v, [], timestamp) for v in values])


def _closed(c: RawClient) -> bool:
    return c.is_closed_by_peer(timeout=10)


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


@case("Metadata for an invalid topic name, and for an unknown one without auto-creation")
def case_metadata_errors(b: str) -> dict[str, Any]:
    with _client(b) as c:
        out = {}
        for label, n in (("'a/b'", "a/b"), ("unknown", _name())):
            md = c.request(3, 12, {"topics": [{"name": n}], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})
            out[label] = int(md.topics[0].error_code)
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


@case("DeleteRecords: to an offset, to -1 (the high watermark), beyond it; fetch below the new start")
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
        out = {"to 3": delete(3), "beyond (20)": delete(20), "earliest after": _list_offsets(c, name, -2)}
        fetched = _fetch(c, name, 0, 1 << 20, 1 << 20)
        out["fetch at 0"] = (fetched[0], fetched[3])
        out["to -1"] = delete(-1)
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


@pytest.fixture(scope="module")
def results(apache_kafka: str, broker: Any) -> dict[str, dict[str, Any]]:
    """Every case against both brokers: {case: {"kafka": ..., "samsa": ...}}."""
    out: dict[str, dict[str, Any]] = {}
    for name, (_, fn) in CASES.items():
        out[name] = {"kafka": _plain(fn(apache_kafka)), "samsa": _plain(fn(broker.bootstrap))}
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


@pytest.mark.parametrize("name", list(CASES))
def test_samsa_answers_as_kafka(results: dict[str, dict[str, Any]], name: str) -> None:
    got = results[name]
    diff = {k: (got["kafka"].get(k), got["samsa"].get(k)) for k in got["kafka"].keys() | got["samsa"].keys()
            if got["kafka"].get(k) != got["samsa"].get(k)}
    intended = DIFFERENCES.get(name, {})
    assert set(diff) == set(intended), (
        f"{name}: (kafka, samsa) differ at {diff}; the intended differences are {sorted(intended)}")


def render(results: dict[str, dict[str, Any]]) -> str:
    lines = [START, "", "| case | Apache Kafka 4.4 | Samsa | |", "|---|---|---|---|"]
    for name, (what, _) in CASES.items():
        r = results[name]
        k = "; ".join(f"{a}: {_show(v)}" for a, v in r["kafka"].items())
        differing = [a for a, v in r["samsa"].items() if v != r["kafka"].get(a)]
        s = "; ".join(f"{a}: {_show(r['samsa'][a])}" for a in differing) or "same"
        why = " ".join(f"{a}: {DIFFERENCES.get(name, {}).get(a, 'not explained')}." for a in differing)
        lines.append(f"| {what} | {k} | {s} | {why or '✅'} |")
    lines += ["", END]
    return "\n".join(lines)


def _show(v: Any) -> str:
    """A value in the table (error codes are Kafka's numbers)."""
    text = str(v)
    return text.replace("|", "\\|")


def test_the_compat_doc_shows_these_results(results: dict[str, dict[str, Any]]) -> None:
    text = DOC.read_text()
    table = render(results)
    if os.environ.get("SAMSA_UPDATE_COMPAT_DOC"):
        if START in text:
            text = text[:text.index(START)] + table + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n## Samsa beside Apache Kafka\n\n" + table + "\n"
        DOC.write_text(text)
    assert START in text and text[text.index(START):text.index(END) + len(END)] == table, (
        "docs/compat.md's table is not these results: SAMSA_UPDATE_COMPAT_DOC=1 .venv/bin/python -m pytest "
        "tests/compat/test_vs_kafka.py rewrites it")
