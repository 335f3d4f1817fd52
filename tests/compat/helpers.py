"""Shared data and confluent-kafka helpers for the real-client compatibility tests.

Every client test produces the same shape of records (`make_records`): keyed, with one header,
with explicit CreateTime timestamps 10 ms apart starting a minute in the past (inside any
retention, never in the future), so ListOffsets by timestamp has exact expected answers.

The per-client checks use no consumer group: consumers use manual assignment and never commit,
so that only each client's produce and fetch paths are under test (groups are tested in
tests/groups/ and with Kafka's own tools in test_kafka_tools.py). confluent-kafka refuses to
make a Consumer without `group.id`, so each gets a unique one that is never joined (no
subscribe) and never committed to (auto commit off).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
DEADLINE_S = 20.0


@dataclass(frozen=True)
class Rec:
    key: str
    value: str
    timestamp: int
    headers: tuple[tuple[str, str], ...]


def base_timestamp_ms() -> int:
    return (int(time.time()) - 60) * 1000


def make_records(tag: str, n: int, base_ts: int, value_pad: int = 40) -> list[Rec]:
    return [
        Rec(f"k{i}", f"{tag}-value-{i}-" + "x" * value_pad, base_ts + 10 * i, (("h", f"v{i}"),))
        for i in range(n)
    ]


def timestamp_queries(recs: list[Rec]) -> dict[int, int]:
    """Timestamps to look up -> expected offset (first record with timestamp >= it; -1: none)."""
    n = len(recs)
    q = {
        recs[0].timestamp - 5000: 0,
        recs[0].timestamp: 0,
        recs[n // 2].timestamp: n // 2,
        recs[n // 2].timestamp + 5: n // 2 + 1,
        recs[-1].timestamp: n - 1,
        recs[-1].timestamp + 1000: -1,
    }
    return q


def wait_until(pred: Callable[[], Any], timeout: float = DEADLINE_S, what: str = "condition") -> Any:
    """Poll `pred` until it returns something truthy; for state with no event to wait on."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


# --- confluent-kafka --------------------------------------------------------------------------


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def ck_create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = ck_admin(bootstrap)  # must outlive its futures: a destroyed client fails them
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
    )
    futures[topic].result(timeout=DEADLINE_S)


def ck_list_offset(bootstrap: str, topic: str, spec: OffsetSpec, partition: int = 0) -> int:
    """AdminClient.list_offsets for one partition and one spec (earliest, latest, timestamp)."""
    admin = ck_admin(bootstrap)
    tp = TopicPartition(topic, partition)
    futures = admin.list_offsets({tp: spec}, request_timeout=10)
    return int(futures[tp].result(timeout=DEADLINE_S).offset)


def ck_producer(bootstrap: str, **conf: Any) -> Producer:
    base = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    base.update(conf)
    return Producer(base)


def ck_produce(producer: Producer, topic: str, recs: Iterable[Rec], partition: int = 0) -> list[Message]:
    """Produce and wait for every delivery report; returns the delivered messages in order."""
    delivered: list[Message] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg)

    count = 0
    for r in recs:
        producer.produce(
            topic, r.value.encode(), r.key.encode(), partition=partition, timestamp=r.timestamp,
            headers=list(r.headers), on_delivery=on_delivery,
        )
        count += 1
    remaining = producer.flush(DEADLINE_S)
    assert not errors, f"delivery errors: {errors[:3]}"
    assert remaining == 0 and len(delivered) == count, f"{len(delivered)}/{count} delivered, {remaining} queued"
    return delivered


def ck_consumer(bootstrap: str, **conf: Any) -> Consumer:
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"compat-unjoined-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
    }
    base.update(conf)
    return Consumer(base)


def ck_read(
    bootstrap: str, topic: str, count: int, partition: int = 0, start: int = confluent_kafka.OFFSET_BEGINNING,
    timeout: float = DEADLINE_S, **conf: Any,
) -> list[Message]:
    """Read `count` records by manual assignment (no group); fails on any consumer error."""
    c = ck_consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, partition, start)])
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            assert time.monotonic() < deadline, f"read {len(out)}/{count} records of {topic} in {timeout}s"
            for m in c.consume(num_messages=500, timeout=0.5):
                err = m.error()
                if err is None:
                    out.append(m)
                elif err.code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"consumer error: {err}")
        return out
    finally:
        c.close()


def as_recs(msgs: Iterable[Message]) -> list[Rec]:
    out = []
    for m in msgs:
        key, value = m.key(), m.value()
        assert key is not None and value is not None
        hdrs = tuple((k, (v or b"").decode()) for k, v in (m.headers() or []))
        out.append(Rec(key.decode(), value.decode(), m.timestamp()[1], hdrs))
    return out


def ck_watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = ck_consumer(bootstrap)
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        return int(lo), int(hi)
    finally:
        c.close()


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(bootstrap: str, topic: str, partition: int = 0) -> set[str]:
    """The compression codecs of the batches the broker holds for a partition (raw Fetch v4)."""
    from tests.compat.rawwire import Conn, batch_headers

    names = {v: k for k, v in CODEC_IDS.items()}
    seen: set[str] = set()
    with Conn(bootstrap) as conn:
        offset = 0
        for _ in range(1000):
            res = conn.fetch(topic, partition, offset, max_wait_ms=0, partition_max_bytes=1 << 20)
            assert res.error_code == 0, f"Fetch error {res.error_code} at offset {offset}"
            batches = [b for b in batch_headers(res.records or b"") if b.complete]
            if not batches:
                break
            seen.update(names[b.attributes & 0x7] for b in batches)
            offset = batches[-1].next_offset
            if offset >= res.high_watermark:
                break
    return seen


def broker_api_versions(bootstrap: str) -> dict[int, tuple[int, int]]:
    from tests.compat.rawwire import Conn

    with Conn(bootstrap) as conn:
        return conn.api_versions(0).api_keys


def librdkafka_sends(codec: str, api_keys: dict[int, tuple[int, int]], librdkafka_2_0: bool = False) -> str:
    """The codec librdkafka actually puts on the wire for `compression.type=codec`.

    librdkafka silently sends a batch uncompressed ("Broker does not support compression type
    X: not compressing batch", debug=msg) when it decides from ApiVersions that the broker
    lacks the codec (rdkafka_msgset_writer.c, rdkafka_feature.c):
    * LZ4 needs FindCoordinator v0 advertised (a stand-in for "broker >= 0.8.2"), in every
      librdkafka version;
    * ZSTD needs Produce v7 and Fetch v10;
    * librdkafka 2.0.x (Debian 12's kcat) also needs the Produce range to reach down to the
      codec's minimum Produce version (0 for gzip, snappy and lz4; 7 for zstd), so against a
      broker without Produce v0-v2 (Kafka 4.0 dropped them too) it compresses only zstd.
    """

    def has(key: int, version: int) -> bool:
        lo, hi = api_keys.get(key, (-1, -2))
        return lo <= version <= hi

    def produce_reaches(version: int) -> bool:
        return api_keys.get(0, (99, -1))[0] <= version

    if codec == "none":
        return "none"
    if codec == "lz4" and not has(10, 0):
        return "none"
    if codec == "zstd" and not (has(0, 7) and has(1, 10)):
        return "none"
    if librdkafka_2_0 and not produce_reaches(7 if codec == "zstd" else 0):
        return "none"
    return codec
