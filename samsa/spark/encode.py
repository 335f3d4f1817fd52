"""Arrow columns -> RecordBatch v2 bytes, and Kafka's default partitioner: the sink's hot path.

The inverse of `arrow.py`, and as in there no Python runs per record:

1. Every per-record number of the format (record length, attributes, timestampDelta,
   offsetDelta, keyLength, valueLength, headerCount) is computed with numpy for the whole
   chunk, then zigzag-varint encoded at once: a (records x 10) byte matrix of which a mask
   keeps the bytes each varint needs, read row by row (`_varint_column`).
2. A record is a fixed sequence of pieces: [length .. keyLength varints] [key] [valueLength]
   [value] [headerCount] and, per header, [keyLength] [key] [valueLength] [value]. All the
   pieces go into one Arrow binary array, and one `take` with numpy-computed indices puts
   them in record order; the data buffer of the result is the records section, built by
   Arrow's C++ with one copy of the keys and values.
3. `seal_batch` (the protocol layer's) compresses the section and writes the 61-byte header.

`murmur2` is Kafka's default partitioner hash (the Java client's `Utils.murmur2`, librdkafka's
`murmur2_random`): 32-bit MurmurHash2 with seed 0x9747b28c over the key bytes, words read
little-endian. It runs a word index at a time over the keys still that long (sorted longest
first, so the active keys are a prefix), so its cost is the total number of key words.
A record goes to `(murmur2(key) & 0x7fffffff) % numPartitions`.

Every record of a batch gets the same CreateTime (the caller's `timestamp_ms`), so every
timestampDelta is 0. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from samsa.protocol.batch import HEADER_SIZE
from samsa.protocol.records import seal_batch

_SEED = 0x9747B28C
_M = np.uint32(0x5BD1E995)
_VARINT_LIMITS = np.array([1 << (7 * i) for i in range(1, 10)], dtype=np.uint64)


class RecordError(ValueError):
    """Input rows Kafka cannot carry (a null header key, a non-binary column)."""


# --------------------------------------------------------------------------- partitioner


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's murmur2 of every key of a binary array without nulls, as uint32."""
    keys = _binary(keys)
    n = len(keys)
    if keys.null_count:
        raise ValueError("murmur2 of a null key: null keys are not hashed")
    offsets = _offsets(keys)
    start = offsets[:-1]
    length = offsets[1:] - start
    buffer = keys.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, dtype=np.uint8)
    h = np.uint32(_SEED) ^ length.astype(np.uint32)
    words = length // 4
    order = np.argsort(-words, kind="stable")
    sorted_words = words[order]
    hs = h[order]
    ss = start[order]
    top = int(sorted_words[0]) if n else 0
    # active[w] = how many keys have more than w words (a prefix, since sorted longest first)
    active = np.searchsorted(-sorted_words, -np.arange(top), side="left")
    for w in range(top):
        c = int(active[w])
        p = ss[:c] + 4 * w
        k = (data[p].astype(np.uint32) | (data[p + 1].astype(np.uint32) << 8)
             | (data[p + 2].astype(np.uint32) << 16) | (data[p + 3].astype(np.uint32) << 24))
        k *= _M
        k ^= k >> np.uint32(24)
        k *= _M
        hs[:c] = (hs[:c] * _M) ^ k
    h[order] = hs
    rest = length % 4
    tail = start + (length - rest)
    for extra, shift in ((3, 16), (2, 8), (1, 0)):
        idx = np.flatnonzero(rest >= extra)
        if len(idx):
            h[idx] ^= data[tail[idx] + extra - 1].astype(np.uint32) << np.uint32(shift)
    idx = np.flatnonzero(rest > 0)
    h[idx] *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h


def partition_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's default partition of each (non-null) key: toPositive(murmur2) % numPartitions."""
    return ((murmur2(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)


# --------------------------------------------------------------------------- columns


def _binary(array: pa.Array) -> pa.Array:
    """`array` as a binary array (strings are UTF-8 already, so the cast copies nothing)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != pa.binary():
        array = array.cast(pa.binary())
    return array


def _offsets(array: pa.Array) -> np.ndarray:
    """The n + 1 offsets of a (possibly sliced) binary array, as int64."""
    raw = np.frombuffer(array.buffers()[1], dtype=np.int32)
    return raw[array.offset : array.offset + len(array) + 1].astype(np.int64)


def _lengths(array: pa.Array) -> np.ndarray:
    """Byte length of each element, -1 for null."""
    lengths = np.diff(_offsets(array))
    if array.null_count:
        lengths[np.asarray(array.is_null())] = -1
    return lengths


def _varint_size(values: np.ndarray) -> np.ndarray:
    """Bytes of the zigzag varint of each value."""
    return np.searchsorted(_VARINT_LIMITS, _zigzag(values), side="right") + 1


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).view(np.uint64)


def _varint_column(*columns: np.ndarray) -> pa.Array:
    """One binary element per row: the zigzag varints of `columns[0][i], columns[1][i], ...`."""
    n = len(columns[0])
    blocks, keeps = [], []
    total = np.zeros(n, dtype=np.int64)
    for values in columns:
        raw = _zigzag(values)
        size = np.searchsorted(_VARINT_LIMITS, raw, side="right") + 1
        width = int(size.max()) if n else 1
        total += size
        if width == 1:  # every value under 64 (zigzag under 128): one byte each, as is
            blocks.append(raw.astype(np.uint8)[:, None])
            keeps.append(np.ones((n, 1), dtype=bool))
            continue
        shifts = np.arange(width, dtype=np.uint64) * np.uint64(7)
        block = ((raw[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
        block[np.arange(width)[None, :] < (size - 1)[:, None]] |= 0x80
        blocks.append(block)
        keeps.append(np.arange(width)[None, :] < size[:, None])
    data = np.concatenate(blocks, axis=1)[np.concatenate(keeps, axis=1)]
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(total, out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


class Records:
    """The key, value and headers columns of some records, checked and normalised."""

    def __init__(self, keys: pa.Array | None, values: pa.Array, headers: pa.Array | None = None) -> None:
        n = len(values)
        self.values = _binary(values)
        self.keys = _binary(keys) if keys is not None else pa.nulls(n, pa.binary())
        self.headers = headers.combine_chunks() if isinstance(headers, pa.ChunkedArray) else headers
        if self.headers is not None and self.headers.null_count == n:
            self.headers = None
        self.key_length = _lengths(self.keys)
        self.value_length = _lengths(self.values)
        if self.headers is None:
            self.header_count = np.zeros(n, dtype=np.int64)
            self.header_bytes = np.zeros(n, dtype=np.int64)
        else:
            self._prepare_headers(n)

    def __len__(self) -> int:
        return len(self.values)

    def _prepare_headers(self, n: int) -> None:
        assert self.headers is not None
        counts = pc.fill_null(pc.list_value_length(self.headers), 0)
        self.header_count = counts.to_numpy(zero_copy_only=False).astype(np.int64)
        entries = self.headers.flatten()  # the entries of the non-null lists, slicing applied
        if entries.null_count:
            raise RecordError("a headers array holds a null header: every header needs a key")
        names = _binary(pc.struct_field(entries, "key"))
        if names.null_count:
            raise RecordError("a header has a null key: Kafka header keys are strings, never null")
        self.header_names = names
        self.header_values = _binary(pc.struct_field(entries, "value"))
        self.header_name_length = _lengths(names)
        self.header_value_length = _lengths(self.header_values)
        entry_bytes = (_varint_size(self.header_name_length) + self.header_name_length
                       + _varint_size(self.header_value_length) + np.maximum(self.header_value_length, 0))
        owner = np.repeat(np.arange(n), self.header_count)
        self.header_bytes = np.bincount(owner, weights=entry_bytes, minlength=n).astype(np.int64)

    def estimated_sizes(self) -> np.ndarray:
        """Upper bound on each record's encoded size (offsetDelta taken as 3 bytes)."""
        body = (5 + _varint_size(self.key_length) + np.maximum(self.key_length, 0)
                + _varint_size(self.value_length) + np.maximum(self.value_length, 0)
                + _varint_size(self.header_count) + self.header_bytes)
        return body + _varint_size(body)

    @classmethod
    def concat(cls, parts: list[Records]) -> Records:
        if len(parts) == 1:
            return parts[0]
        headers = None
        if any(p.headers is not None for p in parts):
            kind = next(p.headers.type for p in parts if p.headers is not None)
            headers = pa.concat_arrays([p.headers if p.headers is not None else pa.nulls(len(p), kind)
                                        for p in parts])
        return Records(pa.concat_arrays([p.keys for p in parts]), pa.concat_arrays([p.values for p in parts]),
                       headers)

    def slice(self, start: int, stop: int) -> Records:
        return Records(self.keys.slice(start, stop - start), self.values.slice(start, stop - start),
                       None if self.headers is None else self.headers.slice(start, stop - start))


# --------------------------------------------------------------------------- batches


def records_section(records: Records) -> pa.Buffer:
    """The records of `records` encoded back to back (offsetDelta 0..n-1, timestampDelta 0)."""
    n = len(records)
    key_length, value_length, header_count = records.key_length, records.value_length, records.header_count
    offset_delta = np.arange(n, dtype=np.int64)
    zero = np.zeros(n, dtype=np.int64)
    body = (2 + _varint_size(offset_delta) + _varint_size(key_length) + np.maximum(key_length, 0)
            + _varint_size(value_length) + np.maximum(value_length, 0)
            + _varint_size(header_count) + records.header_bytes)
    pieces = [
        _varint_column(body, zero, zero, offset_delta, key_length),  # zero, zero: attributes, timestampDelta
        records.keys.fill_null(b"") if records.keys.null_count else records.keys,
        _varint_column(value_length),
        records.values.fill_null(b"") if records.values.null_count else records.values,
        _varint_column(header_count),
    ]
    per_record = np.full(n, 5, dtype=np.int64)
    m = 0
    if records.headers is not None:
        m = len(records.header_names)
        values = records.header_values
        pieces += [_varint_column(records.header_name_length), records.header_names,
                   _varint_column(records.header_value_length), values.fill_null(b"") if values.null_count else values]
        per_record += 4 * header_count
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_record, out=first[1:])
    order = np.empty(int(first[-1]), dtype=np.int64)
    rows = np.arange(n, dtype=np.int64)
    for piece in range(5):
        order[first[:-1] + piece] = piece * n + rows
    if m:
        owner = np.repeat(rows, header_count)
        header_start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(header_count, out=header_start[1:])
        entry = np.arange(m, dtype=np.int64)
        at = first[:-1][owner] + 5 + 4 * (entry - header_start[:-1][owner])
        for piece in range(4):
            order[at + piece] = 5 * n + piece * m + entry
    joined = pa.concat_arrays(pieces).take(pa.array(order))
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)
    lo, hi = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    data = joined.buffers()[2]
    return data.slice(lo, hi - lo) if data is not None else pa.py_buffer(b"")


def split_points(sizes: np.ndarray, max_batch_bytes: int) -> list[tuple[int, int]]:
    """[start, stop) runs of records whose sizes fill batches of at most `max_batch_bytes`
    (header included); a record larger than that alone gets a batch of its own."""
    room = max(max_batch_bytes - HEADER_SIZE, 1)
    cum = np.cumsum(sizes)
    out = []
    start, done = 0, 0
    n = len(sizes)
    while start < n:
        stop = int(np.searchsorted(cum, done + room, side="right"))
        stop = max(stop, start + 1)
        out.append((start, stop))
        done = int(cum[stop - 1])
        start = stop
    return out


def encode_batches(records: Records, *, max_batch_bytes: int, compression: int, timestamp_ms: int
                   ) -> Iterator[bytes]:
    """`records` as sealed batches of at most `max_batch_bytes` (before compression) each."""
    for start, stop in split_points(records.estimated_sizes(), max_batch_bytes):
        chunk = records if (start, stop) == (0, len(records)) else records.slice(start, stop)
        yield seal_batch(memoryview(records_section(chunk)), stop - start, timestamp_ms, timestamp_ms,
                         compression=compression)
