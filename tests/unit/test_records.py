"""RecordBatch v2 codec: round trips, kafka-python in both directions, corruption, fuzzing."""

from __future__ import annotations

import gzip
import os
import random
import struct
import types
import warnings
from typing import Any

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import compression
from samsa.protocol.batch import HEADER, compute_crc, parse_header, set_log_append_time
from samsa.protocol.compression import (
    XERIAL_MAGIC,
    DecompressedTooLarge,
    InvalidRecords,
    UnsupportedCompression,
)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import (
    Record,
    build_batch,
    decode_records,
    iter_all_records,
    scan_batches,
)

with warnings.catch_warnings():
    # kafka-python's package import reads its schemas through importlib.resources' deprecated
    # open_text; the warning is attributed to importlib, past pyproject's kafka.* filter.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.codec
    import kafka.record.default_records as kafka_records

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SAMPLE: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = [
    (b"key-0", b"value-0" * 20, [], 1_700_000_000_000),
    (None, b"null key" * 20, [("trace", b"abc"), ("empty", b""), ("none", None)], 1_700_000_000_005),
    (b"key-2", None, [("h\u00e9", b"\x00\xff")], 1_699_999_999_990),  # earliest: negative delta
    (b"", b"", [], 1_700_000_000_001),
    (b"k" * 300, b"v" * 5000, [("x", b"y" * 200)] * 3, 1_700_000_000_002),
]


def _expected(base_offset: int, records: list[Any]) -> list[Record]:
    return [
        Record(base_offset + i, ts, key, value, list(headers)) for i, (key, value, headers, ts) in enumerate(records)
    ]


def _reseal(batch: bytearray, pos: int = 0) -> None:
    size = 12 + struct.unpack_from(">i", batch, pos + 8)[0]
    struct.pack_into(">I", batch, pos + 17, compute_crc(batch, pos, size))


def _code(exc: pytest.ExceptionInfo[InvalidRecords]) -> int:
    return exc.value.error_code


# --- kafka-python as the independent implementation -------------------------------------------


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python wants python-snappy, lz4 and zstandard for its codecs; where they are not
    installed, give it cramjam in their place. Its framing code (xerial blocks for snappy, the
    record format, the CRC) stays its own, which is what the cross-check is about."""
    if not kafka.codec.has_snappy():
        shim = types.SimpleNamespace(
            compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
            decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
        )
        monkeypatch.setattr(kafka.codec, "snappy", shim)
    if not kafka.codec.has_lz4():
        # cramjam's default frame links its blocks; ours never do, so reading this is a test too
        monkeypatch.setattr(kafka_records, "lz4_encode", lambda d: bytes(cramjam.lz4.compress(bytes(d))))
        monkeypatch.setattr(kafka_records, "lz4_decode", lambda d: bytes(cramjam.lz4.decompress(bytes(d))))
        monkeypatch.setattr(kafka.codec, "has_lz4", lambda: True)
    if not kafka.codec.has_zstd():
        monkeypatch.setattr(kafka_records, "zstd_encode", lambda d: bytes(cramjam.zstd.compress(bytes(d))))
        monkeypatch.setattr(kafka_records, "zstd_decode", lambda d: bytes(cramjam.zstd.decompress(bytes(d))))
        monkeypatch.setattr(kafka.codec, "has_zstd", lambda: True)


def _kafka_python_batch(codec: int, records: list[Any], **producer: Any) -> bytes:
    builder = kafka_records.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=producer.get("is_transactional", False),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 20,
    )
    for offset, (key, value, headers, ts) in enumerate(records):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: int) -> None:
    batch = build_batch(
        SAMPLE, base_offset=42, compression=codec,
        producer_id=7, producer_epoch=3, base_sequence=100, partition_leader_epoch=5,
    )  # fmt: skip
    ((pos, header),) = scan_batches(batch, producer_batch=True)
    assert pos == 0 and header.size == len(batch)
    assert header.compression == codec
    assert (header.base_offset, header.last_offset_delta, header.record_count) == (42, 4, 5)
    assert header.base_timestamp == min(r[3] for r in SAMPLE)
    assert header.max_timestamp == max(r[3] for r in SAMPLE)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 100)
    assert header.partition_leader_epoch == 5
    assert decode_records(batch) == _expected(42, SAMPLE)
    assert decode_records(memoryview(batch), header) == _expected(42, SAMPLE)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode(codec: int, kafka_python_codecs: None) -> None:
    batch = _kafka_python_batch(codec, SAMPLE, producer_id=9, producer_epoch=1, base_sequence=4)
    ((_, header),) = scan_batches(batch, producer_batch=True)
    assert header.compression == codec, "kafka-python sent it uncompressed"
    if codec == compression.SNAPPY:
        assert batch[61:69] == XERIAL_MAGIC  # kafka-python frames snappy the xerial way
    # kafka-python keeps the first record's timestamp as the base, so deltas go negative
    assert header.base_timestamp == SAMPLE[0][3]
    assert decode_records(batch) == _expected(0, SAMPLE)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec: int, kafka_python_codecs: None) -> None:
    batch = build_batch(
        SAMPLE, base_offset=1000, compression=codec,
        producer_id=11, producer_epoch=2, base_sequence=50, transactional=True,
    )  # fmt: skip
    theirs = kafka_records.DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (11, 2, 50)
    assert theirs.is_transactional and not theirs.is_control_batch
    assert theirs.next_offset == 1005
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs]
    assert got == [tuple(r) for r in _expected(1000, SAMPLE)]


def test_many_records_across_batches_and_codecs() -> None:
    records: list[tuple[bytes, bytes, list[tuple[str, bytes | None]], int]] = [
        (b"k%d" % i, b"v%d" % i * (i % 7), [], 10 * i) for i in range(500)
    ]
    buf = b"".join(build_batch(records[i : i + 100], base_offset=i, compression=i // 100) for i in range(0, 500, 100))
    assert [h.compression for _, h in scan_batches(buf)] == CODECS
    assert list(iter_all_records(buf)) == _expected(0, records)


# --- codec specifics --------------------------------------------------------------------------


def test_snappy_both_framings_decode() -> None:
    data = b"snappy payload " * 10_000
    assert compression.decompress(compression.SNAPPY, compression.compress(compression.SNAPPY, data)) == data
    framed = compression.xerial_snappy(data, block_size=4096)
    assert framed.startswith(XERIAL_MAGIC)
    assert compression.decompress(compression.SNAPPY, framed) == data
    assert compression.decompress(compression.SNAPPY, compression.xerial_snappy(b"")) == b""
    with pytest.raises(InvalidRecords):
        compression.decompress(compression.SNAPPY, framed[:-3])
    with pytest.raises(InvalidRecords):
        compression.decompress(compression.SNAPPY, framed[:20])


def test_lz4_frames_we_write_have_independent_blocks() -> None:
    frame = compression.compress(compression.LZ4, b"x" * 200_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20, "Kafka's Java reader cannot follow linked blocks"
    assert not frame[4] & 0x04, "the Java client writes no content checksum"
    linked = bytes(cramjam.lz4.compress(b"y" * 200_000))
    assert not linked[4] & 0x20
    assert compression.decompress(compression.LZ4, linked) == b"y" * 200_000


@pytest.mark.parametrize("level", [None, 1, 9])
@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 300_000])
def test_lz4_frames_we_write_read_back_everywhere(size: int, level: int | None) -> None:
    import lz4.frame

    for data in (os.urandom(size), b"x" * size, (b"key" + os.urandom(20) + b"v" * 100) * (size // 123 + 1)):
        frame = compression.compress(compression.LZ4, data, level)
        # the header python-lz4 writes for the same flags (its checksum byte included)
        assert frame[:7] == lz4.frame.compress(b"", block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                               content_checksum=False, store_size=False)[:7]
        assert lz4.frame.decompress(frame) == data
        assert bytes(cramjam.lz4.decompress(frame)) == data
        assert compression.decompress(compression.LZ4, frame) == data


def test_zstd_frames_without_content_size_and_several_frames() -> None:
    data = b"streamed zstd " * 20_000
    streamer = cramjam.zstd.Compressor()
    streamer.compress(data)
    frame = bytes(streamer.finish())
    assert frame[4] >> 6 == 0 and not frame[4] & 0x20, "expected no content size in the frame"
    assert compression.decompress(compression.ZSTD, frame) == data
    assert compression.decompress(compression.ZSTD, frame + frame) == data + data


def test_gzip_several_members_and_python_gzip() -> None:
    assert compression.decompress(compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"
    ours = compression.compress(compression.GZIP, b"hello" * 100)
    assert gzip.decompress(ours) == b"hello" * 100


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_data(codec: int) -> None:
    good = compression.compress(codec, b"some data " * 1000)
    for bad in (b"", b"garbage!" * 4, good[: len(good) // 2]):
        with pytest.raises(InvalidRecords) as exc:
            compression.decompress(codec, bad)
        assert _code(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_max_size_is_exact(codec: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "_last_ratio", {})  # no hint from earlier batches
    data = b"\x00" * 300_000  # 4.5x the first buffer guess: the grow path gets used
    packed = compression.compress(codec, data)
    assert compression.decompress(codec, packed, max_size=len(data)) == data
    with pytest.raises(DecompressedTooLarge) as exc:
        compression.decompress(codec, packed, max_size=len(data) - 1)
    assert _code(exc) == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", [compression.LZ4, compression.ZSTD])
def test_buffer_sized_from_the_last_batch(codec: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first output buffer is sized from the previous batch's ratio: a run of very
    compressible batches is decompressed in one call each, and a batch that compresses less,
    or more, or past max_size, after them still comes out exact."""
    monkeypatch.setattr(compression, "_last_ratio", {})
    calls = []
    into = getattr(cramjam, "lz4" if codec == compression.LZ4 else "zstd").decompress_into

    def counted(data, out):  # type: ignore[no-untyped-def]
        calls.append(len(out))
        return into(data, out)

    monkeypatch.setattr(getattr(cramjam, "lz4" if codec == compression.LZ4 else "zstd"), "decompress_into", counted)
    flat = b"x" * 2_000_000  # compresses > 100x
    packed = compression.compress(codec, flat)
    assert compression.decompress(codec, packed) == flat
    first = len(calls)
    assert first > 1  # no hint yet: grown from 8x
    for _ in range(3):
        assert compression.decompress(codec, packed) == flat
    assert len(calls) == first + 3  # one call each once the ratio is known
    varied = bytes(random.Random(1).randrange(256) for _ in range(50_000)) * 2
    assert compression.decompress(codec, compression.compress(codec, varied)) == varied
    assert compression.decompress(codec, packed) == flat
    with pytest.raises(DecompressedTooLarge):
        compression.decompress(codec, packed, max_size=len(flat) - 1)
    assert compression.decompress(codec, packed, max_size=len(flat)) == flat


def test_xerial_snappy_bounded_across_blocks() -> None:
    framed = compression.xerial_snappy(b"\x00" * 100_000, block_size=10_000)
    assert len(compression.decompress(compression.SNAPPY, framed, max_size=100_000)) == 100_000
    with pytest.raises(DecompressedTooLarge):
        compression.decompress(compression.SNAPPY, framed, max_size=99_999)


def test_decompression_bomb_in_a_batch() -> None:
    bomb = build_batch([(None, bytes(50 << 20), [], 0)], compression=compression.GZIP)
    assert len(bomb) < 100_000
    with pytest.raises(InvalidRecords) as exc:
        decode_records(bomb, max_size=1 << 20)
    assert isinstance(exc.value, DecompressedTooLarge)
    with pytest.raises(DecompressedTooLarge):
        list(iter_all_records(bomb, max_size=1 << 20))


@pytest.mark.parametrize("codec", [compression.SNAPPY, compression.LZ4, compression.ZSTD])
def test_decompression_bomb_other_codecs(codec: int) -> None:
    bomb = build_batch([(None, bytes(16 << 20), [], 0)], compression=codec)
    with pytest.raises(DecompressedTooLarge):
        decode_records(bomb, max_size=1 << 20)
    assert len(decode_records(bomb, max_size=17 << 20)[0].value or b"") == 16 << 20


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec(codec: int) -> None:
    batch = bytearray(build_batch(SAMPLE))
    struct.pack_into(">h", batch, 21, codec)
    _reseal(batch)
    scan_batches(batch)  # the header alone is fine
    with pytest.raises(UnsupportedCompression) as exc:
        decode_records(batch)
    assert isinstance(exc.value, InvalidRecords)
    assert _code(exc) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompression):
        compression.compress(codec, b"x")
    with pytest.raises(UnsupportedCompression):
        build_batch(SAMPLE, compression=codec)


# --- framing and header checks ----------------------------------------------------------------


def test_crc_corruption_detected() -> None:
    batch = build_batch(SAMPLE, compression=compression.LZ4)
    for where in (21, 30, 61, len(batch) - 1):  # attributes, timestamps, records, last byte
        bad = bytearray(batch)
        bad[where] ^= 0x01
        with pytest.raises(InvalidRecords) as exc:
            scan_batches(bad)
        assert _code(exc) == ErrorCode.CORRUPT_MESSAGE and "CRC" in str(exc.value)
        with pytest.raises(InvalidRecords):
            decode_records(bad)
    # baseOffset and partitionLeaderEpoch are outside the CRC: the broker rewrites them freely
    moved = bytearray(batch)
    moved[3] ^= 0x10
    moved[13] ^= 0x10
    scan_batches(moved)


def test_truncated_input() -> None:
    one = build_batch(SAMPLE[:2], base_offset=0)
    two = build_batch(SAMPLE[2:], base_offset=2)
    buf = one + two
    for cut in range(1, len(buf)):
        if cut == len(one):
            continue
        with pytest.raises(InvalidRecords) as exc:
            scan_batches(buf[:cut])
        assert _code(exc) == ErrorCode.CORRUPT_MESSAGE
        partial = scan_batches(buf[:cut], allow_partial_tail=True)
        assert [p for p, _ in partial] == ([0] if cut > len(one) else [])
    for cut in range(len(one)):
        with pytest.raises(InvalidRecords):
            decode_records(one[:cut])
    header = parse_header(one)
    with pytest.raises(InvalidRecords):
        decode_records(one[:-1], header)


def _with_header(batch: bytes, **changes: int) -> bytearray:
    fields = parse_header(batch)._replace(**changes)
    out = bytearray(batch)
    HEADER.pack_into(out, 0, *fields)
    _reseal(out)
    return out


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"magic": 1}, ErrorCode.CORRUPT_MESSAGE),
        ({"magic": 3}, ErrorCode.CORRUPT_MESSAGE),
        ({"batch_length": 48}, ErrorCode.CORRUPT_MESSAGE),
        ({"batch_length": -5}, ErrorCode.CORRUPT_MESSAGE),
        ({"record_count": -1}, ErrorCode.INVALID_RECORD),
        ({"last_offset_delta": -1}, ErrorCode.INVALID_RECORD),
        ({"last_offset_delta": 2}, ErrorCode.INVALID_RECORD),  # 5 records cannot end at delta 2
    ],
)
def test_bad_headers(changes: dict[str, int], code: int) -> None:
    bad = _with_header(build_batch(SAMPLE), **changes)
    with pytest.raises(InvalidRecords) as exc:
        scan_batches(bad)
    assert _code(exc) == code
    with pytest.raises(InvalidRecords):
        decode_records(bad)


def test_producer_batch_checks() -> None:
    compacted = _with_header(build_batch(SAMPLE), last_offset_delta=9)  # as left by compaction
    scan_batches(compacted)
    with pytest.raises(InvalidRecords) as exc:
        scan_batches(compacted, producer_batch=True)
    assert _code(exc) == ErrorCode.INVALID_RECORD
    empty = _with_header(build_batch(SAMPLE[:1])[:61], batch_length=49, record_count=0)
    assert decode_records(empty) == []
    scan_batches(empty)
    with pytest.raises(InvalidRecords):
        scan_batches(empty, producer_batch=True)


def test_max_batches() -> None:
    buf = build_batch(SAMPLE[:1]) + build_batch(SAMPLE[1:2], base_offset=1)
    assert len(scan_batches(buf, max_batches=2)) == 2
    with pytest.raises(InvalidRecords) as exc:
        scan_batches(buf, max_batches=1)
    assert _code(exc) == ErrorCode.INVALID_RECORD
    assert scan_batches(b"") == []


def test_log_append_time() -> None:
    batch = build_batch(SAMPLE, log_append_time=True)
    assert all(r.timestamp == max(s[3] for s in SAMPLE) for r in decode_records(batch))
    stamped = bytearray(build_batch(SAMPLE))
    set_log_append_time(stamped, 0, len(stamped), 1_800_000_000_000)
    assert {r.timestamp for r in decode_records(stamped)} == {1_800_000_000_000}


def test_control_and_transactional_flags() -> None:
    batch = build_batch(
        [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], 5)],
        producer_id=3,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    ((_, header),) = scan_batches(batch)
    assert header.is_control and header.is_transactional
    assert decode_records(batch)[0].key == b"\x00\x00\x00\x01"


def test_invalid_utf8_header_key_survives_round_trip() -> None:
    raw = bytearray(build_batch([(None, b"v", [("ab", b"x")], 0)]))
    at = raw.index(b"ab")
    raw[at : at + 2] = b"\xff\xfe"
    _reseal(raw)
    (record,) = decode_records(raw)
    again = build_batch([(record.key, record.value, record.headers, record.timestamp)])
    assert again == bytes(raw)


def _raw_batch(records_section: bytes, count: int, codec: int = 0) -> bytearray:
    out = bytearray(61) + records_section
    HEADER.pack_into(out, 0, 0, 49 + len(records_section), -1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1, count)
    _reseal(out)
    return out


@pytest.mark.parametrize(
    "records_section",
    [
        b"\x02\x00",  # length 1 but fields run past it
        b"\x0c\x00\x00\x00\x01\x01",  # length 6, 5 bytes follow
        b"\x0e\x00\x00\x00\x03\x01\x00\x00",  # key length -2
        b"\x0e\x00\x00\x00\x01\x03\x00\x00",  # value length -2
        b"\x0c\x00\x00\x00\x01\x01\x01",  # header count -1
        b"\x0e\x00\x00\x00\x01\x01\x02\x01",  # header key null
        b"\x0e\x00\x00\x00\x01\x01\x00\x00",  # record length 7, its fields take 6
        b"\x0c\x00\x00\x00\x01\x01\x00\x99",  # a byte left after the one record
        b"\x0c\x00\x00\x00\x01\x01\x02\x0c\x00\x00\x00\x01\x01\x00",  # fields overrun length
        b"\x00",  # record length 0
        b"\x80" * 12,  # endless varint
    ],
)
def test_garbage_records_are_invalid_record(records_section: bytes) -> None:
    with pytest.raises(InvalidRecords) as exc:
        decode_records(_raw_batch(records_section, 1))
    assert _code(exc) == ErrorCode.INVALID_RECORD


def test_record_count_mismatch() -> None:
    one = b"\x0c\x00\x00\x00\x01\x01\x00"
    assert len(decode_records(_raw_batch(one, 1))) == 1
    for count in (0, 2, 2**31 - 1):
        with pytest.raises(InvalidRecords) as exc:
            decode_records(_raw_batch(one, count))
        assert _code(exc) == ErrorCode.INVALID_RECORD


def test_build_batch_rejects_empty() -> None:
    with pytest.raises(ValueError):
        build_batch([])


# --- fuzzing ----------------------------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    for verify in (True, False):
        try:
            scan_batches(data, verify_crc=verify)
        except InvalidRecords:
            pass
        try:
            decode_records(data, verify_crc=verify)
        except InvalidRecords:
            pass


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 7), st.integers(-3, 40))
def test_fuzz_sealed_batches(records_section: bytes, codec: int, count: int) -> None:
    """Garbage behind a well-formed header with a good CRC reaches the record parser and the
    decompressors."""
    batch = _raw_batch(records_section, count, codec)
    try:
        decode_records(batch, max_size=1 << 16)
    except InvalidRecords:
        pass


_SEEDS = [build_batch(SAMPLE[:3], compression=c) for c in CODECS]


@FUZZ
@given(st.sampled_from(_SEEDS), st.lists(st.tuples(st.integers(61, 10_000), st.integers(0, 255)), max_size=4))
def test_fuzz_mutated_batches(seed: bytes, edits: list[tuple[int, int]]) -> None:
    batch = bytearray(seed)
    for where, byte in edits:
        batch[where % len(batch)] = byte
    batch[16] = 2
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    _reseal(batch)
    try:
        decoded = decode_records(batch, max_size=1 << 16)
    except InvalidRecords:
        return
    if batch == seed:
        assert decoded == _expected(0, SAMPLE[:3])


def test_crc_matches_crc32c_of_the_sealed_range() -> None:
    batch = build_batch(SAMPLE)
    assert struct.unpack_from(">I", batch, 17)[0] == crc32c(batch[21:])
