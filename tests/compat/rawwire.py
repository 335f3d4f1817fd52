"""A tiny hand-written Kafka wire client for the checks real clients cannot make.

It is deliberately independent of Samsa's own protocol code (and of kio), so a bug shared by
the broker's encoder and its decoder cannot hide here. It knows only what tests/compat needs:

* ApiVersions v0 and v3 (v3 is flexible: compact arrays and tagged fields; its response header
  is still v0, as KIP-511 specifies), parsed field by field so default-valued tagged fields can
  be seen;
* Fetch v4 (non-flexible, record batches) with explicit min_bytes, max_wait_ms, max_bytes and
  per-partition max bytes;
* record batch headers (base offset, length, record count), tolerating a truncated last batch
  as Kafka allows.

One `Conn` is one blocking TCP connection; requests are sent one at a time.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"read underflow: need {n} bytes at {self.pos}/{len(self.data)}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ValueError("uvarint too long")

    def string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self.take(n).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self.take(n)

    def tagged_fields(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def at_end(self) -> bool:
        return self.pos == len(self.data)


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _compact_str(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


@dataclass
class ApiVersionsResult:
    error_code: int
    api_keys: dict[int, tuple[int, int]]
    per_key_tagged_fields: dict[int, dict[int, bytes]] = field(default_factory=dict)
    throttle_time_ms: int = 0
    tagged_fields: dict[int, bytes] = field(default_factory=dict)
    raw: bytes = b""


@dataclass
class FetchPartitionResult:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    records: bytes | None


@dataclass
class BatchHeader:
    base_offset: int
    batch_length: int  # bytes after the length field
    last_offset_delta: int
    record_count: int
    attributes: int
    complete: bool

    @property
    def size(self) -> int:
        return 12 + self.batch_length

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


def batch_headers(records: bytes) -> list[BatchHeader]:
    """Headers of the record batches in a Fetch response's records; the last may be cut short."""
    out: list[BatchHeader] = []
    pos = 0
    while pos + 12 <= len(records):
        base_offset, batch_length = struct.unpack_from(">qi", records, pos)
        if pos + 61 > len(records):
            break  # not even a whole batch header: a truncated tail
        (magic,) = struct.unpack_from(">b", records, pos + 16)
        if magic != 2:
            raise ValueError(f"batch at {pos} has magic {magic}, not 2")
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        (last_offset_delta,) = struct.unpack_from(">i", records, pos + 23)
        (record_count,) = struct.unpack_from(">i", records, pos + 57)
        complete = pos + 12 + batch_length <= len(records)
        out.append(BatchHeader(base_offset, batch_length, last_offset_delta, record_count, attributes, complete))
        pos += 12 + batch_length
    return out


class Conn:
    """One blocking connection to a broker; `request` sends a frame and reads its response."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "samsa-compat-raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"broker closed the connection after {len(buf)}/{n} bytes")
            buf += chunk
        return bytes(buf)

    def send(self, api_key: int, version: int, body: bytes, flexible_header: bool = False) -> int:
        self.correlation_id += 1
        header = struct.pack(">hhi", api_key, version, self.correlation_id) + _str(self.client_id)
        if flexible_header:
            header += b"\x00"  # request header v2: no tagged fields
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        return self.correlation_id

    def receive(self, correlation_id: int, flexible_header: bool = False) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        payload = self._recv_exact(size)
        r = Reader(payload)
        got = r.int32()
        if got != correlation_id:
            raise ValueError(f"correlation id {got}, expected {correlation_id}")
        if flexible_header:
            r.tagged_fields()
        return payload[r.pos :]

    def request(self, api_key: int, version: int, body: bytes, flexible_header: bool = False) -> bytes:
        cid = self.send(api_key, version, body, flexible_header)
        return self.receive(cid)

    # --- ApiVersions (key 18) ---------------------------------------------------------------

    def api_versions(self, version: int = 3, cluster_id: str | None = None, node_id: int = -1,
                     software: tuple[str, str] = ("samsa-compat", "0.1")) -> ApiVersionsResult:
        """ApiVersions at `version`; v5 also names the cluster and node meant (KIP-1242)."""
        if version >= 3:
            body = _compact_str(software[0]) + _compact_str(software[1])
            if version >= 5:
                body += (b"\x00" if cluster_id is None else _compact_str(cluster_id)) + struct.pack(">i", node_id)
            raw = self.request(18, version, body + b"\x00", flexible_header=True)
        else:
            raw = self.request(18, version, b"")
        r = Reader(raw)
        error_code = r.int16()
        keys: dict[int, tuple[int, int]] = {}
        per_key: dict[int, dict[int, bytes]] = {}
        n = r.uvarint() - 1 if version >= 3 else r.int32()
        for _ in range(n):
            key, lo, hi = r.int16(), r.int16(), r.int16()
            keys[key] = (lo, hi)
            if version >= 3:
                per_key[key] = r.tagged_fields()
        throttle = r.int32() if version >= 1 else 0
        tagged = r.tagged_fields() if version >= 3 else {}
        if not r.at_end():
            raise ValueError(f"{len(raw) - r.pos} trailing bytes after ApiVersions v{version} response")
        return ApiVersionsResult(error_code, keys, per_key, throttle, tagged, raw)

    # --- Fetch v4 (key 1) -------------------------------------------------------------------

    def send_fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        partition_max_bytes: int = 1 << 20,
        max_bytes: int = 50 << 20,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
    ) -> int:
        body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
        body += struct.pack(">i", 1) + _str(topic)
        body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, partition_max_bytes)
        return self.send(1, 4, body)

    def receive_fetch(self, correlation_id: int) -> FetchPartitionResult:
        r = Reader(self.receive(correlation_id))
        r.int32()  # throttle_time_ms
        topics = r.int32()
        if topics != 1:
            raise ValueError(f"Fetch response has {topics} topics, expected 1")
        r.string()
        if r.int32() != 1:
            raise ValueError("Fetch response must have exactly 1 partition")
        partition, error_code = r.int32(), r.int16()
        hw, lso = r.int64(), r.int64()
        aborted = r.int32()
        for _ in range(max(aborted, 0)):
            r.int64()
            r.int64()
        records = r.nullable_bytes()
        if not r.at_end():
            raise ValueError("trailing bytes after Fetch v4 response")
        return FetchPartitionResult(partition, error_code, hw, lso, records)

    def fetch(self, topic: str, partition: int, offset: int, **kw: int) -> FetchPartitionResult:
        return self.receive_fetch(self.send_fetch(topic, partition, offset, **kw))

    def timed_fetch(self, topic: str, partition: int, offset: int, **kw: int) -> tuple[FetchPartitionResult, float]:
        t0 = time.monotonic()
        res = self.fetch(topic, partition, offset, **kw)
        return res, time.monotonic() - t0


def require_fetch_v4(conn: Conn) -> None:
    """Fail clearly if the broker does not advertise Fetch v4 (the version this client speaks)."""
    lo, hi = conn.api_versions(0).api_keys.get(1, (-1, -1))
    if not lo <= 4 <= hi:
        raise AssertionError(f"broker advertises Fetch v{lo}..v{hi}; tests/compat/rawwire.py speaks v4")
