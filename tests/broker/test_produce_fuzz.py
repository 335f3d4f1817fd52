"""A property-based fuzzer of Produce against a real broker, at the record level.

Hypothesis builds a valid batch (keys, values, headers, timestamps, a codec), then mutates its
records section -- bytes changed, inserted, deleted, cut off, the record count changed; before
compression, or in the compressed bytes -- and seals it again with a valid length and CRC, so
that only the broker's record validation stands between the mutation and the log.
SAMSA_FUZZ_EXAMPLES sets the number of batches (500). Each batch goes to the broker over a raw connection. Then:

- refused: the error is one of Kafka's for bad data, and the log end offset did not move;
- accepted: it was appended at the log end offset, the log end offset moved by exactly the
  batch's record count (no jump), and the batch decodes (its records are what a consumer must
  get back).

After every example, librdkafka (confluent-kafka, with check.crcs) and kafka-python each read
the whole partition from offset 0 within a deadline (no stall), and get exactly the records
of the accepted batches, in order, at their offsets.
"""

from __future__ import annotations

import os
import random
import struct
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from samsa.protocol.batch import HEADER_SIZE, compute_crc
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import Record, build_batch, decode_records, seal_batch
from tests.broker.test_bad_input import create_topic, latest_offset, produce
from tests.brokerproc import BrokerProcess
from tests.rawclient import RawClient

REFUSALS = {ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP,
            ErrorCode.MESSAGE_TOO_LARGE}
READ_DEADLINE_S = 30.0

records_st = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=12)), st.one_of(st.none(), st.binary(max_size=300)),
              st.lists(st.tuples(st.text(min_size=1, max_size=6), st.one_of(st.none(), st.binary(max_size=8))),
                       max_size=2),
              st.integers(min_value=-3_600_000, max_value=3_600_000)),  # ms from now
    min_size=1, max_size=20)


def _mutate(body: bytes, rng: random.Random, n: int) -> bytes:
    data = bytearray(body)
    for _ in range(n):
        kind = rng.randrange(5)
        i = rng.randrange(len(data) + 1)
        if kind == 0 and i < len(data):
            data[i] = rng.randrange(256)
        elif kind == 1 and i < len(data):
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 2:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        elif kind == 3 and i < len(data):
            del data[i : i + rng.randint(1, 3)]
        else:
            data = data[: max(i, 1)]
    return bytes(data)


def _resealed(batch: bytes) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 8, len(b) - 12)
    struct.pack_into(">I", b, 17, compute_crc(b, 0, len(b)))
    return bytes(b)


def _read_librdkafka(bootstrap: str, topic: str, end: int) -> list[tuple[int, Any, Any, Any, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz", "enable.auto.commit": False,
                  "check.crcs": True, "fetch.wait.max.ms": 50, "enable.partition.eof": False})
    got: list[tuple[int, Any, Any, Any, int]] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + READ_DEADLINE_S
        while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            headers = [(k, v) for k, v in (m.headers() or [])]
            got.append((m.offset(), m.key(), m.value(), headers, m.timestamp()[1]))
    finally:
        c.close()
    return got


def _read_kafka_python(bootstrap: str, topic: str, end: int) -> list[tuple[int, Any, Any, Any, int]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="none", fetch_max_wait_ms=50, check_crcs=True, client_id="fuzz")
    got: list[tuple[int, Any, Any, Any, int]] = []
    try:
        tp = KTopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        deadline = time.monotonic() + READ_DEADLINE_S
        while (not got or got[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in c.poll(timeout_ms=200).get(tp, []):
                got.append((m.offset, m.key, m.value, list(m.headers), m.timestamp))
    finally:
        c.close()
    return got


def _expected(records: list[Record]) -> list[tuple[int, Any, Any, Any, int]]:
    return [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in records]


def test_mutated_batches_are_refused_or_read_back_whole_by_two_clients(broker: BrokerProcess, topic_name: str) -> None:
    appended: list[Record] = []
    outcomes = {"accepted": 0, "refused": 0}
    with RawClient(broker.bootstrap) as c:
        create_topic(c, topic_name)

        @settings(max_examples=int(os.environ.get("SAMSA_FUZZ_EXAMPLES", "500")), deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(records_st, st.sampled_from([0, 1, 2, 3, 4]), st.integers(0, 2**32), st.integers(0, 3),
               st.integers(-2, 2), st.booleans())
        def one(records: list[Any], codec: int, seed: int, mutations: int, count_change: int,
                after_compression: bool) -> None:
            now = int(time.time() * 1000)
            stamped = [(k, v, h, now + ts) for k, v, h, ts in records]
            body = build_batch(stamped)[HEADER_SIZE:]
            rng = random.Random(seed)
            if not (after_compression and codec):
                body = _mutate(body, rng, mutations)
            count = max(1, len(records) + count_change)
            base_ts = min(ts for *_, ts in stamped)
            batch = seal_batch(body, count, base_ts, max(ts for *_, ts in stamped), compression=codec)
            if after_compression and codec:  # the codec's own bytes, then length and CRC made valid again
                batch = _resealed(batch[:HEADER_SIZE] + _mutate(batch[HEADER_SIZE:], rng, mutations))
            before = latest_offset(c, topic_name)
            resp = produce(c, topic_name, batch)
            after = latest_offset(c, topic_name)
            if resp.error_code:
                assert ErrorCode(resp.error_code) in REFUSALS, resp
                assert after == before, "a refused batch moved the log end offset"
                outcomes["refused"] += 1
                return
            assert resp.base_offset == before and after == before + count, (resp, before, after, count)
            sent = decode_records(batch)  # what the broker accepted must decode, record by record
            assert len(sent) == count
            rebased = [r._replace(offset=before + i) for i, r in enumerate(sent)]
            appended.extend(rebased)
            outcomes["accepted"] += 1

        one()

    end = len(appended)
    with RawClient(broker.bootstrap) as c:
        assert latest_offset(c, topic_name) == end
    print("fuzz outcomes:", outcomes)
    assert outcomes["accepted"] >= 10 and outcomes["refused"] >= 10, outcomes  # the fuzzer reached both sides
    want = _expected(appended)
    assert _read_kafka_python(broker.bootstrap, topic_name, end) == want
    rd = _read_librdkafka(broker.bootstrap, topic_name, end)
    assert [(o, k, v, [(_name_bytes(n), hv) for n, hv in h], t) for o, k, v, h, t in rd] == \
           [(o, k, v, [(_name_bytes(n).split(b"\0")[0], hv) for n, hv in h], t) for o, k, v, h, t in want]


def _name_bytes(name: str | bytes) -> bytes:
    """A header name as bytes. librdkafka keeps names as C strings, so a name holding a NUL byte
    reaches its application cut at the NUL (the broker stores and serves it whole, as Kafka
    does: kafka-python gets it whole above)."""
    return name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name
