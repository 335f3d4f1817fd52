"""The Fetch response frame of one partition, packed around bytes already in memory.

A consumer's fetch of one partition waiting at the end of the log is answered with the next
append's bytes (samsa/handlers/fetch.py). This lays out the response frame up to the
partition's fields once, when the fetch starts to wait; `encode` packs the rest when the batch
arrives. Byte for byte what `encode_response` makes of the general path's answer with no
error, no aborted transactions and no preferred read replica (tests/unit/test_fetch_tail.py
checks every version).

Layout (v4-v17; v12+ are flexible: compact lengths and tagged fields; v13+ name the topic by
its 16-byte id; v16's node endpoints are a tagged field, absent from an answer without errors):

    int32 size | int32 correlation_id | [v12+: header tagged fields = 0]
    int32 throttle_time_ms = 0 | [v7+: int16 error_code = 0, int32 session_id = 0]
    topics: count 1 | topic name (v13+: topic id) | partitions: count 1
      int32 partition_index | int16 error_code = 0
      int64 high_watermark | int64 last_stable_offset (= high watermark) | [v5+: int64 log_start_offset]
      aborted_transactions: null | [v11+: int32 preferred_read_replica = -1]
      records: length | bytes
      [v12+: partition, topic and response tagged fields = 0]
"""

from __future__ import annotations

import struct

from samsa.protocol.schema import Out
from samsa.protocol.wire import I32, write_uvarint

MIN_VERSION = 4
MAX_VERSION = 17
FIRST_TOPIC_ID_VERSION = 13


class FetchTailFrame:
    """The frame of a Fetch response carrying one partition's records, for one request."""

    __slots__ = ("fields", "flexible", "has_log_start", "prefix", "replica")

    def __init__(self, version: int, correlation_id: int, topic: str | bytes, partition: int) -> None:
        """`topic`: the name, or from v13 the topic id (16 bytes)."""
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise ValueError(f"Fetch v{version} is not covered (v{MIN_VERSION}-v{MAX_VERSION})")
        by_id = version >= FIRST_TOPIC_ID_VERSION
        if by_id != isinstance(topic, bytes) or (by_id and len(topic) != 16):
            raise ValueError(f"Fetch v{version} names a topic by {'its 16-byte id' if by_id else 'name'}")
        self.flexible = flexible = version >= 12
        head = bytearray(I32.pack(correlation_id))
        if flexible:
            head.append(0)  # no header tagged fields
        head += I32.pack(0)  # throttle_time
        if version >= 7:
            head += struct.pack(">hi", 0, 0)  # error_code, session_id
        if isinstance(topic, bytes):  # (v13+)
            head.append(2)  # one topic
            head += topic
            head.append(2)  # one partition
        elif flexible:
            name = topic.encode()
            head.append(2)
            write_uvarint(head, len(name) + 1)
            head += name
            head.append(2)
        else:
            name = topic.encode()
            head += struct.pack(">ih", 1, len(name)) + name + I32.pack(1)
        head += struct.pack(">ih", partition, 0)  # partition_index, error_code
        self.prefix = bytes(head)
        # high_watermark, last_stable_offset (v4+), log_start_offset (v5+)
        self.has_log_start = version >= 5
        self.fields = struct.Struct(">qqq" if self.has_log_start else ">qq")
        # aborted_transactions: null; preferred_read_replica (v11+): -1
        self.replica = (b"\0" if flexible else I32.pack(-1)) + (I32.pack(-1) if version >= 11 else b"")

    def encode(self, hw: int, log_start: int, records: bytes | bytearray | memoryview) -> Out:
        out = Out()
        out += b"\0\0\0\0"
        out += self.prefix
        out += self.fields.pack(hw, hw, log_start) if self.has_log_start else self.fields.pack(hw, hw)
        out += self.replica
        if self.flexible:
            write_uvarint(out, len(records) + 1)
            out += records
            out += b"\0\0\0"  # partition, topic and response tagged fields
        else:
            out += I32.pack(len(records))
            out += records
        I32.pack_into(out, 0, len(out) - 4)
        return out
