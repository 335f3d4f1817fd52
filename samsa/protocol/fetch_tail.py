"""The Fetch response frame of one partition, packed around bytes already in memory.

A consumer's fetch of one partition waiting at the end of the log is answered with the next
append's bytes (samsa/handlers/fetch.py). This lays out the response frame up to the
partition's fields once, when the fetch starts to wait; `encode` packs the rest when the batch
arrives. Byte for byte what `encode_response` makes of the general path's answer with no
error, no aborted transactions and no preferred read replica (tests/unit/test_fetch_tail.py
checks every version).

Layout (v4-v12; v12 is flexible: compact lengths and tagged fields; v13+ names topics by id
and is not covered):

    int32 size | int32 correlation_id | [v12: header tagged fields = 0]
    int32 throttle_time_ms = 0 | [v7+: int16 error_code = 0, int32 session_id = 0]
    topics: count 1 | topic name | partitions: count 1
      int32 partition_index | int16 error_code = 0
      int64 high_watermark | int64 last_stable_offset (= high watermark) | [v5+: int64 log_start_offset]
      aborted_transactions: null | [v11+: int32 preferred_read_replica = -1]
      records: length | bytes
      [v12: partition, topic and response tagged fields = 0]
"""

from __future__ import annotations

import struct

from samsa.protocol.schema import Out
from samsa.protocol.wire import I32, write_uvarint

MIN_VERSION = 4
MAX_VERSION = 12


class FetchTailFrame:
    """The frame of a Fetch response carrying one partition's records, for one request."""

    __slots__ = ("fields", "flexible", "has_log_start", "prefix", "replica")

    def __init__(self, version: int, correlation_id: int, topic: str, partition: int) -> None:
        if not MIN_VERSION <= version <= MAX_VERSION:
            raise ValueError(f"Fetch v{version} is not covered (v{MIN_VERSION}-v{MAX_VERSION})")
        self.flexible = flexible = version >= 12
        name = topic.encode()
        head = bytearray(I32.pack(correlation_id))
        if flexible:
            head.append(0)  # no header tagged fields
        head += I32.pack(0)  # throttle_time
        if version >= 7:
            head += struct.pack(">hi", 0, 0)  # error_code, session_id
        if flexible:
            head.append(2)  # one topic
            write_uvarint(head, len(name) + 1)
            head += name
            head.append(2)  # one partition
        else:
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
