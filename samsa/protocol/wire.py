"""Bounded primitive readers for Kafka's wire types.

Every read checks what is left in the buffer before it touches it, and every length read from
the wire (strings, bytes, arrays, tagged fields) is checked against the bytes that remain, so
hostile input can only ever produce `DecodeError` -- never a huge allocation, never an
IndexError or struct.error leaking out. Reads return memoryview slices of the frame where the
caller wants bytes without a copy (the `records` of a Produce request).
"""

from __future__ import annotations

import struct

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


class DecodeError(ValueError):
    """The bytes are not a well-formed message of the expected schema."""


class Reader:
    """A cursor over a buffer; `end` bounds every read (sub-readers share the buffer)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        self.buf = memoryview(buf) if not isinstance(buf, memoryview) else buf
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int) -> int:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise DecodeError(f"need {n} bytes at {p}, have {self.end - p}")
        self.pos = p + n
        return p

    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1))[0]

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2))[0]

    def uint16(self) -> int:
        return _U16.unpack_from(self.buf, self._need(2))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._need(4))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._need(8))[0]

    def boolean(self) -> bool:
        return self.buf[self._need(1)] != 0

    def uuid(self) -> bytes:
        p = self._need(16)
        return bytes(self.buf[p : p + 16])

    def uvarint(self) -> int:
        """Unsigned LEB128, at most 5 bytes (values up to 2**35-1, as Kafka's readUnsignedVarint)."""
        result = 0
        shift = 0
        buf = self.buf
        while True:
            if self.pos >= self.end:
                raise DecodeError("truncated varint")
            b = buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift >= 35:
                raise DecodeError("varint too long")

    def raw(self, n: int) -> memoryview:
        p = self._need(n)
        return self.buf[p : p + n]

    def skip(self, n: int) -> None:
        self._need(n)

    # -- lengths ------------------------------------------------------------------------------

    def compact_length(self) -> int:
        """Compact (N+1) length; returns -1 for null."""
        return self.uvarint() - 1

    def check_count(self, n: int) -> int:
        """An array count can never exceed the bytes left (every element takes at least one)."""
        if n > self.end - self.pos:
            raise DecodeError(f"array of {n} elements with only {self.end - self.pos} bytes left")
        return n

    # -- strings and bytes --------------------------------------------------------------------

    def string(self, compact: bool) -> str | None:
        n = self.compact_length() if compact else self.int16()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative string length {n}")
        p = self._need(n)
        try:
            return str(self.buf[p : p + n], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None

    def bytes_(self, compact: bool) -> memoryview | None:
        n = self.compact_length() if compact else self.int32()
        if n < 0:
            if n == -1:
                return None
            raise DecodeError(f"negative bytes length {n}")
        p = self._need(n)
        return self.buf[p : p + n]


def write_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_size(value: int) -> int:
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


I8, I16, U16, I32, U32, I64, F64 = _I8, _I16, _U16, _I32, _U32, _I64, _F64
