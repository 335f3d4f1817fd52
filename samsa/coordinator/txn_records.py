"""The records of `__transaction_state`, byte-compatible with Kafka's.

One record per transactional id and change (the topic is compacted: the last one wins; a null
value, a tombstone, removes an expired id). Key and value start with an int16 schema version:

    TransactionLogKey    v0: transactional_id string
    TransactionLogValue  v0: producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                             transaction_status int8, transaction_partitions nullable
                             [topic string, partition_ids [int32]],
                             transaction_last_update_timestamp_ms int64,
                             transaction_start_timestamp_ms int64
                         v1: as v0, flexible (compact lengths, tagged fields), with the tagged
                             fields previous_producer_id (0), next_producer_id (1) and
                             client_transaction_version (2)

Kafka writes v1 when the transaction uses transaction version 2 and v0 otherwise; so does Samsa.
The status numbers are Kafka's (`TransactionState.id`).

Decoding goes through the bounded `Reader`; whatever the bytes, the only exception that can
escape is `TxnRecordDecodeError`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from samsa.protocol.wire import DecodeError, Reader, write_uvarint

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_VALUE_FIXED = struct.Struct(">qhib")


class TxnRecordDecodeError(DecodeError):
    """The bytes are not a record of `__transaction_state` this module can read."""


class TxnLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]]  # topic -> partitions (sorted)
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return _H.pack(0) + _H.pack(len(raw)) + raw


def decode_key(buf: bytes | bytearray | memoryview) -> str:
    try:
        r = Reader(buf)
        version = r.int16()
        if version != 0:
            raise TxnRecordDecodeError(f"unknown TransactionLogKey version {version}")
        tid = r.string(False)
        if tid is None:
            raise TxnRecordDecodeError("null transactional id")
        return tid
    except TxnRecordDecodeError:
        raise
    except (DecodeError, UnicodeDecodeError, ValueError) as e:
        raise TxnRecordDecodeError(f"bad TransactionLogKey: {e}") from None


def encode_value(v: TxnLogValue) -> bytes:
    flexible = v.client_transaction_version >= 2
    out = bytearray(_H.pack(1 if flexible else 0))
    out += _VALUE_FIXED.pack(v.producer_id, v.producer_epoch, v.timeout_ms, v.status)
    topics = sorted(v.partitions.items())
    if flexible:
        write_uvarint(out, len(topics) + 1)
        for topic, parts in topics:
            raw = topic.encode("utf-8")
            write_uvarint(out, len(raw) + 1)
            out += raw
            write_uvarint(out, len(parts) + 1)
            for p in parts:
                out += _I.pack(p)
            out.append(0)  # the entry's tagged fields
    else:
        out += _I.pack(len(topics))
        for topic, parts in topics:
            raw = topic.encode("utf-8")
            out += _H.pack(len(raw)) + raw
            out += _I.pack(len(parts))
            for p in parts:
                out += _I.pack(p)
    out += _Q.pack(v.last_update_ms) + _Q.pack(v.start_ms)
    if flexible:
        tags: list[tuple[int, bytes]] = []
        if v.previous_producer_id != -1:
            tags.append((0, _Q.pack(v.previous_producer_id)))
        if v.next_producer_id != -1:
            tags.append((1, _Q.pack(v.next_producer_id)))
        if v.client_transaction_version != 0:
            tags.append((2, _H.pack(v.client_transaction_version)))
        write_uvarint(out, len(tags))
        for tag, data in tags:
            write_uvarint(out, tag)
            write_uvarint(out, len(data))
            out += data
    return bytes(out)


def decode_value(buf: bytes | bytearray | memoryview) -> TxnLogValue:
    try:
        r = Reader(buf)
        version = r.int16()
        if version not in (0, 1):
            raise TxnRecordDecodeError(f"unknown TransactionLogValue version {version}")
        flexible = version == 1
        pid, epoch, timeout, status = r.int64(), r.int16(), r.int32(), r.int8()
        partitions: dict[str, list[int]] = {}
        n = r.check_count(r.compact_length() if flexible else r.int32())
        for _ in range(max(n, 0)):
            topic = r.string(flexible)
            if topic is None:
                raise TxnRecordDecodeError("null topic")
            m = r.check_count(r.compact_length() if flexible else r.int32())
            partitions[topic] = sorted(r.int32() for _ in range(max(m, 0)))
            if flexible:
                _skip_tags(r)
        last_update, start = r.int64(), r.int64()
        prev = nxt = -1
        tv = 0
        if flexible:
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                field = Reader(r.raw(size))
                if tag == 0:
                    prev = field.int64()
                elif tag == 1:
                    nxt = field.int64()
                elif tag == 2:
                    tv = field.int16()
        return TxnLogValue(pid, epoch, timeout, status, partitions, last_update, start, prev, nxt, tv)
    except TxnRecordDecodeError:
        raise
    except (DecodeError, UnicodeDecodeError, ValueError) as e:
        raise TxnRecordDecodeError(f"bad TransactionLogValue: {e}") from None


def _skip_tags(r: Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.skip(r.uvarint())
