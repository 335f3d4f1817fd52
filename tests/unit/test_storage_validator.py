"""The produce-side batch validator (samsa/storage/validator.py): one table of bad inputs and
the error code each gets, and what a good batch comes back as."""

from __future__ import annotations

import struct

import cramjam
import pytest

from samsa.protocol import compression
from samsa.protocol.batch import HEADER_SIZE, compute_crc
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch, decode_records, scan_batches, seal_batch
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.validator import InvalidBatch, validate_produce_records

RECORDS: list[tuple[bytes, bytes, list[tuple[str, bytes | None]], int]] = [(b"k%d" % i, b"v" * 20, [], 1_700_000_000_000 + i) for i in range(5)]
GOOD = build_batch(RECORDS, producer_id=7, producer_epoch=1, base_sequence=0)


def _flip_crc_covered_byte(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-1] ^= 0xFF
    return bytes(b)


def _bad_magic(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[16] = 1
    return bytes(b)


CASES = [
    ("none", None, LogConfig(), ErrorCode.INVALID_RECORD),
    ("empty", b"", LogConfig(), ErrorCode.INVALID_RECORD),
    ("too large", GOOD, LogConfig(max_message_bytes=len(GOOD) - 1), ErrorCode.MESSAGE_TOO_LARGE),
    ("truncated", GOOD[:-3], LogConfig(), ErrorCode.CORRUPT_MESSAGE),
    ("header only", GOOD[:40], LogConfig(), ErrorCode.CORRUPT_MESSAGE),
    ("bad crc", _flip_crc_covered_byte(GOOD), LogConfig(), ErrorCode.CORRUPT_MESSAGE),
    ("magic 1", _bad_magic(GOOD), LogConfig(), ErrorCode.CORRUPT_MESSAGE),
    ("two batches", GOOD + GOOD, LogConfig(), ErrorCode.INVALID_RECORD),
    ("control batch", build_batch(RECORDS[:1], control=True), LogConfig(), ErrorCode.INVALID_RECORD),
]


@pytest.mark.parametrize(("records", "config", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_produce_data_gets_its_error_code(records: bytes | None, config: LogConfig, code: ErrorCode) -> None:
    with pytest.raises(InvalidBatch) as info:
        validate_produce_records(records, config)
    assert info.value.code == code and info.value.kafka_error == code.name


def test_good_batch_comes_back_writable_with_its_header() -> None:
    v = validate_produce_records(GOOD, LogConfig())
    assert isinstance(v.buf, bytearray) and bytes(v.buf) == GOOD
    assert [(pos, h.record_count, h.producer_id) for pos, h in v.headers] == [(0, 5, 7)]
    assert v.log_append_time is False
    assert validate_produce_records(memoryview(bytearray(GOOD)), LogConfig(message_timestamp_type="LogAppendTime")
                                    ).log_append_time is True


def test_a_bytearray_is_passed_through_not_copied() -> None:
    buf = bytearray(GOOD)
    assert validate_produce_records(buf, LogConfig()).buf is buf


@pytest.mark.parametrize("topic_codec", ["gzip", "lz4", "uncompressed"])
def test_compression_type_reencodes_keeping_records_and_producer_fields(topic_codec: str) -> None:
    sent = build_batch(RECORDS, compression=compression.SNAPPY, producer_id=7, producer_epoch=1, base_sequence=3)
    v = validate_produce_records(sent, LogConfig(), topic_codec)
    (_, h), = v.headers
    want = {"gzip": compression.GZIP, "lz4": compression.LZ4, "uncompressed": compression.NONE}[topic_codec]
    assert h.compression == want
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 1, 3)
    assert [(r.key, r.value, r.timestamp) for r in decode_records(v.buf, h)] == [(k, v_, t) for k, v_, _, t in RECORDS]
    scan_batches(v.buf, verify_crc=True)  # sealed


def test_producer_compression_type_keeps_the_batch() -> None:
    sent = build_batch(RECORDS, compression=compression.GZIP)
    assert bytes(validate_produce_records(sent, LogConfig(), "producer").buf) == sent
    assert bytes(validate_produce_records(sent, LogConfig(), "gzip").buf) == sent  # already the topic's codec


# -- CreateTime bounds (message.timestamp.before/after.max.ms) -----------------------------------

NOW = 1_800_000_000_000
HOUR = 3_600_000


def _stamped(*timestamps: int) -> bytes:
    return build_batch([(b"k", b"v", [], ts) for ts in timestamps])


@pytest.mark.parametrize("timestamps", [(NOW,), (NOW - 10 * 365 * 24 * HOUR,), (NOW + HOUR // 2,), (-1,)])
def test_timestamps_within_the_default_bounds_pass(timestamps: tuple[int, ...]) -> None:
    validate_produce_records(_stamped(*timestamps), LogConfig(), now_ms=NOW)


@pytest.mark.parametrize(("timestamps", "config"), [
    ((4_102_444_800_000,), LogConfig()),  # the year 2100: past Kafka 4's one-hour default
    ((NOW, NOW + 2 * HOUR), LogConfig()),  # the largest timestamp of the batch counts
    ((1000,), LogConfig(message_timestamp_before_max_ms=24 * HOUR)),  # 1970
    ((-(2**63) + 1,), LogConfig(message_timestamp_before_max_ms=24 * HOUR)),  # near Long.MIN
    ((NOW - 2 * HOUR,), LogConfig(message_timestamp_difference_max_ms=HOUR)),  # deprecated: bounds both ways
    ((NOW + 2 * HOUR,), LogConfig(message_timestamp_after_max_ms=LONG_MAX, message_timestamp_difference_max_ms=HOUR)),
])
def test_timestamps_out_of_bounds_are_invalid_timestamp(timestamps: tuple[int, ...], config: LogConfig) -> None:
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(_stamped(*timestamps), config, now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP


def test_log_append_time_topics_ignore_the_producers_timestamps() -> None:
    validate_produce_records(_stamped(4_102_444_800_000), LogConfig(message_timestamp_type="LogAppendTime"), now_ms=NOW)


def test_without_bounds_every_timestamp_passes() -> None:
    validate_produce_records(_stamped(-(2**63) + 1, 4_102_444_800_000),
                             LogConfig(message_timestamp_after_max_ms=LONG_MAX), now_ms=NOW)


# -- the records themselves (Kafka's per-record validation) ---------------------------------------

def _sealed(body: bytes, count: int, codec: int = compression.NONE, **kw: int) -> bytes:
    ts = kw.pop("ts", NOW)
    return seal_batch(body, count, ts, kw.pop("max_ts", ts), compression=codec, **kw)


def _body(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


def _as_compressed(payload: bytes, count: int, codec: int) -> bytes:
    """A batch whose records section is `payload` as it is, labelled with `codec`."""
    b = bytearray(seal_batch(payload, count, NOW, NOW))
    struct.pack_into(">h", b, 21, codec)
    struct.pack_into(">I", b, 17, compute_crc(b, 0, len(b)))
    return bytes(b)


def test_a_batch_claiming_two_billion_records_in_a_few_bytes_is_refused() -> None:
    poison = _sealed(_body([(b"k", b"v", [], NOW)]), 2**31 - 1)  # lastOffsetDelta matches, CRC is valid
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(poison, LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and "declares 2147483647 records but holds 1" in str(e.value)


@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
                                   compression.ZSTD])
def test_garbage_records_are_invalid_record_in_every_codec(codec: int) -> None:
    body = bytearray(_body(RECORDS))
    body[1] ^= 0x40  # inside the first record: its attributes byte is fine, so flip its length instead
    body[0] = 0x7F
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(_sealed(bytes(body), len(RECORDS), codec), LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and "record 0" in str(e.value)


def test_offset_deltas_must_count_up_from_zero() -> None:
    a, b = _body(RECORDS[:1]), _body(RECORDS[:1])  # two records, both with offset delta 0
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(_sealed(a + b, 2), LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and "record 1: offset delta 0, expected 1" in str(e.value)


def test_a_zip_bomb_is_refused_at_the_bound_without_decompressing_it_all() -> None:
    bomb = cramjam.zstd.compress(bytes(compression.DEFAULT_MAX_SIZE + 1024))  # a few kB of zstd
    batch = _as_compressed(bytes(bomb), 1, compression.ZSTD)
    assert len(batch) < 10_000
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(batch, LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_compressed_data_the_codec_cannot_read_is_corrupt_message() -> None:
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(_as_compressed(b"\x00not lz4 at all", 1, compression.LZ4), LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE


def test_each_record_timestamp_is_checked_and_reported_by_index() -> None:
    records = [(b"k", b"v", [], ts) for ts in (NOW, NOW + 2 * HOUR, NOW, NOW + 3 * HOUR)]
    # the header's maxTimestamp claims NOW: only a walk of the records finds records 1 and 3
    batch = seal_batch(_body(records), 4, NOW, NOW)
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(batch, LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in e.value.record_errors] == [1, 3]
    assert f"[{-(2**63)}, {NOW + HOUR}]" in e.value.record_errors[0][1]  # no lower bound by default


def test_a_wrong_max_timestamp_is_set_right_and_the_crc_resealed() -> None:
    records = [(b"k", b"v", [], ts) for ts in (NOW, NOW + 5, NOW + 2)]
    batch = seal_batch(_body(records), 3, NOW, NOW)  # claims NOW, the records say NOW + 5
    v = validate_produce_records(batch, LogConfig(), now_ms=NOW)
    (_, h), = v.headers
    assert h.max_timestamp == NOW + 5
    assert scan_batches(v.buf, verify_crc=True)[0][1].max_timestamp == NOW + 5


def test_a_producer_may_not_send_log_append_time() -> None:
    batch = build_batch(RECORDS, log_append_time=True)
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(batch, LogConfig(message_timestamp_type="LogAppendTime"), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_TIMESTAMP and len(e.value.record_errors) == len(RECORDS)


def test_a_compacted_topic_refuses_records_without_a_key() -> None:
    batch = build_batch([(b"k", b"v", [], NOW), (None, b"v", [], NOW), (None, None, [], NOW)])
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(batch, LogConfig(cleanup_policy="compact"), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and [i for i, _ in e.value.record_errors] == [1, 2]
    validate_produce_records(batch, LogConfig(), now_ms=NOW)  # a delete topic takes them


def test_an_idempotent_batch_needs_a_sequence() -> None:
    with pytest.raises(InvalidBatch) as e:
        validate_produce_records(build_batch(RECORDS, producer_id=7, producer_epoch=0, base_sequence=-1),
                                 LogConfig(), now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD and "sequence" in str(e.value)
