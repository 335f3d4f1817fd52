"""RecordBatch v2, record by record: scan, decode and build batches.

A batch is the 61-byte header of `samsa.protocol.batch` followed by `recordCount` records,
compressed as a whole when the attributes name a codec (`samsa.protocol.compression`).
Each record is (varint = zigzag LEB128 as in protobuf, at most 10 bytes):

    length          varint   bytes of the record after this field
    attributes      int8     unused, 0
    timestampDelta  varint   from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   -1 = null key
    key             bytes
    valueLength     varint   -1 = null value
    value           bytes
    headerCount     varint
      headerKeyLength   varint   (never null)
      headerKey         UTF-8
      headerValueLength varint   -1 = null value
      headerValue       bytes

In a LogAppendTime batch (attribute bit 3) every record's timestamp is the batch's
maxTimestamp, whatever the record says.

`scan_batches` is the broker's hot path: per batch one struct unpack and one CRC-32C, no
per-record Python. `decode_records` is for the few places that must look inside (compacted
topics, the group coordinator's own log, tools, tests); its reads are bounded and garbage
raises `InvalidRecords`, never IndexError or struct.error. Error codes follow Kafka:
CORRUPT_MESSAGE for what breaks the framing (lengths, magic, CRC), INVALID_RECORD for
batches that frame correctly but whose contents are inconsistent. No I/O, no logging.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from crc32c import crc32c

from samsa.protocol import compression
from samsa.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
)
from samsa.protocol.compression import (
    DEFAULT_MAX_SIZE,
    DecompressedTooLarge,
    InvalidRecords,
    UnsupportedCompression,
)
from samsa.protocol.errors import ErrorCode

__all__ = [
    "DEFAULT_MAX_SIZE",
    "MIN_BATCH_LENGTH",
    "DecompressedTooLarge",
    "InvalidRecords",
    "Record",
    "RecordHeader",
    "UnsupportedCompression",
    "build_batch",
    "decode_records",
    "iter_all_records",
    "scan_batches",
    "seal_batch",
]

MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batchLength covering the header alone

_CORRUPT = ErrorCode.CORRUPT_MESSAGE
_INVALID = ErrorCode.INVALID_RECORD
_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")

_Buffer = bytes | bytearray | memoryview
RecordHeader = tuple[str, bytes | None]


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[RecordHeader]


class _Truncated(InvalidRecords):
    """The buffer ends inside a batch (tolerated at the tail of a Fetch response)."""


def _check_batch(buf: _Buffer, pos: int, end: int, verify_crc: bool, producer_batch: bool) -> BatchHeader:
    """Validate the framing and header of the batch at `pos`; `end` bounds the buffer."""
    remaining = end - pos
    if remaining < HEADER_SIZE:
        if remaining >= LOG_OVERHEAD:
            (length,) = _LENGTH.unpack_from(buf, pos + 8)
            if length < MIN_BATCH_LENGTH:
                raise InvalidRecords(f"batch at {pos}: batchLength {length} < {MIN_BATCH_LENGTH}", _CORRUPT)
        raise _Truncated(f"batch at {pos}: {remaining} bytes left, the header alone is {HEADER_SIZE}", _CORRUPT)
    fields = HEADER.unpack_from(buf, pos)
    if fields[3] != MAGIC_V2:
        raise InvalidRecords(f"batch at {pos}: magic {fields[3]}, only v2 record batches are supported", _CORRUPT)
    length = fields[1]
    if length < MIN_BATCH_LENGTH:
        raise InvalidRecords(f"batch at {pos}: batchLength {length} < {MIN_BATCH_LENGTH}", _CORRUPT)
    size = LOG_OVERHEAD + length
    if size > remaining:
        raise _Truncated(f"batch at {pos}: {size} bytes declared, {remaining} left", _CORRUPT)
    if verify_crc:
        crc = crc32c(memoryview(buf)[pos + CRC_START : pos + size])
        if crc != fields[4]:
            raise InvalidRecords(f"batch at {pos}: CRC {fields[4]:#010x}, computed {crc:#010x}", _CORRUPT)
    count = fields[12]
    last_offset_delta = fields[6]
    if count < 0 or last_offset_delta < 0:
        raise InvalidRecords(f"batch at {pos}: recordCount {count}, lastOffsetDelta {last_offset_delta}", _INVALID)
    if last_offset_delta < count - 1:  # offset deltas are distinct, so this holds even compacted
        raise InvalidRecords(
            f"batch at {pos}: {count} records cannot fit lastOffsetDelta {last_offset_delta}", _INVALID
        )
    if producer_batch and (count == 0 or last_offset_delta != count - 1):
        raise InvalidRecords(
            f"batch at {pos}: a client batch needs lastOffsetDelta == recordCount - 1 > -1,"
            f" got {last_offset_delta} and {count}",
            _INVALID,
        )
    return BatchHeader._make(fields)


def scan_batches(
    buf: _Buffer,
    *,
    verify_crc: bool = True,
    max_batches: int | None = None,
    producer_batch: bool = False,
    allow_partial_tail: bool = False,
) -> list[tuple[int, BatchHeader]]:
    """Walk concatenated batches; return (position, header) of each.

    Raises InvalidRecords on a truncated batch, batchLength < 49, magic != 2, a bad CRC,
    negative recordCount or lastOffsetDelta, or more than `max_batches` batches.
    `producer_batch=True` adds the checks Kafka makes on batches from clients (Produce):
    at least one record and lastOffsetDelta == recordCount - 1; leave it off for batches
    from the log, where compaction leaves gaps. `allow_partial_tail=True` stops quietly at
    an incomplete last batch, as a Fetch response may end with one.
    """
    end = len(buf)
    pos = 0
    found: list[tuple[int, BatchHeader]] = []
    while pos < end:
        if max_batches is not None and len(found) >= max_batches:
            raise InvalidRecords(f"more than {max_batches} record batches", _INVALID)
        try:
            header = _check_batch(buf, pos, end, verify_crc, producer_batch)
        except _Truncated:
            if allow_partial_tail:
                break
            raise
        found.append((pos, header))
        pos += LOG_OVERHEAD + header.batch_length
    return found


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zigzag varint at `pos` -> (value, next position). IndexError past the end of `buf`."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecords(f"varint longer than 10 bytes ending at {pos}", _INVALID)


def decode_records(
    batch: _Buffer,
    header: BatchHeader | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    *,
    verify_crc: bool = True,
) -> list[Record]:
    """Decompress and parse the records of the one batch that starts at `batch[0]`.

    Without `header` the batch is checked first as `scan_batches` would (CRC included unless
    `verify_crc=False`); with one (from `scan_batches`) it is trusted but reads stay bounded by
    `batch`. `max_size` caps the decompressed size (DecompressedTooLarge past it).
    """
    end = len(batch)
    if header is None:
        header = _check_batch(batch, 0, end, verify_crc, False)
    elif header.batch_length < MIN_BATCH_LENGTH or header.size > end:
        raise InvalidRecords(f"batch of {header.size} bytes given {end}", _CORRUPT)
    body = memoryview(batch)[HEADER_SIZE : header.size]
    count = header.record_count
    if count == 0 and not body:
        return []  # an empty batch (compaction leaves these) has no compressed section at all
    codec = header.attributes & ATTR_COMPRESSION_MASK
    data = bytes(body) if codec == compression.NONE else bytes(compression.decompress(codec, body, max_size))
    try:
        return _parse_records(data, header, count)
    except IndexError:
        raise InvalidRecords("record data ends inside a record", _INVALID) from None


def _parse_records(data: bytes, header: BatchHeader, count: int) -> list[Record]:
    varint = _varint
    end = len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append_time = bool(header.attributes & ATTR_TIMESTAMP_TYPE)
    max_timestamp = header.max_timestamp
    records: list[Record] = []
    append = records.append
    pos = 0
    for index in range(count):  # a huge count ends at the end of data, not in memory
        if pos >= end:
            raise InvalidRecords(f"batch declares {count} records but holds {index}", _INVALID)
        length, pos = varint(data, pos)
        if length <= 0 or length > end - pos:
            raise InvalidRecords(f"record {index}: length {length} with {end - pos} bytes left", _INVALID)
        record_end = pos + length
        pos += 1  # attributes, unused
        timestamp_delta, pos = varint(data, pos)
        offset_delta, pos = varint(data, pos)

        key_length, pos = varint(data, pos)
        key: bytes | None = None
        if key_length >= 0:
            if pos + key_length > record_end:
                raise InvalidRecords(f"record {index}: key of {key_length} bytes overruns the record", _INVALID)
            key = data[pos : pos + key_length]
            pos += key_length
        elif key_length != -1:
            raise InvalidRecords(f"record {index}: key length {key_length}", _INVALID)

        value_length, pos = varint(data, pos)
        value: bytes | None = None
        if value_length >= 0:
            if pos + value_length > record_end:
                raise InvalidRecords(f"record {index}: value of {value_length} bytes overruns the record", _INVALID)
            value = data[pos : pos + value_length]
            pos += value_length
        elif value_length != -1:
            raise InvalidRecords(f"record {index}: value length {value_length}", _INVALID)

        header_count, pos = varint(data, pos)
        if header_count < 0:
            raise InvalidRecords(f"record {index}: header count {header_count}", _INVALID)
        headers: list[RecordHeader] = []
        for _ in range(header_count):
            if pos >= record_end:
                raise InvalidRecords(f"record {index}: {header_count} headers overrun the record", _INVALID)
            name_length, pos = varint(data, pos)
            if name_length < 0 or pos + name_length > record_end:
                raise InvalidRecords(f"record {index}: header key length {name_length}", _INVALID)
            # Java decodes with replacement and never fails; surrogateescape never fails either
            # and, unlike replacement, gives the same bytes back when the record is re-encoded.
            name = data[pos : pos + name_length].decode("utf-8", "surrogateescape")
            pos += name_length
            header_value_length, pos = varint(data, pos)
            header_value: bytes | None = None
            if header_value_length >= 0:
                if pos + header_value_length > record_end:
                    raise InvalidRecords(f"record {index}: header value overruns the record", _INVALID)
                header_value = data[pos : pos + header_value_length]
                pos += header_value_length
            elif header_value_length != -1:
                raise InvalidRecords(f"record {index}: header value length {header_value_length}", _INVALID)
            headers.append((name, header_value))

        if pos != record_end:
            raise InvalidRecords(
                f"record {index}: length says {length} bytes, fields take {length + pos - record_end}", _INVALID
            )
        append(
            Record(
                base_offset + offset_delta,
                max_timestamp if log_append_time else base_timestamp + timestamp_delta,
                key,
                value,
                headers,
            )
        )
    if pos != end:
        raise InvalidRecords(f"{end - pos} bytes left after the batch's {count} records", _INVALID)
    return records


def _put_varint(out: bytearray, value: int) -> None:
    """Append `value` (a signed 64-bit integer) as a zigzag varint."""
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        _put_varint(out, len(data))
        out += data


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None, Sequence[RecordHeader], int]],
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Encode `records` — (key, value, headers, timestamp_ms) each — as one sealed batch.

    Offset deltas run 0..n-1; baseTimestamp is the smallest timestamp, maxTimestamp the
    largest (with `log_append_time`, pass the append time as every record's timestamp, or
    stamp the batch afterwards with `batch.set_log_append_time`).
    """
    if not records:
        raise ValueError("a record batch holds at least one record")
    if compression not in _CODECS:
        raise UnsupportedCompression(f"unknown compression codec {compression}")
    timestamps = [record[3] for record in records]
    base_timestamp = min(timestamps)
    body = bytearray()
    one = bytearray()
    for delta, (key, value, headers, timestamp) in enumerate(records):
        one.clear()
        one.append(0)  # attributes
        _put_varint(one, timestamp - base_timestamp)
        _put_varint(one, delta)
        _put_bytes(one, key)
        _put_bytes(one, value)
        _put_varint(one, len(headers))
        for name, header_value in headers:
            encoded = name.encode("utf-8", "surrogateescape")
            _put_varint(one, len(encoded))
            one += encoded
            _put_bytes(one, header_value)
        _put_varint(body, len(one))
        body += one
    return seal_batch(body, len(records), base_timestamp, max(timestamps), base_offset=base_offset,
                      compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                      base_sequence=base_sequence, partition_leader_epoch=partition_leader_epoch,
                      log_append_time=log_append_time, transactional=transactional, control=control,
                      compression_level=compression_level)


def seal_batch(
    body: _Buffer,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    base_offset: int = 0,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Wrap an encoded records section (`record_count` records, offset deltas 0..n-1) in a
    batch header: compress it with the codec, then stamp the length and CRC-32C."""
    if record_count <= 0:
        raise ValueError("a record batch holds at least one record")
    if compression not in _CODECS:
        raise UnsupportedCompression(f"unknown compression codec {compression}")
    payload = body if compression == 0 else _compress(compression, body, compression_level)
    attributes = compression
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out, 0,
        base_offset, MIN_BATCH_LENGTH + len(payload), partition_leader_epoch, MAGIC_V2, 0,
        attributes, record_count - 1, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, record_count,
    )  # fmt: skip
    out += payload
    _CRC.pack_into(out, 17, crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)


_CODECS = frozenset(compression.CODEC_NAMES)
_compress = compression.compress


def iter_all_records(buf: _Buffer, *, verify_crc: bool = True, max_size: int = DEFAULT_MAX_SIZE) -> Iterator[Record]:
    """Every record of every batch in `buf` (concatenated batches, as in a Produce request)."""
    view = memoryview(buf)
    for pos, header in scan_batches(buf, verify_crc=verify_crc):
        yield from decode_records(view[pos : pos + header.size], header, max_size=max_size)
