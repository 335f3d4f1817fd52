"""samsa.spark.arrow: record batches -> Arrow with Spark's Kafka schema, every codec."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from samsa.protocol import compression
from samsa.protocol.compression import InvalidRecords
from samsa.protocol.records import _varint, build_batch, iter_all_records
from samsa.spark.arrow import KAFKA_SCHEMA, KAFKA_SCHEMA_WITH_HEADERS, decode_partition, kafka_schema

CODECS = sorted(compression.CODEC_NAMES)


def _records(n: int, first: int = 0):
    out = []
    for i in range(first, first + n):
        key = None if i % 3 == 0 else f"k{i}".encode()
        value = None if i % 7 == 0 else (b"v" * (i % 300)) + str(i).encode()
        headers = [] if i % 2 else [("h", f"{i}".encode()), ("n", None)]
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


def _log(codec: int, batches: int = 4, per: int = 50) -> bytes:
    return b"".join(
        build_batch(_records(per, b * per), base_offset=b * per, compression=codec) for b in range(batches)
    )


def test_schema_is_sparks_arrow_schema():
    assert kafka_schema() == KAFKA_SCHEMA
    assert [str(f.type) for f in KAFKA_SCHEMA] == [
        "binary", "binary", "string", "int32", "int64", "timestamp[us, tz=UTC]", "int32",
    ]  # fmt: skip
    assert all(f.nullable for f in KAFKA_SCHEMA_WITH_HEADERS)
    assert str(KAFKA_SCHEMA_WITH_HEADERS.field("headers").type) == "list<element: struct<key: string, value: binary>>"


@pytest.mark.parametrize("codec", CODECS)
def test_decode_matches_record_decoder(codec):
    data = _log(codec)
    batch = decode_partition(data, "orders", 3, include_headers=True)
    assert batch.schema == KAFKA_SCHEMA_WITH_HEADERS
    expected = list(iter_all_records(data))
    assert batch.num_rows == len(expected) == 200
    rows = batch.to_pylist()
    for row, rec in zip(rows, expected, strict=True):
        assert row["key"] == rec.key and row["value"] == rec.value
        assert row["topic"] == "orders" and row["partition"] == 3 and row["offset"] == rec.offset
        assert int(row["timestamp"].timestamp() * 1000) == rec.timestamp
        assert row["timestampType"] == 0
        assert row["headers"] == ([{"key": k, "value": v} for k, v in rec.headers] if rec.headers else None)


@pytest.mark.parametrize("codec", CODECS)
def test_offset_bounds_skip_records_and_batches(codec):
    data = _log(codec)
    batch = decode_partition(data, "t", 0, start_offset=30, end_offset=161)
    assert batch.column("offset").to_pylist() == list(range(30, 161))
    assert batch.schema == KAFKA_SCHEMA
    assert decode_partition(data, "t", 0, start_offset=200).num_rows == 0
    assert decode_partition(data, "t", 0, end_offset=0).schema == KAFKA_SCHEMA


def test_log_append_time_and_control_batches():
    lat = build_batch([(None, b"a", [], 5), (None, b"b", [], 5)], base_offset=0, log_append_time=True)
    control = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [], 6)], base_offset=2, control=True)
    plain = build_batch([(None, b"c", [], 7)], base_offset=3)
    batch = decode_partition(lat + control + plain, "t", 1)
    assert batch.column("offset").to_pylist() == [0, 1, 3]
    assert batch.column("timestampType").to_pylist() == [1, 1, 0]
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [5000, 5000, 7000]


def test_partial_tail_is_ignored_and_empty_input():
    data = _log(0, batches=2)
    assert decode_partition(data + data[:30], "t", 0).num_rows == 100
    assert decode_partition(b"", "t", 0).num_rows == 0


def test_corrupt_records_raise_invalid_records():
    good = bytearray(build_batch([(None, b"x" * 10, [], 1)] * 3))
    bad = bytearray(good)
    bad[61] = 0x7F  # first record's length: negative -> framing breaks
    with pytest.raises(InvalidRecords):
        decode_partition(bytes(bad), "t", 0, verify_crc=False)
    with pytest.raises(InvalidRecords):
        decode_partition(bytes(bad), "t", 0)  # CRC


def test_many_records_all_codecs_round_trip():
    value = b"x" * 100
    for codec in CODECS:
        data = b"".join(
            build_batch([(None, value, [], i) for i in range(500)], base_offset=b * 500, compression=codec)
            for b in range(10)
        )
        batch = decode_partition(data, "t", 0, start_offset=250)
        assert batch.num_rows == 4750
        assert batch.column("value").null_count == 0
        assert set(batch.column("value").to_pylist()) == {value}


def _runs_of_sizes(rng: random.Random, n: int) -> list[tuple[bytes | None, bytes | None, list, int]]:
    """Records in runs of one value size (some sizes with 2- and 3-byte length varints) mixed
    with stretches of sizes that change at every record, keys now and then."""
    out: list[tuple[bytes | None, bytes | None, list, int]] = []
    while len(out) < n:
        if rng.random() < 0.5:
            size = rng.choice([0, 1, 50, 63, 64, 100, 8180, 9000])
            out += [(None, b"v" * size, [], 1_000 + len(out) + i) for i in range(rng.randint(1, 300))]
        else:
            for _ in range(rng.randint(1, 40)):
                key = b"k" * rng.randint(0, 70) if rng.random() < 0.3 else None
                out.append((key, bytes([len(out) % 251]) * rng.randint(0, 200), [], 1_000 + len(out)))
    return out[:n]


@pytest.mark.parametrize("seed", range(8))
def test_framing_runs_and_mixed_sizes_match_the_record_decoder(seed):
    rng = random.Random(seed)
    data = b"".join(
        build_batch(_runs_of_sizes(rng, rng.randint(1, 3000)), base_offset=b * 3000, compression=rng.choice(CODECS))
        for b in range(3)
    )
    batch = decode_partition(data, "t", 0)
    expected = list(iter_all_records(data))
    assert batch.column("offset").to_pylist() == [r.offset for r in expected]
    assert batch.column("key").to_pylist() == [r.key for r in expected]
    assert batch.column("value").to_pylist() == [r.value for r in expected]


def test_a_bad_length_inside_a_run_of_equal_records_is_caught():
    records = [(None, b"x" * 100, [], 0)] * 2000  # equal sizes but for the offset delta's varint width
    batch = build_batch(records)
    starts, pos = [], 61  # records start after the 61-byte batch header
    while pos < len(batch):
        starts.append(pos)
        length, after = _varint(batch, pos)
        pos = after + length
    assert len(starts) == 2000
    for victim in (1, 63, 64, 700, 1999):
        bad = bytearray(batch)
        bad[starts[victim]] = 0x02  # length 1 instead of the record's real length
        with pytest.raises(InvalidRecords):
            decode_partition(bytes(bad), "t", 0, verify_crc=False)


def test_column_varints_match_the_record_decoder_at_every_width() -> None:
    """`_varints` (all records at once) against `_varint` (one at a time): every width from 1 to
    10 bytes, mixed in one column, the extremes of int64; an 11-byte varint is an error."""
    import numpy as np

    from samsa.protocol.records import _put_varint
    from samsa.spark.arrow import _varints

    rng = random.Random(3)
    values = [0, -1, 1, 63, -64, 64, -65, 8191, 8192, 2**63 - 1, -(2**63)]
    values += [rng.randrange(-(2 ** rng.randrange(1, 64)), 2 ** rng.randrange(1, 64)) for _ in range(3000)]
    buf = bytearray()
    starts = []
    for v in values:
        starts.append(len(buf))
        _put_varint(buf, v)
    buf += bytes(10)
    got, after = _varints(np.frombuffer(bytes(buf), dtype=np.uint8), np.array(starts, dtype=np.int64))
    want = [_varint(bytes(buf), p) for p in starts]
    assert got.tolist() == [v for v, _ in want] == values
    assert after.tolist() == [p for _, p in want]
    with pytest.raises(InvalidRecords, match="longer than 10 bytes"):
        _varints(np.frombuffer(b"\x01" + b"\xff" * 11 + bytes(10), dtype=np.uint8), np.array([0, 1]))
