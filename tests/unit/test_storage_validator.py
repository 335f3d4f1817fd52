"""The produce-side batch validator (samsa/storage/validator.py): one table of bad inputs and
the error code each gets, and what a good batch comes back as."""

from __future__ import annotations

import pytest

from samsa.protocol import compression
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch, decode_records, scan_batches
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
