"""Walk the records of one RecordBatch v2 and check them, without decoding them into objects.

Kafka's broker reads every record of a Produce batch before appending it (LogValidator and
DefaultRecord.readFrom); so does Samsa's validator, through `walk`:

    walk(data, count, base_timestamp, lo, hi, need_key) -> Walk

`data` is the batch's records section (decompressed), `count` its recordCount. Each of the
`count` records must parse (the layout is in `samsa.protocol.records`):

    - its length is positive and within the data, and its fields end exactly there;
    - its attributes byte is 0 (the v2 format leaves it unused: every producer writes 0, Kafka's
      broker does not look, and kafka-python's consumer reads it as a varint, so any other
      value makes it misread the record and stall);
    - varints are at most 5 bytes, varlongs 10, as Java's ByteUtils reads them;
    - its offset delta is its index (0, 1, 2, ...: what a producer writes);
    - key and value lengths are -1 (null) or fit in the record;
    - the header count is not negative, each header key length not negative, and each header
      fits in the record;
    - each header key is UTF-8 (strict: no overlong forms, no surrogates). A header key is a
      String in Kafka's record format; Kafka's broker does not check it (Java decodes leniently)
      but kafka-python's consumer cannot get past a record whose key is not UTF-8 and stalls
      on it, so Samsa refuses such a record at the door;

and no bytes may follow the last record. The first failure is `Walk.error` (Kafka answers
INVALID_RECORD). Then, record by record: a timestamp (baseTimestamp + delta, with Java's long
wrap-around) other than -1 outside [lo, hi] is listed in `bad_timestamps`, and with
`need_key` a null key in `keyless`; `max_timestamp` is the largest timestamp (-1 if none).

The walk is compiled C (`_recwalk.c`, built by `pip install`) when it was built, and this
module's Python otherwise, with the same results; `NATIVE` says which. The Python walk costs
about a microsecond per record: the broker logs at start-up when it is the one in use.
"""

from __future__ import annotations

from typing import NamedTuple

_Buffer = bytes | bytearray | memoryview

LONG_MIN = -(1 << 63)
LONG_MAX = (1 << 63) - 1


class Walk(NamedTuple):
    error: str | None
    max_timestamp: int
    bad_timestamps: list[int] | None
    keyless: list[int] | None


class _Stop(Exception):
    pass


def _varint(data: _Buffer, pos: int, end: int, limit: int, bits: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    while shift < limit:
        if pos >= end:
            raise _Stop("ends inside a varint")
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= (1 << bits) - 1
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise _Stop("has a varint longer than Java's limit")


def walk_py(data: _Buffer, count: int, base_timestamp: int, lo: int, hi: int, need_key: bool) -> Walk:
    """The walk in Python (the reference for the C one)."""
    end = len(data)
    pos = 0
    max_ts = -1
    bad: list[int] | None = None
    keyless: list[int] | None = None
    index = 0
    what = "its length"
    try:
        for index in range(count):
            if pos >= end:
                return Walk(f"the batch declares {count} records but holds {index}", -1, None, None)
            what = "its length"
            length, pos = _varint(data, pos, end, 35, 32)
            if length <= 0 or length > end - pos:
                return Walk(f"record {index}: length {length} with {end - pos} bytes left in the batch", -1, None, None)
            record_end = pos + length
            if data[pos] != 0:
                return Walk(f"record {index}: attributes {data[pos]}, where v2 records have 0", -1, None, None)
            pos += 1
            what = "its timestamp delta"
            ts_delta, pos = _varint(data, pos, record_end, 70, 64)
            what = "its offset delta"
            offset_delta, pos = _varint(data, pos, record_end, 35, 32)
            if offset_delta != index:
                return Walk(f"record {index}: offset delta {offset_delta}, expected {index} "
                            "(deltas count up from 0)", -1, None, None)
            for name in ("key", "value"):
                what = name
                n, pos = _varint(data, pos, record_end, 35, 32)
                if n < -1 or n > record_end - pos:
                    return Walk(f"record {index}: {name} length {n} with {record_end - pos} bytes left in the record",
                                -1, None, None)
                if n > 0:
                    pos += n
                if n < 0 and name == "key" and need_key:
                    keyless = keyless or []
                    keyless.append(index)
            what = "its header count"
            header_count, pos = _varint(data, pos, record_end, 35, 32)
            if header_count < 0 or header_count > record_end - pos:
                return Walk(f"record {index}: header count {header_count} with {record_end - pos} bytes left "
                            "in the record", -1, None, None)
            for h in range(header_count):
                what = f"header {h}: its key length"
                n, pos = _varint(data, pos, record_end, 35, 32)
                if n < 0 or n > record_end - pos:
                    return Walk(f"record {index}: header {h}: key length {n} with {record_end - pos} bytes left "
                                "in the record", -1, None, None)
                try:
                    bytes(data[pos : pos + n]).decode("utf-8")
                except UnicodeDecodeError:
                    return Walk(f"record {index}: header {h}: its key is not valid UTF-8", -1, None, None)
                pos += n
                what = "header value"
                n, pos = _varint(data, pos, record_end, 35, 32)
                if n < -1 or n > record_end - pos:
                    return Walk(f"record {index}: header value length {n} with {record_end - pos} bytes left "
                                "in the record", -1, None, None)
                if n > 0:
                    pos += n
            if pos != record_end:
                return Walk(f"record {index}: its length says {length} bytes, its fields end {record_end - pos} "
                            "bytes short", -1, None, None)
            ts = (base_timestamp + ts_delta + (1 << 63)) % (1 << 64) - (1 << 63)
            if ts != -1:
                if ts > max_ts:
                    max_ts = ts
                if ts < lo or ts > hi:
                    bad = bad or []
                    bad.append(index)
    except _Stop as e:
        return Walk(f"record {index}: {what} {e}", -1, None, None)
    if pos != end:
        return Walk(f"{end - pos} bytes are left after the batch's {count} records", -1, None, None)
    return Walk(None, max_ts, bad, keyless)


try:
    from samsa.protocol._recwalk import walk as _walk_native
except ImportError:  # not built: no C compiler when samsa was installed
    NATIVE = False

    def walk(data: _Buffer, count: int, base_timestamp: int, lo: int, hi: int, need_key: bool) -> Walk:
        return walk_py(data, count, base_timestamp, lo, hi, need_key)
else:
    NATIVE = True
    walk = _walk_native  # type: ignore[assignment]  # (returns the same four fields, as a plain tuple)
