"""Regression tests for the peer brokers' bugs found while benchmarking (shared/bench/README.md,
"Peer behaviour"), run against Samsa:

(a) ListOffsets(latest) must equal the number of records produced (Tansu reported less);
(b) a waiting long-poll Fetch must finish as soon as data arrives (Tansu waited max_wait_ms);
(c) a Fetch must not return more than the partition's max bytes, beyond the first batch
    (Tansu returned 5.3 MB for 1 MiB; noida-db ignored the limits altogether);
(d) ApiVersions v3 must carry no default-valued tagged fields, so librdkafka 2.0 (Debian's
    kcat) can connect (Tansu's FinalizedFeaturesEpoch = -1 broke it);
(e) an idle long-poll Fetch must be held open for max_wait_ms (noida-db answered at once,
    ~20k empty responses a second).
"""

from __future__ import annotations

import json
import select
import struct
import subprocess
import time
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.brokerproc import BrokerProcess
from tests.compat import rawwire
from tests.compat.helpers import (
    DEADLINE_S,
    base_timestamp_ms,
    ck_consumer,
    ck_create_topic,
    ck_list_offset,
    ck_produce,
    ck_producer,
    ck_read,
    ck_watermarks,
    make_records,
)

# --- (a) ListOffsets latest is exact ---------------------------------------------------------


def test_a_list_offsets_latest_equals_records_produced(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    recs = make_records("a", 3000, base_timestamp_ms(), value_pad=20)
    p = ck_producer(b, **{"batch.num.messages": 97, "linger.ms": 5})
    produced = 0
    for chunk in (recs[:1], recs[1:1000], recs[1000:]):  # one record, then batches of 97 and a tail
        ck_produce(p, topic_name, chunk)
        produced += len(chunk)
        assert ck_list_offset(b, topic_name, OffsetSpec.latest()) == produced, "AdminClient.list_offsets"
        assert ck_watermarks(b, topic_name) == (0, produced), "get_watermark_offsets"
    kc = KafkaConsumer(bootstrap_servers=b, group_id=None, enable_auto_commit=False)
    try:
        ktp = KpTopicPartition(topic_name, 0)
        assert kc.end_offsets([ktp]) == {ktp: produced}, "kafka-python end_offsets"
    finally:
        kc.close()
    with rawwire.Conn(b) as conn:
        assert conn.fetch(topic_name, 0, produced, max_wait_ms=0).high_watermark == produced
    # and sizing a read by ListOffsets gets every record
    assert len(ck_read(b, topic_name, produced)) == produced


# --- (b) a waiting Fetch returns when data arrives -------------------------------------------


def test_b_waiting_fetch_returns_when_data_arrives_raw(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    p = ck_producer(b, **{"linger.ms": 0})
    ck_produce(p, topic_name, make_records("b0", 1, base_timestamp_ms()))
    with rawwire.Conn(b) as conn:
        cid = conn.send_fetch(topic_name, 0, 1, max_wait_ms=5000, min_bytes=1)
        # the Fetch is parked: nothing comes back while there is no data
        readable, _, _ = select.select([conn.sock], [], [], 0.3)
        assert not readable, "an empty Fetch with max_wait_ms=5000 was answered within 0.3 s"
        t0 = time.monotonic()
        ck_produce(p, topic_name, make_records("b1", 1, base_timestamp_ms()))
        res = conn.receive_fetch(cid)
        latency = time.monotonic() - t0
    assert res.error_code == 0 and res.high_watermark == 2
    batches = rawwire.batch_headers(res.records or b"")
    assert batches and batches[0].base_offset == 1
    assert latency < 1.0, f"waiting Fetch answered {latency:.3f}s after the produce (max_wait_ms=5000)"


def test_b_fetch_racing_a_produce_is_not_missed(broker: BrokerProcess, topic_name: str) -> None:
    # A Fetch that arrives just before a produce must still be completed by it: the broker
    # has to register its wait and then look again (Kafka's tryCompleteElseWatch), or a
    # produce landing between "no data" and "waiting" is missed and the Fetch sleeps max_wait.
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    p = ck_producer(b, **{"linger.ms": 0})
    slow = []
    with rawwire.Conn(b) as conn:
        for i in range(60):
            cid = conn.send_fetch(topic_name, 0, i, max_wait_ms=2000, min_bytes=1)
            t0 = time.monotonic()
            p.produce(topic_name, f"r{i}".encode(), partition=0)
            p.poll(0)
            res = conn.receive_fetch(cid)
            took = time.monotonic() - t0
            assert res.error_code == 0
            if took > 1.0:
                slow.append((i, round(took, 3), res.high_watermark))
            assert p.flush(DEADLINE_S) == 0
    assert not slow, f"Fetches answered only at max_wait (fetch offset, seconds, high watermark): {slow}"


def test_b_consumer_latency_with_long_fetch_wait(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    p = ck_producer(b, **{"linger.ms": 0})
    ck_produce(p, topic_name, make_records("warm", 1, base_timestamp_ms()))
    c = ck_consumer(b, **{"fetch.wait.max.ms": 5000, "fetch.min.bytes": 1})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])

        def next_record(timeout: float) -> Any:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                m = c.poll(0.05)
                if m is None:
                    continue
                if m.error() is None:
                    return m
                assert m.error().code() == KafkaError._PARTITION_EOF, str(m.error())
            raise AssertionError("no record")

        assert next_record(DEADLINE_S).offset() == 0  # the consumer's fetch loop is now running
        latencies = []
        for i in range(3):
            t0 = time.monotonic()
            p.produce(topic_name, f"v{i}".encode(), partition=0)
            p.poll(0)
            m = next_record(10.0)
            latencies.append(time.monotonic() - t0)
            assert m.offset() == i + 1
        p.flush(DEADLINE_S)
    finally:
        c.close()
    assert max(latencies) < 1.0, f"produce-to-consume latencies {latencies} with fetch.wait.max.ms=5000"


# --- (c) Fetch byte limits -------------------------------------------------------------------


def test_c_fetch_respects_partition_max_bytes(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    # 40 one-record batches of ~560 bytes each, then one ~10 KB batch
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 1, "compression.type": "none"})
    ck_produce(p, topic_name, make_records("c", 40, base_timestamp_ms(), value_pad=500))
    big = ck_producer(b, **{"linger.ms": 100, "batch.num.messages": 10000, "compression.type": "none"})
    ck_produce(big, topic_name, make_records("big", 20, base_timestamp_ms(), value_pad=500))

    with rawwire.Conn(b) as conn:
        rawwire.require_fetch_v4(conn)
        first = rawwire.batch_headers(conn.fetch(topic_name, 0, 0, max_wait_ms=0).records or b"")[0]

        for limit in (1, 1000, 2000, 5000):
            res = conn.fetch(topic_name, 0, 0, max_wait_ms=0, partition_max_bytes=limit)
            size = len(res.records or b"")
            assert 0 < size <= max(limit, first.size), f"partition_max_bytes={limit}: got {size} bytes"
            assert rawwire.batch_headers(res.records or b"")[0].complete, "the first batch must be whole"

        # the response-wide max_bytes is honoured too (beyond the first batch)
        res = conn.fetch(topic_name, 0, 0, max_wait_ms=0, max_bytes=3000)
        assert 0 < len(res.records or b"") <= 3000

        # a first batch larger than the limit still comes back whole (KIP-74), so a consumer
        # can always make progress
        res = conn.fetch(topic_name, 0, 40, max_wait_ms=0, partition_max_bytes=1000)
        batches = rawwire.batch_headers(res.records or b"")
        assert batches and batches[0].base_offset == 40 and batches[0].complete
        assert batches[0].size > 1000 and len(res.records or b"") == batches[0].size


# --- (d) ApiVersions without default tagged fields; librdkafka 2.0 connects --------------------

# ApiVersions v3 response top-level tagged fields and the encodings of their default values
DEFAULT_TAGGED = {
    0: b"\x01",  # SupportedFeatures: empty compact array
    1: struct.pack(">q", -1),  # FinalizedFeaturesEpoch
    2: b"\x01",  # FinalizedFeatures: empty compact array
    3: b"\x00",  # ZkMigrationReady: false
}


def test_d_api_versions_v3_has_no_default_tagged_fields(broker: BrokerProcess) -> None:
    with rawwire.Conn(broker.bootstrap) as conn:
        v3 = conn.api_versions(3)
        assert v3.error_code == 0
        assert 18 in v3.api_keys and v3.api_keys[18][1] >= 3
        for key, tags in v3.per_key_tagged_fields.items():
            assert tags == {}, f"api key {key} carries tagged fields {tags}"
        for tag, data in v3.tagged_fields.items():
            assert DEFAULT_TAGGED.get(tag) != data, f"tagged field {tag} has its default value {data.hex()}"
        v0 = conn.api_versions(0)
        assert v0.error_code == 0 and v0.api_keys == v3.api_keys


def test_d_api_versions_unsupported_version_answers_v0(broker: BrokerProcess) -> None:
    # KIP-511: a client newer than the broker gets UNSUPPORTED_VERSION in a v0 body listing
    # the broker's ApiVersions range, so it can retry with a version the broker knows
    with rawwire.Conn(broker.bootstrap) as conn:
        cid = conn.send(18, 127, b"\x00" * 3, flexible_header=True)
        r = rawwire.Reader(conn.receive(cid))
        assert r.int16() == 35  # UNSUPPORTED_VERSION
        keys = {}
        for _ in range(r.int32()):
            k, lo, hi = r.int16(), r.int16(), r.int16()
            keys[k] = (lo, hi)
        assert 18 in keys and keys[18][0] == 0


def test_d_debian_kcat_connects(broker: BrokerProcess, kcat_bin: str, topic_name: str) -> None:
    ck_create_topic(broker.bootstrap, topic_name)
    proc = subprocess.run(
        [kcat_bin, "-b", broker.bootstrap, "-L", "-J", "-t", topic_name, "-m", "10", "-d", "protocol"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "underflow" not in proc.stderr.lower(), proc.stderr[-3000:]
    md: dict[str, Any] = json.loads(proc.stdout)
    assert [br["id"] for br in md["brokers"]] == [0]
    (t,) = md["topics"]
    assert t["topic"] == topic_name and [p["partition"] for p in t["partitions"]] == [0]


# --- (e) an idle long-poll Fetch is held for max_wait_ms ---------------------------------------


def test_e_idle_fetch_is_held_for_max_wait_raw(broker: BrokerProcess, topic_name: str) -> None:
    ck_create_topic(broker.bootstrap, topic_name)
    responses = []
    with rawwire.Conn(broker.bootstrap) as conn:
        t_end = time.monotonic() + 2.0
        while time.monotonic() < t_end:
            res, took = conn.timed_fetch(topic_name, 0, 0, max_wait_ms=500, min_bytes=1)
            assert res.error_code == 0 and not res.records
            responses.append(took)
    assert 3 <= len(responses) <= 5, f"{len(responses)} responses in 2 s with max_wait_ms=500"
    assert min(responses) >= 0.45, f"an idle Fetch was answered after {min(responses):.3f}s"


def test_e_idle_consumer_sends_few_fetches(broker: BrokerProcess, topic_name: str) -> None:
    ck_create_topic(broker.bootstrap, topic_name)
    samples: list[tuple[float, int]] = []

    def on_stats(raw: str) -> None:
        stats = json.loads(raw)
        fetches = sum(br.get("req", {}).get("Fetch", 0) for br in stats["brokers"].values())
        samples.append((time.monotonic(), fetches))

    c = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 500, "statistics.interval.ms": 250, "stats_cb": on_stats})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            m = c.poll(0.1)
            assert m is None or (m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF)
    finally:
        c.close()
    started = [s for s in samples if s[1] > 0]
    assert len(started) >= 2, f"stats samples: {samples}"
    (t0, f0), (t1, f1) = started[0], started[-1]
    rate = (f1 - f0) / (t1 - t0)
    assert rate <= 4.0, f"idle consumer sent {rate:.1f} Fetch/s with fetch.wait.max.ms=500 (expected ~2)"
