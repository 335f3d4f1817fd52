"""OffsetMap: the log cleaner's key -> latest offset map, and its per-record work.

Kafka's SkimpyOffsetMap unit. The cleaner (cleaner.py) first walks the dirty part of a log
putting each record's key with its offset (later offsets overwrite earlier ones), then walks
the log again and keeps a record only if no later offset of its key is in the map. The map
never holds the keys themselves, only a 128-bit hash of each: 24 bytes a key (hash, offset),
so `log.cleaner.dedupe.buffer.size` bytes hold `size // 24` slots, of which at most
`log.cleaner.io.buffer.load.factor` (0.9) are filled before the map says it is full (linear
probing stays short below that). Memory is bounded by the buffer, whatever the log holds.

The hash is SipHash-2-4 with 128-bit output, keyed with 16 random bytes per map: Kafka uses
MD5's 16 bytes, unkeyed; with n keys two share a hash with probability ~n^2/2^129 (10^-26 for
a billion keys), and with a secret key no producer can craft two keys that collide on purpose
(which would make the cleaner delete a record whose key was never superseded).

What runs per record, in C (samsa/storage/_cleaner.c) when it was built, else in the Python
below, with the same results:

    add_records(data, count, base_offset, start_offset) -> (records_done, full)
        put the key of each record whose offset is >= start_offset; stops at the first new
        key that does not fit (full=True, records_done = its index)
    filter_records(data, count, base_offset, base_ts, max_ts, log_append_time, end_offset,
                   keep_tombstones) -> (kept, tombstones_kept, first_kept_ts, max_kept_ts, mask)
        keep a record iff its offset is >= end_offset (past what the map covers), or it has a
        key, no later offset of it is in the map, and it has a value or keep_tombstones; mask
        is one byte per record (1 = kept), None when every record is kept
    rebuild_records(data, count, mask, base_ts, max_ts, log_append_time, new_base_ts) -> bytes
        the kept records, each byte for byte but for its timestamp delta, re-expressed
        against new_base_ts (the delete horizon, KIP-534), and its length

`data` is one batch's records section, decompressed. Records are checked as they are walked
(lengths within the batch, Java's varint limits); what does not parse raises ValueError.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Callable
from typing import Protocol

ENTRY_SIZE = 24  # 16-byte hash + 8-byte offset, as Kafka's SkimpyOffsetMap with MD5

_Buffer = bytes | bytearray | memoryview


class _Map(Protocol):
    @property
    def size(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def limit(self) -> int: ...

    def clear(self) -> None: ...
    def put(self, key: _Buffer, offset: int) -> bool: ...
    def get(self, key: _Buffer) -> int: ...
    def add_records(self, data: _Buffer, count: int, base_offset: int, start_offset: int) -> tuple[int, bool]: ...
    def filter_records(self, data: _Buffer, count: int, base_offset: int, base_ts: int, max_ts: int,
                       log_append_time: bool, end_offset: int, keep_tombstones: bool
                       ) -> tuple[int, bool, int, int, bytes | None]: ...


# -- the Python walk (the fallback, and the reference the C code is tested against) --------

class _Record:
    __slots__ = ("start", "end", "after_ts", "ts_delta", "offset_delta", "key", "null_value")

    start: int
    end: int
    after_ts: int
    ts_delta: int
    offset_delta: int
    key: bytes | None
    null_value: bool


def _varint(data: _Buffer, pos: int, end: int, bits: int, what: str) -> tuple[int, int]:
    """A zigzag varint of at most `bits` (32 or 64) within [pos, end), as Java reads it;
    ValueError(what) if there is none."""
    raw = shift = 0
    limit = 28 if bits == 32 else 63
    while True:
        if pos >= end:
            raise ValueError(what)
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > limit:
            raise ValueError(what)
    if bits == 32:
        raw &= 0xFFFFFFFF
        value = (raw >> 1) ^ -(raw & 1)
        return value, pos
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _records(data: _Buffer, count: int) -> list[_Record]:
    """Parse `count` records; ValueError("record i: ...") at the first that does not."""
    out = []
    pos, end = 0, len(data)
    for index in range(count):
        try:
            if pos >= end:
                raise ValueError("the batch holds fewer records than it declares")
            out.append(_parse(data, pos, end))
            pos = out[-1].end
        except ValueError as e:
            raise ValueError(f"record {index}: {e}") from None
    if pos != end:
        raise ValueError(f"record {count}: bytes are left after the batch's records")
    return out


def _parse(data: _Buffer, pos: int, end: int) -> _Record:
    r = _Record()
    what = "a record length varint does not parse"
    length, pos = _varint(data, pos, end, 32, what)
    if length <= 0 or length > end - pos:
        raise ValueError("a record length overruns the batch")
    rend = pos + length
    r.start, r.end = pos, rend
    pos += 1
    r.ts_delta, pos = _varint(data, pos, rend, 64, "a timestamp delta does not parse")
    r.after_ts = pos
    what = "an offset delta does not parse"
    r.offset_delta, pos = _varint(data, pos, rend, 32, what)
    if r.offset_delta < 0:
        raise ValueError(what)
    what = "a key length overruns its record"
    n, pos = _varint(data, pos, rend, 32, what)
    if n < -1 or n > rend - pos:
        raise ValueError(what)
    r.key = None if n < 0 else bytes(data[pos : pos + n])
    pos += max(n, 0)
    what = "a value length overruns its record"
    n, pos = _varint(data, pos, rend, 32, what)
    if n < -1 or n > rend - pos:
        raise ValueError(what)
    r.null_value = n < 0
    pos += max(n, 0)
    what = "a header count overruns its record"
    headers, pos = _varint(data, pos, rend, 32, what)
    if headers < 0 or headers > rend - pos:
        raise ValueError(what)
    for _ in range(headers):
        what = "a header key overruns its record"
        n, pos = _varint(data, pos, rend, 32, what)
        if n < 0 or n > rend - pos:
            raise ValueError(what)
        pos += n
        what = "a header value overruns its record"
        n, pos = _varint(data, pos, rend, 32, what)
        if n < -1 or n > rend - pos:
            raise ValueError(what)
        pos += max(n, 0)
    if pos != rend:
        raise ValueError("a record's fields do not end where its length says")
    return r


def _wrap64(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _put_varlong(out: bytearray, value: int) -> None:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


class PyOffsetMap:
    """The map in Python: a dict of 16-byte keyed BLAKE2b digests, with the C map's limit."""

    def __init__(self, slots: int, limit: int, key: bytes) -> None:
        if len(key) != 16 or slots < 1 or not 1 <= limit <= slots:
            raise ValueError("need 1 <= limit <= slots and a 16-byte key")
        self.slots = slots
        self.limit = limit
        self._key = key
        self._map: dict[bytes, int] = {}

    @property
    def size(self) -> int:
        return len(self._map)

    def _hash(self, key: _Buffer) -> bytes:
        return hashlib.blake2b(key, digest_size=16, key=self._key).digest()

    def clear(self) -> None:
        self._map.clear()

    def put(self, key: _Buffer, offset: int) -> bool:
        h = self._hash(key)
        if offset < 0 or (h not in self._map and len(self._map) >= self.limit):
            return False
        self._map[h] = offset
        return True

    def get(self, key: _Buffer) -> int:
        return self._map.get(self._hash(key), -1)

    def add_records(self, data: _Buffer, count: int, base_offset: int, start_offset: int) -> tuple[int, bool]:
        for index, r in enumerate(_records(data, count)):
            offset = base_offset + r.offset_delta
            if r.key is not None and offset >= start_offset and not self.put(r.key, offset):
                return index, True
        return count, False

    def filter_records(self, data: _Buffer, count: int, base_offset: int, base_ts: int, max_ts: int,
                       log_append_time: bool, end_offset: int, keep_tombstones: bool
                       ) -> tuple[int, bool, int, int, bytes | None]:
        mask = bytearray(count)
        kept = 0
        tombstones = False
        first_ts = max_kept = -1
        for index, r in enumerate(_records(data, count)):
            offset = base_offset + r.offset_delta
            if offset >= end_offset:
                keep = True
            elif r.key is None:
                keep = False
            else:
                keep = offset >= self.get(r.key) and (not r.null_value or keep_tombstones)
            if keep:
                mask[index] = 1
                ts = max_ts if log_append_time else _wrap64(base_ts + r.ts_delta)
                if kept == 0:
                    first_ts = ts
                max_kept = max(max_kept, ts)
                tombstones |= r.null_value
                kept += 1
        return kept, tombstones, first_ts, max_kept, None if kept == count else bytes(mask)


def py_rebuild_records(data: _Buffer, count: int, mask: _Buffer, base_ts: int, max_ts: int, log_append_time: bool,
                       new_base_ts: int) -> bytes:
    if len(mask) != count:
        raise ValueError("the mask has one byte per record")
    out = bytearray()
    for index, r in enumerate(_records(data, count)):
        if not mask[index]:
            continue
        ts = max_ts if log_append_time else _wrap64(base_ts + r.ts_delta)
        delta = bytearray()
        _put_varlong(delta, _wrap64(ts - new_base_ts))
        _put_varlong(out, 1 + len(delta) + r.end - r.after_ts)
        out.append(data[r.start])
        out += delta
        out += data[r.after_ts : r.end]
    return bytes(out)


RebuildRecords = Callable[[_Buffer, int, _Buffer, int, int, bool, int], bytes]

try:  # (by name: `from samsa.storage import _cleaner` reads as an import of the package, whose
    # __init__ imports log.py, which imports this module through cleaner.py: a cycle to readers)
    _cleaner = importlib.import_module("samsa.storage._cleaner")
except ImportError:  # not built: no C compiler when samsa was installed
    NATIVE = False
    rebuild_records: RebuildRecords = py_rebuild_records
else:
    NATIVE = True
    rebuild_records = _cleaner.rebuild_records


def new_offset_map(buffer_bytes: int, load_factor: float = 0.9, *, native: bool | None = None) -> _Map:
    """A map in `buffer_bytes` (log.cleaner.dedupe.buffer.size) filled to `load_factor`
    (log.cleaner.io.buffer.load.factor); the C one unless `native` is False or it was not built."""
    slots = buffer_bytes // ENTRY_SIZE
    limit = int(slots * load_factor)
    if limit < 1:
        raise ValueError(f"a dedupe buffer of {buffer_bytes} bytes at load factor {load_factor} holds no key")
    key = os.urandom(16)
    if native if native is not None else NATIVE:
        if not NATIVE:
            raise RuntimeError("samsa.storage._cleaner was not built")
        m: _Map = _cleaner.OffsetMap(slots, limit, key)
        return m
    return PyOffsetMap(slots, limit, key)


OffsetMap = _Map

__all__ = ["ENTRY_SIZE", "NATIVE", "OffsetMap", "PyOffsetMap", "new_offset_map", "py_rebuild_records",
           "rebuild_records"]
