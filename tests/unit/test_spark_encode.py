"""samsa.spark.encode: Arrow columns -> record batches (checked by the protocol's own decoder and
by build_batch, byte for byte), and Kafka's murmur2 partitioner against a plain reference."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from samsa.protocol import compression
from samsa.protocol.records import build_batch, iter_all_records, scan_batches
from samsa.spark.arrow import decode_partition
from samsa.spark.encode import RecordError, Records, encode_batches, murmur2, partition_for_keys, split_points

HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def reference_murmur2(data: bytes) -> int:
    """MurmurHash2 as Kafka's clients use it, one byte at a time (unsigned 32-bit result)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    whole = len(data) - len(data) % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = data[whole:]
    if rest:
        for i in reversed(range(len(rest))):
            h ^= rest[i] << (8 * i)
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    return h ^ (h >> 15)


def test_murmur2_matches_the_reference_on_keys_of_every_length() -> None:
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 13, 64, 301])))
            for _ in range(3000)]
    got = murmur2(pa.array(keys, pa.binary()))
    assert got.dtype == np.uint32
    assert got.tolist() == [reference_murmur2(k) for k in keys]


def test_murmur2_known_values_and_a_sliced_string_array() -> None:
    # as Java ints: what Kafka's Java client computes for these keys
    signed = {"21": -973932308, "foobar": -790332482, "abc": 479470107}
    got = murmur2(pa.array(["pad", *signed], pa.string()).slice(1)).astype(np.int64)
    assert [v - (1 << 32) if v >= 1 << 31 else v for v in got.tolist()] == list(signed.values())
    parts = partition_for_keys(pa.array(list(signed)), 7)
    assert parts.tolist() == [(reference_murmur2(k.encode()) & 0x7FFFFFFF) % 7 for k in signed]


def test_murmur2_refuses_null_keys() -> None:
    with pytest.raises(ValueError, match="null"):
        murmur2(pa.array([b"a", None]))


def _columns(n: int) -> tuple[list[bytes | None], list[bytes | None], list[list[tuple[str, bytes | None]] | None]]:
    keys = [None if i % 3 == 0 else f"k{i}".encode() for i in range(n)]
    values = [None if i % 7 == 0 else b"v" * (i * 37 % 400) + str(i).encode() for i in range(n)]
    headers = [None if i % 4 == 0 else [] if i % 4 == 1 else [("h", str(i).encode()), ("é", None)] for i in range(n)]
    return keys, values, headers


@pytest.mark.parametrize("codec", sorted(compression.CODEC_NAMES))
def test_batches_decode_to_the_rows_in_order(codec: int) -> None:
    keys, values, headers = _columns(500)
    records = Records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), pa.array(headers, HEADERS))
    batches = list(encode_batches(records, max_batch_bytes=16_000, compression=codec, timestamp_ms=1_700_000_000_123))
    assert len(batches) > 3
    for b in batches:
        (_, header), = scan_batches(b, producer_batch=True)  # one sealed batch, CRC and counts right
        assert header.compression == codec and header.base_timestamp == header.max_timestamp == 1_700_000_000_123
        assert len(b) <= 16_000 or codec != compression.NONE or header.record_count == 1
    got = [(r.key, r.value, r.headers) for b in batches for r in iter_all_records(b)]
    assert got == [(k, v, h or []) for k, v, h in zip(keys, values, headers)]
    assert [r.offset for r in iter_all_records(batches[1])][:2] == [0, 1]  # offsets are deltas from 0


def test_uncompressed_batch_equals_build_batch_byte_for_byte() -> None:
    keys, values, headers = _columns(200)
    ours, = encode_batches(Records(pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                                   pa.array(headers, HEADERS)), max_batch_bytes=1 << 20, compression=0,
                           timestamp_ms=42)
    theirs = build_batch([(k, v, h or [], 42) for k, v, h in zip(keys, values, headers)])
    assert ours == theirs


def test_strings_slices_missing_keys_and_large_types() -> None:
    values = pa.array(["skip", "a", "bb", None, "dddd"], pa.large_string()).slice(1)
    batch, = encode_batches(Records(None, values), max_batch_bytes=1 << 20, compression=0, timestamp_ms=5)
    out = decode_partition(batch, "t", 0)
    assert out.column("key").to_pylist() == [None] * 4
    assert out.column("value").to_pylist() == [b"a", b"bb", None, b"dddd"]
    assert out.column("offset").to_pylist() == [0, 1, 2, 3]


def test_concat_mixes_parts_with_and_without_headers() -> None:
    a = Records(None, pa.array([b"1", b"2"]))
    b = Records(pa.array(["k"]), pa.array([b"3"]), pa.array([[("x", b"y")]], HEADERS))
    batch, = encode_batches(Records.concat([a, b]), max_batch_bytes=1 << 20, compression=0, timestamp_ms=5)
    assert [(r.key, r.value, r.headers) for r in iter_all_records(batch)] == [
        (None, b"1", []), (None, b"2", []), (b"k", b"3", [("x", b"y")])]


def test_a_null_header_key_is_refused() -> None:
    headers = pa.array([[{"key": None, "value": b"v"}]], HEADERS)
    with pytest.raises(RecordError, match="null key"):
        Records(None, pa.array([b"v"]), headers)


def test_split_points_fill_batches_and_isolate_giant_records() -> None:
    sizes = np.array([100] * 10 + [5000] + [100] * 3)
    runs = split_points(sizes, 61 + 350)
    assert runs[0] == (0, 3) and (10, 11) in runs and runs[-1][1] == 14
    assert [s for r in runs for s in range(*r)] == list(range(14))  # every record once, in order
    assert all(sizes[a:b].sum() <= 350 or b - a == 1 for a, b in runs)
