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
    a producer id comes with a baseSequence >= 0        INVALID_RECORD
    a transactional batch has a producer id             INVALID_RECORD
    not LogAppendTime (the broker stamps that)          INVALID_TIMESTAMP, every record listed
    the records (decompressed, at most 128 MiB: a zip   INVALID_RECORD (MESSAGE_TOO_LARGE past
      bomb stops there) parse: recordCount of them,       the bound, CORRUPT_MESSAGE for data
      offset deltas 0, 1, 2..., lengths and varints       the codec cannot decode)
      consistent, headers well-formed, nothing after
      the last (record_walk.py)
    every record's CreateTime within                    INVALID_TIMESTAMP, with the records'
      message.timestamp.before.max.ms / .after.max.ms     indexes (ProduceResponse
      (and difference.max.ms) of the broker's clock       record_errors, as Kafka reports)
    a key on every record of a compacted topic          INVALID_RECORD, with the indexes

A batch whose maxTimestamp is not its records' largest timestamp gets the right one (and a new
CRC), as Kafka's validator sets it. Walking the records is compiled C when it was built
(`samsa.protocol.record_walk`): about 20 ns a record, no Python per record.

Then compression.type: when the topic names a codec (anything but `producer`) other than the
batch's, the batch is decoded and built again with it -- the only produce work that makes
Python objects of records, and only for topics that ask for it, as in Kafka.

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
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from samsa.protocol.compression import CODEC_NAMES, DEFAULT_MAX_SIZE, NONE, decompress
from samsa.protocol.errors import ErrorCode
from samsa.protocol.record_walk import LONG_MIN, walk
from samsa.protocol.records import InvalidRecords, build_batch, decode_records, scan_batches
from samsa.storage.config import LONG_MAX, LogConfig
from samsa.storage.errors import RecordBatchTooLarge, RecordTooLarge, StorageError, UnexpectedAppendOffset

# compression.type -> codec id; "producer" (absent here) keeps what the producer sent.
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_Records = bytes | bytearray | memoryview


class InvalidBatch(StorageError):
    """Produce data that fails a check; `code` is the error the partition is answered with,
    `record_errors` the (index, message) of each record at fault when the check is per record."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.kafka_error = code.name
        self.record_errors = record_errors or []


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
    pos, h = headers[0]
    if h.is_control:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "clients may not write control batches")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD,
                           f"invalid sequence number {h.base_sequence} in a batch with producer id {h.producer_id}")
    if h.is_transactional and h.producer_id < 0:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id")
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        message = "a producer may not set the timestamp type to LogAppendTime"
        raise InvalidBatch(ErrorCode.INVALID_TIMESTAMP, message, [(i, message) for i in range(h.record_count)])
    max_ts = check_records(records, h, config, now_ms)
    if max_ts != h.max_timestamp and config.message_timestamp_type == "CreateTime":
        records = records if isinstance(records, (bytearray, memoryview)) else bytearray(records)
        set_max_timestamp(records, pos, h.size, max_ts)
        headers = [(pos, h._replace(max_timestamp=max_ts))]
    target = CODECS.get(compression_type)
    if target is not None and target != h.compression:
        try:
            records = recompress(records, h, target)
        except InvalidRecords as e:
            raise InvalidBatch(ErrorCode(e.error_code), str(e)) from None
        headers = scan_batches(records, verify_crc=False)
    buf = records if isinstance(records, (bytearray, memoryview)) else bytearray(records)
    return ValidatedBatch(buf, headers, config.message_timestamp_type == "LogAppendTime")


def timestamp_bounds(config: LogConfig, now_ms: int | None) -> tuple[int, int]:
    """The [lo, hi] a CreateTime record's timestamp must lie in: Kafka's
    message.timestamp.before.max.ms / .after.max.ms, each capped by the older
    message.timestamp.difference.max.ms. A bound at Long.MAX is no bound (Kafka's arithmetic
    would wrap), and neither applies to a LogAppendTime topic (the broker's stamp replaces them)."""
    limits = _limits(config)
    if now_ms is None:
        return LONG_MIN, LONG_MAX
    before, after = limits[1], limits[2]
    lo = LONG_MIN if before is None else max(LONG_MIN, now_ms - before)
    hi = LONG_MAX if after is None else min(LONG_MAX, now_ms + after)
    return lo, hi


# What check_records needs of a LogConfig, worked out once per config (this runs per batch):
# id(config) -> (config, before or None, after or None, need_key). The config is kept in the
# entry, so its id cannot be reused while the entry lives.
_LIMITS: dict[int, tuple[LogConfig, int | None, int | None, bool]] = {}


def _limits(config: LogConfig) -> tuple[LogConfig, int | None, int | None, bool]:
    entry = _LIMITS.get(id(config))
    if entry is not None and entry[0] is config:
        return entry
    before: int | None = None
    after: int | None = None
    if config.message_timestamp_type == "CreateTime":
        diff = config.message_timestamp_difference_max_ms
        b = min(config.message_timestamp_before_max_ms, diff)
        a = min(config.message_timestamp_after_max_ms, diff)
        before = b if b < LONG_MAX else None
        after = a if a < LONG_MAX else None
    if len(_LIMITS) >= 4096:  # topics' configs come and go: start over now and then
        _LIMITS.clear()
    entry = _LIMITS[id(config)] = (config, before, after, config.compact_enabled)
    return entry


def check_records(batch: _Records, h: BatchHeader, config: LogConfig, now_ms: int | None) -> int:
    """Decompress (bounded) and walk the records of the producer batch `batch` (header `h`);
    raise InvalidBatch for the first that does not parse, or listing those out of the timestamp
    bounds or (compacted topic) without a key. Returns the records' largest timestamp."""
    codec = h.compression
    if codec == NONE:
        data: _Records = memoryview(batch)[HEADER_SIZE : h.size]
    else:
        try:
            data = decompress(codec, memoryview(batch)[HEADER_SIZE : h.size], DEFAULT_MAX_SIZE)
        except InvalidRecords as e:
            raise InvalidBatch(ErrorCode(e.error_code), f"{CODEC_NAMES.get(codec, codec)} batch: {e}") from None
    lo, hi = timestamp_bounds(config, now_ms)
    error, max_ts, bad_timestamps, keyless = walk(data, h.record_count, h.base_timestamp, lo, hi, _limits(config)[3])
    if error is not None:
        raise InvalidBatch(ErrorCode.INVALID_RECORD, error)
    if bad_timestamps:
        errors = [(i, f"Timestamp of record {i} is out of range. The timestamp should be within [{lo}, {hi}]")
                  for i in bad_timestamps]
        raise InvalidBatch(ErrorCode.INVALID_TIMESTAMP,
                           f"One or more records have been rejected due to invalid timestamp "
                           f"({len(errors)} of {h.record_count}; the first is record {errors[0][0]})", errors)
    if keyless:
        errors = [(i, "Compacted topic cannot accept message without key") for i in keyless]
        raise InvalidBatch(ErrorCode.INVALID_RECORD,
                           f"One or more records have been rejected due to {len(errors)} record errors: a "
                           f"compacted topic cannot accept a record without a key (record {errors[0][0]} first)",
                           errors)
    return max_ts


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
    """Follower: offsets only grow, from the log end offset on (UnexpectedAppendOffset
    otherwise). A batch may start past the log end offset, as in Kafka: the leader's log may
    have gaps where its cleaner removed whole batches (compaction never moves an offset).
    Also returns the (epoch, start offset) of each batch
    whose partitionLeaderEpoch differs from the one before it (and is not -1)."""
    expected = log_end_offset
    max_ts, offset_of_max = -1, -1
    batches: list[tuple[int, int, int, int]] = []
    epoch = latest_epoch
    new_epochs: list[tuple[int, int]] = []
    for pos, h in headers:
        if h.base_offset < expected:
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
