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
    CreateTime within message.timestamp.before.max.ms   INVALID_TIMESTAMP
      / .after.max.ms (and difference.max.ms) of the
      broker's clock: the batch's first and largest
      timestamps (-1, no timestamp, passes)

Then compression.type: when the topic names a codec (anything but `producer`) other than the
batch's, the batch is decoded and built again with it -- the only produce work that touches
individual records, and only for topics that ask for it, as in Kafka. Everything else is
batch-level: one header unpack and one CRC per batch, no per-record Python.

At append time, both engines (log.py, null_log.py) use the rest of this unit, under the log:

    check_append_sizes      the append fits a segment (RECORD_LIST_TOO_LARGE) and, for a
                            leader append, each batch max.message.bytes (MESSAGE_TOO_LARGE);
                            the batches cover the buffer back to back
    assign_offsets          leader: baseOffset from the log end offset, partitionLeaderEpoch,
                            and under LogAppendTime the stamp (baseOffset and the epoch sit
                            outside the CRC'd range; a LogAppendTime stamp re-seals the CRC)
    check_follower_offsets  follower: offsets as the leader set them, starting at the log end
                            offset and increasing; which leader epochs start where

Idempotence is producer_state.py's. The checks that need the broker (topic, leadership, acks)
stay in the Produce handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from samsa.protocol.batch import (
    LOG_OVERHEAD,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import InvalidRecords, build_batch, decode_records, scan_batches
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import RecordBatchTooLarge, RecordTooLarge, StorageError, UnexpectedAppendOffset

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
                             compression_type: str = "producer", *, now_ms: int | None = None) -> ValidatedBatch:
    """Check one partition's Produce data; raise InvalidBatch with the error code if it fails.
    `now_ms`: the broker's clock, for the timestamp bounds (None: not checked)."""
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
    if now_ms is not None and config.message_timestamp_type == "CreateTime":
        check_timestamps(h, config, now_ms)
    target = CODECS.get(compression_type)
    if target is not None and target != h.compression:
        try:
            records = recompress(records, h, target)
        except InvalidRecords as e:
            raise InvalidBatch(ErrorCode(e.error_code), str(e)) from None
        headers = scan_batches(records, verify_crc=False)
    buf = records if isinstance(records, (bytearray, memoryview)) else bytearray(records)
    return ValidatedBatch(buf, headers, config.message_timestamp_type == "LogAppendTime")


def check_timestamps(h: BatchHeader, config: LogConfig, now_ms: int) -> None:
    """Kafka's CreateTime bounds, on what the header says of the records: the first record's
    timestamp and the largest (a record in between earlier than the first is only seen by a
    walk of the records). A bound at Long.MAX is no bound (Kafka's arithmetic would wrap)."""
    diff = config.message_timestamp_difference_max_ms
    before = min(config.message_timestamp_before_max_ms, diff)
    after = min(config.message_timestamp_after_max_ms, diff)
    for ts in (h.base_timestamp, h.max_timestamp):
        if ts == -1:
            continue
        if before < LONG_MAX and now_ms - ts > before:
            raise InvalidBatch(ErrorCode.INVALID_TIMESTAMP, f"timestamp {ts} is {now_ms - ts} ms before the broker's "
                               f"clock, more than message.timestamp.before.max.ms={before}")
        if after < LONG_MAX and ts - now_ms > after:
            raise InvalidBatch(ErrorCode.INVALID_TIMESTAMP, f"timestamp {ts} is {ts - now_ms} ms after the broker's "
                               f"clock, more than message.timestamp.after.max.ms={after}")


def recompress(batch: _Records, h: BatchHeader, codec: int) -> bytearray:
    """Re-encode a producer batch with the topic's codec (compression.type other than producer)."""
    records = decode_records(batch, h)
    return bytearray(build_batch(
        [(r.key, r.value, r.headers, r.timestamp) for r in records],
        compression=codec, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence, partition_leader_epoch=h.partition_leader_epoch,
        transactional=h.is_transactional,
    ))


# -- at append time ------------------------------------------------------------------------


# What assign_offsets and check_follower_offsets find out, as a plain tuple (this runs on every
# append): (next offset = the log end offset after the append, max timestamp (-1: none), last
# offset of the batch holding it, [(position, last offset, max timestamp, size) per batch]).
AssignedBatches = tuple[int, int, int, list[tuple[int, int, int, int]]]


def check_append_sizes(name: str, buf: _Records, headers: Sequence[tuple[int, BatchHeader]], segment_bytes: int,
                       max_message_bytes: int | None) -> None:
    """The append fits one segment, each batch max.message.bytes (None: not checked, as for a
    follower), and the batches cover `buf` back to back."""
    if not headers:
        raise ValueError("append of no batches")
    if len(buf) > segment_bytes:
        raise RecordBatchTooLarge(f"{name}: append of {len(buf)} bytes exceeds segment.bytes {segment_bytes}")
    expected = 0
    for pos, h in headers:
        size = LOG_OVERHEAD + h.batch_length
        if pos != expected:
            raise ValueError(f"batches must cover the buffer back to back (batch at {pos}, expected {expected})")
        if max_message_bytes is not None and size > max_message_bytes:
            raise RecordTooLarge(f"{name}: batch of {size} bytes exceeds max.message.bytes {max_message_bytes}")
        expected = pos + size
    if expected != len(buf):
        raise ValueError(f"batches cover {expected} of {len(buf)} bytes")


def assign_offsets(buf: bytearray | memoryview, headers: Sequence[tuple[int, BatchHeader]], first_offset: int,
                   now_ms: int, log_append_time: bool, leader_epoch: int | None) -> AssignedBatches:
    """Leader: rewrite each batch's baseOffset (from `first_offset` on) and, if given, its
    partitionLeaderEpoch; with `log_append_time`, stamp it with `now_ms` and re-seal its CRC."""
    offset = first_offset
    max_ts, offset_of_max = -1, -1
    batches: list[tuple[int, int, int, int]] = []
    for pos, h in headers:
        size = LOG_OVERHEAD + h.batch_length
        set_base_offset(buf, pos, offset)
        if leader_epoch is not None:
            set_partition_leader_epoch(buf, pos, leader_epoch)
        if log_append_time:
            set_log_append_time(buf, pos, size, now_ms)
            ts = now_ms
        else:
            ts = h.max_timestamp
        last = offset + h.last_offset_delta
        if ts > max_ts:
            max_ts, offset_of_max = ts, last
        batches.append((pos, last, ts, size))
        offset = last + 1
    return offset, max_ts, offset_of_max, batches


def check_follower_offsets(name: str, headers: Sequence[tuple[int, BatchHeader]], log_end_offset: int,
                           latest_epoch: int | None) -> tuple[AssignedBatches, list[tuple[int, int]]]:
    """Follower: the first batch must start at the log end offset and offsets only grow
    (UnexpectedAppendOffset otherwise). Also returns the (epoch, start offset) of each batch
    whose partitionLeaderEpoch differs from the one before it (and is not -1)."""
    expected = log_end_offset
    max_ts, offset_of_max = -1, -1
    batches: list[tuple[int, int, int, int]] = []
    epoch = latest_epoch
    new_epochs: list[tuple[int, int]] = []
    for pos, h in headers:
        if (h.base_offset != expected) if not batches else (h.base_offset < expected):
            raise UnexpectedAppendOffset(
                f"{name}: batch at offset {h.base_offset} does not follow offset {expected - 1}")
        last = h.last_offset
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, last
        if h.partition_leader_epoch != epoch and h.partition_leader_epoch >= 0:
            epoch = h.partition_leader_epoch
            new_epochs.append((epoch, h.base_offset))
        batches.append((pos, last, h.max_timestamp, h.size))
        expected = last + 1
    return (expected, max_ts, offset_of_max, batches), new_epochs
