"""Record batches of one topic-partition -> one Arrow RecordBatch with Spark's Kafka schema.

The schema is exactly what Spark's Arrow conversion gives for its Kafka source (UTC, micro-
seconds, every field nullable): key binary, value binary, topic string, partition int32, offset
int64, timestamp timestamp[us, tz=UTC], timestampType int32, and, with `include_headers`,
headers list<element: struct<key: string, value: binary>> (null for a record without headers).

How it stays fast (no Python object per record, no pyarrow call per record):

1. `scan_batches` frames and CRC-checks the batches; control batches and batches wholly outside
   [start, end) are skipped; the rest are decompressed and their record sections joined.
2. Where each record begins (`_frame`): runs of records of one size are found and checked
   by numpy at once; only where sizes keep changing does a Python loop hop from record to
   record, reading only the leading length varint.
3. numpy decodes the varints of all records at once, one field at a time (length,
   timestampDelta, offsetDelta, keyLength, valueLength, headerCount).
4. key and value columns are cut out of the joined buffer without copying record by record:
   a binary array whose offsets alternate gap / field over the whole buffer is built from
   buffers, and Arrow's `take` gathers the odd elements (the fields) in C++.

Anything inconsistent (bad lengths, a field overrunning its record) is handed to
`decode_records`, which raises the precise `InvalidRecords`. Headers, when asked for, are
parsed in Python for the records that have any. Aborted transactional records are not filtered.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        self.bodies: list[_Buffer] = []
        self.size = 0
        self.positions: list[np.ndarray] = []  # per batch: where each record (its length varint) begins
        self.records = 0
        self.counts: list[int] = []
        self.base_offsets: list[int] = []
        self.base_timestamps: list[int] = []
        self.max_timestamps: list[int] = []
        self.log_append: list[bool] = []


def _hop(body: _Buffer, pos: int, count: int, out: list[int]) -> int:
    """Append where each of the next `count` records of `body` begins, from `pos`, one record at
    a time; -> the position after them, or -1 when they do not frame.

    Only the length varint is read, inline for the 1- and 2-byte cases (records under 8 KiB);
    its sign is checked later with the other fields, so here a length is taken as >= 0.
    """
    end = len(body)
    append = out.append
    try:
        for _ in range(count):
            if pos >= end:
                return -1
            append(pos)
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
                return -1
            pos += length
    except (IndexError, InvalidRecords):
        return -1
    return pos


_PROBE = 64  # records checked at once for a run of equal sizes, at first
_SCALAR = 32  # records framed one at a time after a short run, at first


def _frame(body: _Buffer, count: int) -> np.ndarray | None:
    """Where each of the `count` records of `body` begins, or None when they do not frame exactly.

    Records follow each other, each led by its length varint, so a record's start depends on
    every record before it. Records of one size in a row (fixed-size values; the offset and
    timestamp deltas change their varint's width rarely) are framed in runs: from a record of
    size S at p, numpy checks at once that the records at p + S, p + 2S, ... also begin with
    the same length varint, and the first that does not ends the run. Where sizes keep
    changing, records are framed one at a time (`_hop`) for a stretch that doubles each time a
    run check finds nothing to gain, so mixed sizes cost about what a plain loop costs.
    """
    data = np.frombuffer(body, dtype=np.uint8)
    end = len(body)
    parts: list[np.ndarray] = []
    pos = 0
    todo = count
    probe = _PROBE
    scalar = _SCALAR
    while todo:
        try:
            length, after = _varint(body, pos)
        except (IndexError, InvalidRecords):
            return None
        if length <= 0:
            return None
        width = after - pos
        size = width + length
        n = min(todo, probe, (end - pos) // size)
        if n <= 0:
            return None
        starts = pos + size * np.arange(n, dtype=np.int64)
        same = np.ones(n, dtype=bool)
        for k in range(width):  # the same length varint, byte for byte, at every stride
            same &= data[starts + k] == body[pos + k]
        run = n if same.all() else int(np.argmin(same))
        parts.append(starts[:run])
        pos += run * size
        todo -= run
        if run == n:
            probe *= 2
            continue
        probe = _PROBE
        if run < 8 and todo:  # sizes vary here: frame a stretch one record at a time
            one: list[int] = []
            pos = _hop(body, pos, min(todo, scalar), one)
            if pos < 0:
                return None
            parts.append(np.array(one, dtype=np.int64))
            todo -= len(one)
            scalar = min(scalar * 2, 4096)
        else:
            scalar = _SCALAR
    if pos != end:
        return None
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _collect(buf: _Buffer, start: int | None, end: int | None, verify_crc: bool, max_size: int,
             aborted: Sequence[tuple[int, int]] = ()) -> _Sections:
    view = memoryview(buf)
    out = _Sections()
    pending = sorted(aborted, key=lambda a: a[1])  # (producer id, first offset), as a read_committed fetch lists them
    skipping: set[int] = set()  # producers inside an aborted transaction (Kafka's consumer rule)
    for pos, header in scan_batches(buf, verify_crc=verify_crc, allow_partial_tail=True):
        while pending and pending[0][1] <= header.last_offset:
            skipping.add(pending.pop(0)[0])
        if header.is_control:
            skipping.discard(header.producer_id)  # its marker: the aborted transaction ends here
            continue
        if header.record_count == 0 or (header.is_transactional and header.producer_id in skipping):
            continue
        if (start is not None and header.next_offset <= start) or (end is not None and header.base_offset >= end):
            continue
        raw = view[pos + HEADER_SIZE : pos + header.size]
        codec = header.compression
        # no copy here: the bodies are joined into one buffer below
        body = raw if codec == compression.NONE else compression.decompress(codec, raw, max_size)
        starts = _frame(body, header.record_count)
        if starts is None:
            decode_records(view[pos : pos + header.size], header, max_size=max_size)  # raises the precise error
            raise InvalidRecords(f"batch at offset {header.base_offset}: records do not frame",
                                 ErrorCode.INVALID_RECORD)
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
    """Zigzag varints starting at every position of `pos` -> (values, next positions).

    Byte k of every varint is read in one gather and kept where the varint has not ended yet:
    whole-array steps, one per byte of the longest varint, rather than steps over the subset
    still going (most fields here are 1-3 bytes wide, mixed, so subsets cost more than they save).
    `data` must extend 9 bytes past the last varint's first byte (the caller pads it).
    """
    b = data[pos]
    more = b >= 0x80
    if not more.any():  # all one byte (attributes-sized fields, most key lengths and header counts)
        v = b.astype(np.int64)
        return (v >> 1) ^ -(v & 1), pos + 1
    raw = (b & 0x7F).astype(np.uint64)
    size = more.astype(np.int64)
    size += 1
    k = 1
    while True:
        b = data[pos + k]
        raw |= np.where(more, (b & 0x7F).astype(np.uint64) << np.uint64(7 * k), np.uint64(0))
        more &= b >= 0x80
        if not more.any():
            break
        size += more
        k += 1
        if k == 10:
            raise InvalidRecords("varint longer than 10 bytes", ErrorCode.INVALID_RECORD)
    half = (raw >> np.uint64(1)).view(np.int64)
    return half ^ -(raw & np.uint64(1)).view(np.int64), pos + size


def _fail(why: str) -> None:
    raise InvalidRecords(f"records of the fetched batches are inconsistent: {why}", ErrorCode.INVALID_RECORD)


def _binary_column(joined: bytes, field_start: np.ndarray, length: np.ndarray, keep: np.ndarray) -> pa.Array:
    """Fields [start, start+length) of `joined` (length -1 = null) for the records in `keep`."""
    if (length[keep] < 0).all():  # every field null: keys, usually
        return pa.nulls(len(keep), pa.binary())
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
    aborted: Sequence[tuple[int, int]] = (),
) -> pa.RecordBatch:
    """The records of `data` (concatenated v2 batches, as a Fetch returns them) with
    start_offset <= offset < end_offset, as one RecordBatch of `kafka_schema(include_headers)`.

    A partial batch at the end of `data` is ignored; control batches are skipped. `aborted`:
    the (producer id, first offset) a read_committed fetch listed; those transactions' batches
    are dropped, up to each one's marker.
    """
    schema = kafka_schema(include_headers)
    sections = _collect(data, start_offset, end_offset, verify_crc, max_size, aborted)
    if not sections.records:
        return pa.RecordBatch.from_pylist([], schema=schema)
    # padding: a bad varint reads zeros, not past the end (fields are cut by offsets, so it never shows)
    joined = b"".join([*sections.bodies, bytes(10)])
    buf = np.frombuffer(joined, dtype=np.uint8)
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
