"""kafka-python against a real Samsa broker: admin create, codecs, manual-assignment reads,
ListOffsets (beginning, end, by timestamp).

kafka-python compresses snappy, lz4 and zstd only through optional Python packages
(python-snappy, lz4, zstandard), which the `test` extra does not install; those codecs are
skipped, with the reason, when the package is missing.
"""

from __future__ import annotations

import time

import kafka.codec
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAlreadyExistsError

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import (
    CODECS,
    DEADLINE_S,
    Rec,
    base_timestamp_ms,
    make_records,
    stored_codecs,
    timestamp_queries,
)

HAS_CODEC = {
    "none": True,
    "gzip": kafka.codec.has_gzip(),
    "snappy": kafka.codec.has_snappy(),
    "lz4": kafka.codec.has_lz4(),
    "zstd": kafka.codec.has_zstd(),
}
CODEC_PACKAGE = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compat-kafka-python")
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}}, wait_for_metadata=True)
    finally:
        admin.close()


def consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="none", fetch_max_wait_ms=100, client_id="compat-kafka-python",
    )


def test_create_topic_with_admin_client(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    c = consumer(broker.bootstrap)
    try:
        assert c.partitions_for_topic(topic_name) == {0, 1, 2}
    finally:
        c.close()
    with pytest.raises(TopicAlreadyExistsError):
        create_topic(broker.bootstrap, topic_name)


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_and_list_offsets(broker: BrokerProcess, topic_name: str, codec: str) -> None:
    if not HAS_CODEC[codec]:
        pytest.fail(f"kafka-python needs the {CODEC_PACKAGE[codec]!r} package for {codec}: run scripts/install-deps.sh")
    b = broker.bootstrap
    create_topic(b, topic_name)
    recs = make_records(codec, 30, base_timestamp_ms())
    p = KafkaProducer(
        bootstrap_servers=b, acks="all", linger_ms=5, client_id="compat-kafka-python",
        compression_type=None if codec == "none" else codec,
    )
    try:
        offsets = []
        for half in (recs[:15], recs[15:]):
            futures = [
                p.send(topic_name, value=r.value.encode(), key=r.key.encode(), partition=0,
                       timestamp_ms=r.timestamp, headers=[(k, v.encode()) for k, v in r.headers])
                for r in half
            ]
            p.flush(DEADLINE_S)
            offsets += [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        p.close()
    assert offsets == list(range(30))

    tp = TopicPartition(topic_name, 0)
    c = consumer(b)
    try:
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < 30:
            assert time.monotonic() < deadline, f"read {len(got)}/30 records"
            for msgs in c.poll(timeout_ms=500).values():
                got += msgs
        assert [m.offset for m in got] == list(range(30))
        assert [
            Rec(m.key.decode(), m.value.decode(), m.timestamp, tuple((k, v.decode()) for k, v in m.headers))
            for m in got
        ] == recs

        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 30}
        for ts, want in timestamp_queries(recs).items():
            found = c.offsets_for_times({tp: ts})[tp]
            if want < 0:
                assert found is None, f"offsets_for_times({ts})"
            else:
                assert found is not None and found.offset == want, f"offsets_for_times({ts}) = {found}"
    finally:
        c.close()
    assert stored_codecs(b, topic_name) == {codec}
