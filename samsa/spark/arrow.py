"""Record batches of one topic-partition -> one Arrow RecordBatch with Spark's Kafka schema.

The schema is exactly what Spark's Arrow conversion gives for its Kafka source (UTC, micro-
seconds, every field nullable): key binary, value binary, topic string, partition int32, offset
int64, timestamp timestamp[us, tz=UTC], timestampType int32, and, with `include_headers`,
headers list<element: struct<key: string, value: binary>> (null for a record without headers).

How it stays fast (no Python object per record, no pyarrow call per record):

1. `scan_batches` frames and CRC-checks the batches; control batches and batches wholly outside
   [start, end) are skipped; the rest are decompressed and their record sections joined.
2. Where each record begins: when all records of a batch have one size (fixed-size values),
   numpy checks that at once; otherwise one Python loop hops from record to record using
   only the leading length varint.
3. numpy decodes the varints of all records at once, one field at a time (length,
   timestampDelta, offsetDelta, keyLength, valueLength, headerCount), so the per-record
   Python cost is the hop alone.
4. key and value columns are cut out of the joined buffer without copying record by record:
   a binary array whose offsets alternate gap / field over the whole buffer is built from
   buffers, and Arrow's `take` gathers the odd elements (the fields) in C++.

Anything inconsistent (bad lengths, a field overrunning its record) is handed to
`decode_records`, which raises the precise `InvalidRecords`. Headers, when asked for, are
parsed in Python for the records that have any. Aborted transactional records are not filtered.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (imported by the first take(); load it with this module, not mid-batch)

from samsa.protocol import compression
from samsa.protocol.batch import ATTR_TIMESTAMP_TYPE, HEADER_SIZE
from samsa.protocol.compression import DEFAULT_MAX_SIZE, InvalidRecords
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import _varint, decode_records, scan_batches

_Buffer = bytes | bytearray | memoryview

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_TYPE))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
)
KAFKA_SCHEMA_WITH_HEADERS = KAFKA_SCHEMA.append(pa.field("headers", HEADERS_TYPE))

_INT32_MAX = 2**31 - 1


def kafka_schema(include_headers: bool = False) -> pa.Schema:
    return KAFKA_SCHEMA_WITH_HEADERS if include_headers else KAFKA_SCHEMA


class _Sections:
    """The record sections of the batches to decode, joined, with per-batch facts."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.size = 0
        self.positions: list[np.ndarray] = []  # per batch: where each record (its length varint) begins
        self.records = 0
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_timestamps: list[int] = []
        self.max_timestamps: list[int] = []
        self.log_append: list[bool] = []


def _hop(body: bytes, base: int, positions: list[int]) -> bool:
    """Append where each record of `body` (at `base` in the joined buffer) begins.

    Only the length varint is read, inline for the 1- and 2-byte cases (records under 8 KiB);
    its sign is checked later with the other fields, so here a length is taken as >= 0.
    """
    pos = 0
    end = len(body)
    append = positions.append
    try:
        while pos < end:
            append(base + pos)
            b = body[pos]
            if b < 0x80:
                pos += 1 + (b >> 1)
                continue
            b2 = body[pos + 1]
            if b2 < 0x80:
                pos += 2 + ((b2 << 7 | b & 0x7F) >> 1)
                continue
            length, pos = _varint(body, pos)
            if length <= 0:
                return False
            pos += length
    except (IndexError, InvalidRecords):
        return False
    return pos == end


def _uniform(body: bytes, count: int) -> np.ndarray | None:
    """Where the records begin when all `count` records of `body` have the same size (fixed-size
    values are common): checked for every record at once, without a Python step per record.
    None when they do not."""
    if count <= 1 or not body:
        return None
    try:
        length, size = _varint(body, 0)
    except (IndexError, InvalidRecords):
        return None
    stride = size + length
    if length <= 0 or stride * count != len(body):
        return None
    data = np.frombuffer(body, dtype=np.uint8)
    starts = np.arange(count, dtype=np.int64) * stride
    for k in range(size):  # the same length varint, byte for byte, at every stride
        if not (data[starts + k] == body[k]).all():
            return None
    return starts


def _collect(buf: _Buffer, start: int | None, end: int | None, verify_crc: bool, max_size: int) -> _Sections:
    view = memoryview(buf)
    out = _Sections()
    for pos, header in scan_batches(buf, verify_crc=verify_crc, allow_partial_tail=True):
        if header.is_control or header.record_count == 0:
            continue
        if (start is not None and header.next_offset <= start) or (end is not None and header.base_offset >= end):
            continue
        raw = view[pos + HEADER_SIZE : pos + header.size]
        codec = header.compression
        body = bytes(raw) if codec == compression.NONE else bytes(compression.decompress(codec, raw, max_size))
        starts = _uniform(body, header.record_count)
        if starts is None:
            hops: list[int] = []
            if not _hop(body, 0, hops) or len(hops) != header.record_count:
                decode_records(view[pos : pos + header.size], header, max_size=max_size)  # raises the precise error
                raise InvalidRecords(f"batch at offset {header.base_offset}: records do not frame",
                                     ErrorCode.INVALID_RECORD)
            starts = np.array(hops, dtype=np.int64)
        out.positions.append(starts + out.size)
        out.records += len(starts)
        out.bodies.append(body)
        out.size += len(body)
        out.counts.append(header.record_count)
        out.base_offsets.append(header.base_offset)
        out.base_timestamps.append(header.base_timestamp)
        out.max_timestamps.append(header.max_timestamp)
        out.log_append.append(bool(header.attributes & ATTR_TIMESTAMP_TYPE))
    return out


def _varints(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag varints starting at every position of `pos` -> (values, next positions)."""
    b = data[pos].astype(np.uint64)
    raw = b & 0x7F
    size = np.ones(len(pos), dtype=np.int64)
    todo = np.flatnonzero(b >= 0x80)
    shift = 7
    while len(todo):
        if shift > 63:
            raise InvalidRecords("varint longer than 10 bytes", ErrorCode.INVALID_RECORD)
        b = data[pos[todo] + size[todo]].astype(np.uint64)
        raw[todo] |= (b & 0x7F) << np.uint64(shift)
        size[todo] += 1
        todo = todo[b >= 0x80]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, pos + size


def _fail(why: str) -> None:
    raise InvalidRecords(f"records of the fetched batches are inconsistent: {why}", ErrorCode.INVALID_RECORD)


def _binary_column(joined: bytes, field_start: np.ndarray, length: np.ndarray, keep: np.ndarray) -> pa.Array:
    """Fields [start, start+length) of `joined` (length -1 = null) for the records in `keep`."""
    n = len(field_start)
    field_end = field_start + np.maximum(length, 0)
    bounds = np.empty(2 * n + 1, dtype=np.int64)
    bounds[0] = 0
    bounds[1::2] = field_start
    bounds[2::2] = field_end
    null = length < 0
    validity = None
    if null.any():
        valid = np.ones(2 * n, dtype=bool)
        valid[1::2] = ~null
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    big_type = pa.binary() if len(joined) <= _INT32_MAX else pa.large_binary()
    offsets = bounds.astype(np.int32) if big_type == pa.binary() else bounds
    spread = pa.Array.from_buffers(big_type, 2 * n, [validity, pa.py_buffer(offsets), pa.py_buffer(joined)])
    column = spread.take(pa.array(2 * keep + 1))
    return column if big_type == pa.binary() else column.cast(pa.binary())


def _repeated_string(value: str, n: int) -> pa.Array:
    encoded = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(encoded)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)])


def _primitive(values: np.ndarray, arrow_type: pa.DataType) -> pa.Array:
    return pa.Array.from_buffers(arrow_type, len(values), [None, pa.py_buffer(np.ascontiguousarray(values))])


def _headers_column(joined: bytes, header_pos: np.ndarray, header_count: np.ndarray) -> pa.Array:
    """headers for each record: parsed in Python, only for records that have any."""
    n = len(header_pos)
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    keys: list[str] = []
    values: list[bytes | None] = []
    varint = _varint
    for i in np.flatnonzero(header_count > 0).tolist():
        pos = int(header_pos[i])
        for _ in range(int(header_count[i])):
            name_length, pos = varint(joined, pos)
            keys.append(joined[pos : pos + name_length].decode("utf-8", "surrogateescape"))
            pos += name_length
            value_length, pos = varint(joined, pos)
            if value_length < 0:
                values.append(None)
            else:
                values.append(joined[pos : pos + value_length])
                pos += value_length
    np.cumsum(header_count, out=list_offsets[1:])
    struct = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())], fields=list(HEADER_TYPE)
    )
    mask = pa.array(header_count == 0)
    return pa.ListArray.from_arrays(pa.array(list_offsets), struct, type=HEADERS_TYPE, mask=mask)


def decode_partition(
    data: _Buffer,
    topic: str,
    partition: int,
    *,
    start_offset: int | None = None,
    end_offset: int | None = None,
    include_headers: bool = False,
    verify_crc: bool = True,
    max_size: int = DEFAULT_MAX_SIZE,
) -> pa.RecordBatch:
    """The records of `data` (concatenated v2 batches, as a Fetch returns them) with
    start_offset <= offset < end_offset, as one RecordBatch of `kafka_schema(include_headers)`.

    A partial batch at the end of `data` is ignored; control batches are skipped.
    """
    schema = kafka_schema(include_headers)
    sections = _collect(data, start_offset, end_offset, verify_crc, max_size)
    if not sections.records:
        return pa.RecordBatch.from_pylist([], schema=schema)
    joined = b"".join(sections.bodies)
    buf = np.frombuffer(joined + bytes(10), dtype=np.uint8)  # padding: a bad varint reads zeros, not past the end
    length, starts = _varints(buf, np.concatenate(sections.positions))
    if (length <= 0).any():
        _fail("a record length is not positive")
    ends = starts + length

    ts_delta, pos = _varints(buf, starts + 1)  # + 1: attributes
    offset_delta, pos = _varints(buf, pos)
    key_length, key_start = _varints(buf, pos)
    value_length, value_start = _varints(buf, key_start + np.maximum(key_length, 0))
    header_count, header_pos = _varints(buf, value_start + np.maximum(value_length, 0))
    if (key_length < -1).any() or (value_length < -1).any() or (header_count < 0).any():
        _fail("negative length")
    if (header_pos > ends).any() or ((header_count == 0) & (header_pos != ends)).any():
        _fail("a record's fields do not match its length")

    counts = np.array(sections.counts, dtype=np.int64)
    offsets = np.repeat(np.array(sections.base_offsets, dtype=np.int64), counts) + offset_delta
    log_append = np.repeat(np.array(sections.log_append, dtype=bool), counts)
    timestamps = np.where(
        log_append,
        np.repeat(np.array(sections.max_timestamps, dtype=np.int64), counts),
        np.repeat(np.array(sections.base_timestamps, dtype=np.int64), counts) + ts_delta,
    )

    keep_mask = np.ones(len(offsets), dtype=bool)
    if start_offset is not None:
        keep_mask &= offsets >= start_offset
    if end_offset is not None:
        keep_mask &= offsets < end_offset
    keep = np.flatnonzero(keep_mask)
    n = len(keep)
    columns = [
        _binary_column(joined, key_start, key_length, keep),
        _binary_column(joined, value_start, value_length, keep),
        _repeated_string(topic, n),
        _primitive(np.full(n, partition, dtype=np.int32), pa.int32()),
        _primitive(offsets[keep], pa.int64()),
        _primitive(timestamps[keep] * 1000, TIMESTAMP_TYPE),
        _primitive(log_append[keep].astype(np.int32), pa.int32()),
    ]
    if include_headers:
        columns.append(_headers_column(joined, header_pos[keep], header_count[keep]))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
