"""Control records: the transaction markers (Kafka's EndTransactionMarker) a control batch holds.

A control batch is a RecordBatch v2 with attributes transactional|control (bits 4 and 5), the
producer id and epoch of the transaction it ends, baseSequence -1, and one record:

    key    int16 version (0) | int16 type (0 ABORT, 1 COMMIT)
    value  int16 version (0) | int32 coordinator epoch

Readers skip control batches (clients never hand them to the application); the broker reads
the type to end the producer's transaction. No I/O.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from samsa.protocol.batch import HEADER_SIZE
from samsa.protocol.records import InvalidRecords, build_batch, decode_records

ABORT = 0
COMMIT = 1
CURRENT_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class TxnMarker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def control_key(commit: bool) -> bytes:
    """The key of a transaction marker's control record (version 0)."""
    return _KEY.pack(CURRENT_VERSION, COMMIT if commit else ABORT)


def decode_control_key(key: bytes | bytearray | memoryview) -> bool | None:
    """A control record's key: True for COMMIT, False for ABORT, None for any other control
    record (Kafka's LEADER_CHANGE, SNAPSHOT_HEADER, ...) or bytes that are no control key."""
    if len(key) < _KEY.size:
        return None
    version, kind = _KEY.unpack_from(key)
    if version < 0 or kind not in (ABORT, COMMIT):
        return None
    return kind == COMMIT


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int,
                 *, partition_leader_epoch: int = -1) -> bytes:
    """A sealed control batch (base offset 0: the log assigns it) holding one marker."""
    value = _VALUE.pack(CURRENT_VERSION, coordinator_epoch)
    return build_batch([(control_key(commit), value, (), timestamp_ms)], producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1,
                       partition_leader_epoch=partition_leader_epoch, transactional=True, control=True)


def parse_marker(batch: bytes | bytearray | memoryview) -> TxnMarker | None:
    """The marker in a whole control batch; None when its one record is not a transaction
    marker (another control type, or an empty batch left by compaction). Raises
    InvalidRecords for a batch that does not decode."""
    if len(batch) < HEADER_SIZE:
        raise InvalidRecords("control batch shorter than its header")
    records = decode_records(batch, verify_crc=False)
    if not records:
        return None
    r = records[0]
    if r.key is None or len(r.key) < _KEY.size:
        raise InvalidRecords("control record without a key")
    commit = decode_control_key(r.key)
    if commit is None:
        return None
    epoch = -1
    if r.value is not None and len(r.value) >= _VALUE.size:
        epoch = _VALUE.unpack_from(r.value)[1]
    return TxnMarker(commit, epoch)
