"""RecordBatch v2 header: the fixed 61-byte prefix of every batch, on the wire and on disk.

Layout (big-endian), offsets in bytes from the start of the batch:

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field (so batch size = 12 + batchLength)
   12  partitionLeaderEpoch  int32
   16  magic                 int8    always 2 here
   17  crc                   uint32  CRC-32C of bytes [21, end)
   21  attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordCount           int32
   61  records ...

Only the header is parsed here; the broker never looks inside the records on its hot path.
`baseOffset` and `partitionLeaderEpoch` sit before the CRC'd range, so the broker rewrites them
without recomputing the CRC.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_START = 21
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1

_BASE_OFFSET = struct.Struct(">q")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_MAX_TS = struct.Struct(">q")
_ATTRS = struct.Struct(">h")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes this batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the header at `pos`. The caller checks that HEADER_SIZE bytes are there."""
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def read_offset_and_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    return _OFFSET_AND_LENGTH.unpack_from(buf, pos)


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C over the CRC'd range of the batch that starts at `pos` and is `size` bytes."""
    return crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _LEADER_EPOCH.pack_into(buf, pos + 12, epoch)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Set the batch's maxTimestamp and re-seal its CRC."""
    _MAX_TS.pack_into(buf, pos + 35, timestamp)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


_PRODUCER = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence (at 43)


def set_producer(buf: bytearray | memoryview, pos: int, size: int, producer_id: int, epoch: int, base_sequence: int,
                 transactional: bool) -> None:
    """Stamp a sealed batch with its producer (id, epoch, first sequence; the transactional
    attribute) and re-seal its CRC: a client encodes once, then assigns sequences as it sends."""
    (attrs,) = _ATTRS.unpack_from(buf, pos + 21)
    _ATTRS.pack_into(buf, pos + 21, (attrs | ATTR_TRANSACTIONAL) if transactional else (attrs & ~ATTR_TRANSACTIONAL))
    _PRODUCER.pack_into(buf, pos + 43, producer_id, epoch, base_sequence)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with `timestamp` as its max timestamp and re-seal its CRC."""
    (attrs,) = _ATTRS.unpack_from(buf, pos + 21)
    _ATTRS.pack_into(buf, pos + 21, attrs | ATTR_TIMESTAMP_TYPE)
    _MAX_TS.pack_into(buf, pos + 35, timestamp)
    _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, size))
