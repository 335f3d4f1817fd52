"""confluent-kafka (librdkafka) against a real Samsa broker.

Admin topic creation, every compression codec, reading back by manual assignment, ListOffsets
(earliest, latest, by timestamp), the idempotent producer, persistence across SIGTERM and
kill -9, and size-based retention.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from tests.brokerproc import BrokerProcess
from tests.compat import rawwire
from tests.compat.helpers import (
    CODECS,
    DEADLINE_S,
    as_recs,
    base_timestamp_ms,
    broker_api_versions,
    ck_admin,
    ck_consumer,
    ck_create_topic,
    ck_list_offset,
    ck_produce,
    ck_producer,
    ck_read,
    ck_watermarks,
    librdkafka_sends,
    make_records,
    stored_codecs,
    timestamp_queries,
    wait_until,
)

BrokerFactory = Callable[..., BrokerProcess]


def test_create_topic_with_admin_client(broker: BrokerProcess, topic_name: str) -> None:
    ck_create_topic(broker.bootstrap, topic_name, partitions=3)
    md = ck_admin(broker.bootstrap).list_topics(topic_name, timeout=10)
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    assert all(p.leader == 0 and p.error is None for p in t.partitions.values())

    admin = ck_admin(broker.bootstrap)
    again = admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    with pytest.raises(KafkaException) as exc:
        again[topic_name].result(timeout=DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_and_list_offsets(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    recs = make_records(codec, 30, base_timestamp_ms())
    p = ck_producer(b, **{"compression.type": codec})
    delivered = ck_produce(p, topic_name, recs[:15]) + ck_produce(p, topic_name, recs[15:])
    assert [m.offset() for m in delivered] == list(range(30))

    got = ck_read(b, topic_name, 30)
    assert [m.offset() for m in got] == list(range(30))
    assert as_recs(got) == recs
    assert stored_codecs(b, topic_name) == {librdkafka_sends(codec, broker_api_versions(b))}

    assert ck_list_offset(b, topic_name, OffsetSpec.earliest()) == 0
    assert ck_list_offset(b, topic_name, OffsetSpec.latest()) == 30
    assert ck_watermarks(b, topic_name) == (0, 30)
    c = ck_consumer(b)
    try:
        for ts, want in timestamp_queries(recs).items():
            (tp,) = c.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=10)
            assert tp.error is None
            assert tp.offset == want, f"offsets_for_times({ts})"
            if want >= 0:
                assert ck_list_offset(b, topic_name, OffsetSpec.for_timestamp(ts)) == want
    finally:
        c.close()


def test_all_codecs_interleaved_in_one_partition(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    base = base_timestamp_ms()
    expected = []
    for i, codec in enumerate(CODECS):
        recs = make_records(codec, 8, base + 1000 * i)
        ck_produce(ck_producer(b, **{"compression.type": codec}), topic_name, recs)
        expected += recs
    got = ck_read(b, topic_name, len(expected))
    assert [m.offset() for m in got] == list(range(len(expected)))
    assert as_recs(got) == expected
    api_keys = broker_api_versions(b)
    assert stored_codecs(b, topic_name) == {librdkafka_sends(c, api_keys) for c in CODECS}
    assert ck_watermarks(b, topic_name) == (0, len(expected))


def test_idempotent_producer_delivers_exactly_once_in_order(broker: BrokerProcess, topic_name: str) -> None:
    b = broker.bootstrap
    ck_create_topic(b, topic_name)
    recs = make_records("idem", 600, base_timestamp_ms(), value_pad=10)
    p = ck_producer(
        b, **{"enable.idempotence": True, "linger.ms": 2, "batch.num.messages": 40,
              "max.in.flight.requests.per.connection": 5}
    )
    delivered = ck_produce(p, topic_name, recs)
    assert [m.offset() for m in delivered] == list(range(600))
    got = ck_read(b, topic_name, 600)
    assert as_recs(got) == recs
    assert ck_watermarks(b, topic_name) == (0, 600)


def test_data_survives_clean_restart(broker_factory: BrokerFactory, topic_name: str) -> None:
    brk = broker_factory()
    ck_create_topic(brk.bootstrap, topic_name)
    recs = make_records("restart", 200, base_timestamp_ms())
    ck_produce(ck_producer(brk.bootstrap, **{"batch.num.messages": 25}), topic_name, recs[:150])

    assert brk.stop() == 0, brk.log_text()[-2000:]
    brk.start()
    assert ck_watermarks(brk.bootstrap, topic_name) == (0, 150)
    assert as_recs(ck_read(brk.bootstrap, topic_name, 150)) == recs[:150]
    # the log continues where it stopped
    more = ck_produce(ck_producer(brk.bootstrap), topic_name, recs[150:])
    assert [m.offset() for m in more] == list(range(150, 200))
    assert as_recs(ck_read(brk.bootstrap, topic_name, 200)) == recs


def test_acknowledged_data_survives_kill9(broker_factory: BrokerFactory, topic_name: str) -> None:
    brk = broker_factory()
    ck_create_topic(brk.bootstrap, topic_name)
    recs = make_records("kill9", 300, base_timestamp_ms())
    acked = ck_produce(ck_producer(brk.bootstrap, acks="all", **{"batch.num.messages": 20}), topic_name, recs[:200])
    acked += ck_produce(ck_producer(brk.bootstrap, acks="1"), topic_name, recs[200:])
    assert [m.offset() for m in acked] == list(range(300))

    brk.kill9()
    brk.start()
    lo, hi = ck_watermarks(brk.bootstrap, topic_name)
    assert (lo, hi) == (0, 300), "every acknowledged record must survive a process kill"
    assert as_recs(ck_read(brk.bootstrap, topic_name, 300)) == recs


def _segment_base_offsets(log_dir: Path, topic: str) -> list[int]:
    pdir = log_dir / f"{topic}-0"
    return sorted(int(f.stem) for f in pdir.glob("*.log") if re.fullmatch(r"\d+", f.stem))


def test_retention_deletes_old_segments(broker_factory: BrokerFactory, topic_name: str) -> None:
    brk = broker_factory(**{"log.segment.bytes": "2000", "log.retention.check.interval.ms": "200"})
    b = brk.bootstrap
    ck_create_topic(b, topic_name, config={"retention.bytes": "3000"})
    recs = make_records("ret", 80, base_timestamp_ms(), value_pad=80)
    # one record per batch, so the log rolls many small segments
    ck_produce(ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 1}), topic_name, recs)

    lo = wait_until(lambda: ck_watermarks(b, topic_name)[0], what="the log start offset to move past 0")
    assert ck_watermarks(b, topic_name)[1] == 80
    assert ck_list_offset(b, topic_name, OffsetSpec.earliest()) == lo
    # Kafka's file naming (base offset, 20 digits): the first remaining segment starts at the log
    # start offset, and the active one is kept
    bases = _segment_base_offsets(brk.log_dir, topic_name)
    assert bases and bases[0] == lo, bases

    # below the log start offset: OFFSET_OUT_OF_RANGE, surfaced by librdkafka as an error ...
    c = ck_consumer(b, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        err = None

        def got_error() -> bool:
            nonlocal err
            for m in c.consume(num_messages=10, timeout=0.5):
                e = m.error()
                if e is not None and e.code() != KafkaError._PARTITION_EOF:
                    err = e
                    return True
                assert e is not None, f"read offset {m.offset()} below the log start offset {lo}"
            return False

        wait_until(got_error, what="an out-of-range error")
        assert err is not None
        assert err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), str(err)
        assert "out of range" in err.str().lower(), err.str()
    finally:
        c.close()

    # ... or reset to the earliest offset
    got = ck_read(b, topic_name, 80 - lo, start=0, **{"auto.offset.reset": "earliest"})
    assert got[0].offset() == lo
    assert as_recs(got) == recs[lo:]

    with rawwire.Conn(b) as conn:
        assert conn.fetch(topic_name, 0, 0, max_wait_ms=0).error_code == 1  # OFFSET_OUT_OF_RANGE

