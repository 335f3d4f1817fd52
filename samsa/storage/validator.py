"""LogValidator: what a partition's Produce data must pass before the log appends it.

Kafka's LogValidator unit, for the one format Samsa accepts (Produce v3+, RecordBatch v2).
The checks, in order, with the error a client gets back:

    check                                               error code
    the data is present and not empty                   INVALID_RECORD
    at most max.message.bytes (it must be one batch,    MESSAGE_TOO_LARGE
      so its length is the batch's size: refused
      before a CRC is spent on it)
    framing: whole batches, batchLength >= 49, magic 2  CORRUPT_MESSAGE
    CRC-32C of every batch                              CORRUPT_MESSAGE
    recordCount > 0, lastOffsetDelta == recordCount-1   INVALID_RECORD
    exactly one batch                                   INVALID_RECORD
    not a control batch (clients may not write them)    INVALID_RECORD

Then compression.type: when the topic names a codec (anything but `producer`) other than the
batch's, the batch is decoded and built again with it -- the only produce work that touches
individual records, and only for topics that ask for it, as in Kafka. Everything else is
batch-level: one header unpack and one CRC per batch, no per-record Python.

What the validator does not do: offsets, partitionLeaderEpoch and the LogAppendTime stamp are
written into the header by `Log.append` (baseOffset and the epoch sit outside the CRC'd range;
a LogAppendTime stamp re-seals the CRC), and idempotence is producer_state.py's. The checks
that need the broker (topic, leadership, acks) stay in the Produce handler.
"""

from __future__ import annotations

from typing import NamedTuple

from samsa.protocol.batch import BatchHeader
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import InvalidRecords, build_batch, decode_records, scan_batches
from samsa.storage.config import LogConfig
from samsa.storage.errors import StorageError

# compression.type -> codec id; "producer" (absent here) keeps what the producer sent.
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_Records = bytes | bytearray | memoryview


class InvalidBatch(StorageError):
    """Produce data that fails a check; `code` is the error the partition is answered with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.kafka_error = code.name


class ValidatedBatch(NamedTuple):
    """What `Log.append` takes: a writable buffer (its baseOffset is rewritten in place), the
    (position, header) of each batch in it, and whether to stamp LogAppendTime."""

    buf: bytearray | memoryview
    headers: list[tuple[int, BatchHeader]]
    log_append_time: bool


def validate_produce_records(records: _Records | None, config: LogConfig,
                             compression_type: str = "producer") -> ValidatedBatch:
    """Check one partition's Produce data; raise InvalidBatch with the error code if it fails."""
    if records is None or len(records) == 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "Produce request carries no record batch")
    max_bytes = config.max_message_bytes
    if len(records) > max_bytes:
        raise InvalidBatch(ErrorCode.MESSAGE_TOO_LARGE,
                           f"batch of {len(records)} bytes exceeds max.message.bytes={max_bytes}")
    try:
        headers = scan_batches(records, verify_crc=True, producer_batch=True)
    except InvalidRecords as e:
        raise InvalidBatch(ErrorCode(e.error_code), str(e)) from None
    if len(headers) != 1:
        raise InvalidBatch(ErrorCode.INVALID_RECORD,
                           f"Produce v3+ carries exactly one record batch per partition, got {len(headers)}")
    h = headers[0][1]
    if h.is_control:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    target = CODECS.get(compression_type)
    if target is not None and target != h.compression:
        try:
            records = recompress(records, h, target)
        except InvalidRecords as e:
            raise InvalidBatch(ErrorCode(e.error_code), str(e)) from None
        headers = scan_batches(records, verify_crc=False)
    buf = records if isinstance(records, (bytearray, memoryview)) else bytearray(records)
    return ValidatedBatch(buf, headers, config.message_timestamp_type == "LogAppendTime")


def recompress(batch: _Records, h: BatchHeader, codec: int) -> bytearray:
    """Re-encode a producer batch with the topic's codec (compression.type other than producer)."""
    records = decode_records(batch, h)
    return bytearray(build_batch(
        [(r.key, r.value, r.headers, r.timestamp) for r in records],
        compression=codec, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
        transactional=h.is_transactional,
    ))
