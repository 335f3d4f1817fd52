"""Record batch compression: the five Kafka codecs, bounded on the way in.

The codec is bits 0-2 of a RecordBatch's attributes; it covers every byte after the 61-byte
header (the records), never the header itself.

    0 none
    1 gzip    RFC 1952 stream; several members in a row are accepted (Java's GZIPInputStream does)
    2 snappy  raw snappy block (what librdkafka writes and what we write), or the xerial
              snappy-java stream that the Java client and kafka-python write:
                  0x82 'SNAPPY' 0x00, int32 version, int32 compatible version,
                  then blocks of [int32 length][raw snappy block] until the end
    3 lz4     LZ4 *frame* format (magic 0x184D2204). We write frames as the Java client does:
              independent blocks (its reader refuses linked ones) and no content checksum
              (older Java readers skip it unverified).
    4 zstd    standard zstd frames, with or without a content size (streaming producers omit it)

Decompression takes `max_size`: a few kilobytes of input may expand to gigabytes, so output is
capped and `DecompressedTooLarge` raised past the cap instead of exhausting memory. gzip goes
through zlib, which stops at an exact output length; snappy states its decompressed length up
front; lz4 and zstd decode into a fixed buffer that grows (4x per try) up to `max_size + 1`, so
the work done is bounded by a small multiple of `max_size`.

All failures raise `InvalidRecords` (defined here so that codec errors can subclass it;
`samsa.protocol.records` re-exports it) carrying the Kafka error code to answer with.
No I/O, no logging.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam

from samsa.protocol.errors import ErrorCode

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

DEFAULT_MAX_SIZE = 128 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic, int32 version, int32 compatible version
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_INT32 = struct.Struct(">i")

_Buffer = bytes | bytearray | memoryview


class InvalidRecords(ValueError):
    """Records that cannot be accepted; `error_code` is the Kafka error to answer with."""

    error_code: int = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, message: str, error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code


class UnsupportedCompression(InvalidRecords):
    """Codec bits name no codec we know (5, 6 or 7)."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class DecompressedTooLarge(InvalidRecords):
    """Decompressed output would exceed `max_size`.

    MESSAGE_TOO_LARGE: the Java producer answers it by splitting a compressed batch and
    retrying, which is what an honest producer with a very compressible batch needs.
    """

    error_code = ErrorCode.MESSAGE_TOO_LARGE


def codec_name(codec: int) -> str:
    try:
        return CODEC_NAMES[codec]
    except KeyError:
        raise UnsupportedCompression(f"unknown compression codec {codec}") from None


def compress(codec: int, data: _Buffer, level: int | None = None) -> bytes:
    """Compress `data` with `codec` in the form Kafka clients read."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return _lz4_frame(data, level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=level))
    raise UnsupportedCompression(f"unknown compression codec {codec}")


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of a few bytes (under 16): the LZ4 frame header's checksum."""
    p1, p2, p3, p4, p5, m = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & m

    h = (seed + p5 + len(data)) & m
    i = 0
    while i + 4 <= len(data):
        h = rotl((h + int.from_bytes(data[i:i + 4], "little") * p3) & m, 17) * p4 & m
        i += 4
    for b in data[i:]:
        h = rotl((h + b * p5) & m, 11) * p1 & m
    h ^= h >> 15
    h = h * p2 & m
    h ^= h >> 13
    h = h * p3 & m
    return h ^ (h >> 16)


# The LZ4 frame Samsa writes, as Kafka's Java client does: version 01, independent blocks (its
# reader refuses linked ones), no checksums, no content size; blocks of at most 64 KiB.
_LZ4_FLG, _LZ4_BD = 0x60, 0x40
_LZ4_HEADER = b"\x04\x22\x4d\x18" + bytes([_LZ4_FLG, _LZ4_BD, (_xxh32(bytes([_LZ4_FLG, _LZ4_BD])) >> 8) & 0xFF])
_LZ4_BLOCK = 64 * 1024
_LZ4_RAW = 0x80000000  # block size flag: stored uncompressed
_U32 = struct.Struct("<I")


def _lz4_frame(data: _Buffer, level: int | None) -> bytes:
    """An LZ4 frame built from LZ4 blocks (one compressor call per 64 KiB, none per frame:
    cramjam's frame compressor costs more to set up than a small batch takes to compress).
    Levels 3 and up use LZ4's high-compression mode, as the frame API does."""
    view = memoryview(data).cast("B")
    out = bytearray(_LZ4_HEADER)
    hc = level is not None and level >= 3
    for pos in range(0, len(view), _LZ4_BLOCK):
        chunk = view[pos:pos + _LZ4_BLOCK]
        packed = (cramjam.lz4.compress_block(chunk, mode="high_compression", compression=level, store_size=False)
                  if hc else cramjam.lz4.compress_block(chunk, store_size=False))
        if len(packed) < len(chunk):
            out += _U32.pack(len(packed))
            out += packed
        else:
            out += _U32.pack(len(chunk) | _LZ4_RAW)
            out += chunk
    out += b"\0\0\0\0"
    return bytes(out)


def decompress(codec: int, data: _Buffer, max_size: int = DEFAULT_MAX_SIZE) -> bytes | bytearray:
    """Decompress `data`; raise `DecompressedTooLarge` past `max_size` bytes of output,
    `UnsupportedCompression` for an unknown codec, `InvalidRecords` for corrupt input."""
    if codec == NONE:
        if len(data) > max_size:
            raise DecompressedTooLarge(f"{len(data)} bytes exceed the limit of {max_size}")
        return bytes(data)
    if codec == GZIP:
        return _gunzip(data, max_size)
    if codec == SNAPPY:
        return _unsnappy(data, max_size)
    if codec == LZ4:
        return _into_growing_buffer(cramjam.lz4.decompress_into, "lz4", data, max_size)
    if codec == ZSTD:
        return _into_growing_buffer(cramjam.zstd.decompress_into, "zstd", data, max_size)
    raise UnsupportedCompression(f"unknown compression codec {codec}")


def _too_large(codec: str, max_size: int) -> DecompressedTooLarge:
    return DecompressedTooLarge(f"{codec} data decompresses to more than {max_size} bytes")


def _corrupt(codec: str, why: object) -> InvalidRecords:
    return InvalidRecords(f"corrupt {codec} data: {why}", ErrorCode.CORRUPT_MESSAGE)


def _gunzip(data: _Buffer, max_size: int) -> bytes:
    pieces: list[bytes] = []
    budget = max_size
    rest: _Buffer = data
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip wrapper only
        try:
            out = inflater.decompress(rest, budget + 1)
        except zlib.error as exc:
            raise _corrupt("gzip", exc) from None
        if len(out) > budget:
            raise _too_large("gzip", max_size)
        if not inflater.eof:
            raise _corrupt("gzip", "truncated stream")
        pieces.append(out)
        budget -= len(out)
        rest = inflater.unused_data
        if not rest:
            break
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _unsnappy(data: _Buffer, max_size: int) -> bytearray:
    if bytes(data[:8]) != XERIAL_MAGIC:
        return _snappy_block(data, max_size)
    # xerial stream: the header's version fields are ignored (some writers get their byte
    # order wrong), as every reader in the wild does.
    view = memoryview(data)
    end = len(view)
    if end < _XERIAL_HEADER_SIZE:
        raise _corrupt("snappy", "truncated xerial header")
    pos = _XERIAL_HEADER_SIZE
    out = bytearray()
    while pos < end:
        if end - pos < 4:
            raise _corrupt("snappy", "truncated xerial block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise _corrupt("snappy", f"xerial block length {length} out of range")
        out += _snappy_block(view[pos : pos + length], max_size - len(out))
        pos += length
    return out


def _snappy_block(data: _Buffer, max_size: int) -> bytearray:
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except cramjam.DecompressionError as exc:
        raise _corrupt("snappy", exc) from None
    if size > max_size:
        raise DecompressedTooLarge(f"snappy data decompresses to more than {max_size} bytes")
    out = bytearray(size)
    try:
        written = cramjam.snappy.decompress_raw_into(data, out)
    except cramjam.DecompressionError as exc:
        raise _corrupt("snappy", exc) from None
    if written != size:
        raise _corrupt("snappy", "length preamble disagrees with the data")
    return out


# cramjam reports a full output buffer with these (Rust's io::Write::write_all error); any
# other DecompressionError means the input itself is bad.
_BUFFER_FULL = ("failed to write whole buffer", "smaller than required")


# Output bytes per input byte of the last lz4/zstd batch decompressed here: the next batch's
# first buffer is sized from it (batches of one stream compress alike), so a batch that
# compresses 100x is decompressed once, not tried at 8x and 32x first.
_last_ratio: dict[str, float] = {}
_HINT_CAP = 32 << 20  # a hint never allocates more than this up front; past it the buffer grows as it must


def _into_growing_buffer(
    decompress_into: Callable[[_Buffer, bytearray], int], codec: str, data: _Buffer, max_size: int
) -> bytearray:
    limit = max_size + 1  # one spare byte tells "exactly max_size" from "more than max_size"
    hinted = min(int(_last_ratio.get(codec, 0.0) * 1.125 * len(data)) + 64, _HINT_CAP)
    size = min(limit, max(64 * 1024, 8 * len(data), hinted))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if not any(marker in str(exc) for marker in _BUFFER_FULL):
                raise _corrupt(codec, exc) from None
            if size >= limit:
                raise _too_large(codec, max_size) from None
            size = min(limit, size * 4)
            continue
        if written > max_size:
            raise _too_large(codec, max_size)
        if data:
            _last_ratio[codec] = written / len(data)
        del out[written:]
        return out


def xerial_snappy(data: _Buffer, block_size: int = 32 * 1024) -> bytes:
    """Frame `data` as snappy-java's stream format (for tests and old readers)."""
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + block_size]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)
