"""Request and response framing: headers, bodies, and the size-prefixed frame.

A Kafka frame is `int32 size` then `size` bytes. A request starts with its header:

    v1: api_key int16, api_version int16, correlation_id int32, client_id nullable string(int16)
    v2: v1 + tagged fields            (used when the request version is flexible)

A response starts with `correlation_id int32`, plus tagged fields (header v1) when the response
version is flexible -- except ApiVersions, whose response header is always v0 so that a client
can read it before it knows what the broker speaks.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, NamedTuple

from ._specs import REQUESTS, RESPONSES
from .samsa_apis import SPECS as SAMSA_SPECS
from .schema import Msg, Out, StructCodec, read_tagged_fields
from .wire import I32, Reader

API_VERSIONS_KEY = 18


def _without(spec: Any, names: frozenset[str]) -> Any:
    """A struct spec minus the fields named (at any depth)."""
    flexible, fields = spec
    return (flexible, tuple(f if f[6] is None else (*f[:6], _without(f[6], names))
                            for f in fields if f[0] not in names))


# Kafka 4.0 dropped v0 of DescribeAcls, CreateAcls and DeleteAcls, and kio's schemas with it;
# Kafka 3.x tools still speak it. v0 is v1 without the pattern type (every pattern is LITERAL).
_PATTERN_TYPE_FIELDS = frozenset({"pattern_type_filter", "resource_pattern_type", "pattern_type"})
for _key in (29, 30, 31):
    for _table in (REQUESTS, RESPONSES):
        if (_key, 0) not in _table and (_key, 1) in _table:
            _table[(_key, 0)] = _without(_table[(_key, 1)], _PATTERN_TYPE_FIELDS)


# ApiVersions v5 (Kafka 4.4, KIP-1242) is newer than kio's schemas: the request adds the cluster id
# and node id the client expects to reach (non-tagged; null and -1 when it does not know them),
# the response is v4's.
if (18, 5) not in REQUESTS and (18, 4) in REQUESTS:
    _flexible, _fields = REQUESTS[(18, 4)]
    REQUESTS[(18, 5)] = (_flexible, (*_fields, ("cluster_id", "string", True, False, None, None, None),
                                     ("node_id", "int32", False, False, None, -1, None)))
    RESPONSES[(18, 5)] = RESPONSES[(18, 4)]


# Samsa's own APIs (samsa_apis.py).
for _kv, (_req, _resp) in SAMSA_SPECS.items():
    REQUESTS[_kv], RESPONSES[_kv] = _req, _resp


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@functools.cache
def request_codec(api_key: int, version: int) -> StructCodec:
    """The request codec; KeyError when kio knows no such API version."""
    return StructCodec(REQUESTS[(api_key, version)])


@functools.cache
def response_codec(api_key: int, version: int) -> StructCodec:
    return StructCodec(RESPONSES[(api_key, version)])


def peek_correlation_id(frame: bytes | bytearray | memoryview) -> int | None:
    """The correlation id of a request frame body, if it has one, for error responses."""
    if len(frame) < 8:
        return None
    return int(I32.unpack_from(frame, 4)[0])


_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


def decode_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse the header of a frame body (without the size prefix); returns it and the body start."""
    end = len(frame)
    if end >= 10:  # the common shape, read directly; anything unusual takes the general path
        api_key, api_version, correlation_id, n = _HEADER_FIXED.unpack_from(frame, 0)
        if 0 <= n <= end - 10:
            try:
                client_id = str(frame[10 : 10 + n], "utf-8")
            except UnicodeDecodeError:
                client_id = None
            pos = 10 + n
            if client_id is not None and (not flexible or (pos < end and frame[pos] == 0)):
                return RequestHeader(api_key, api_version, correlation_id, client_id), pos + flexible
    return _decode_request_header(frame, flexible)


def _decode_request_header(frame: bytes | bytearray | memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    r = Reader(frame)
    api_key = r.int16()
    api_version = r.int16()
    correlation_id = r.int32()
    client_id = r.string(compact=False)  # client_id stays a classic string even in header v2
    if flexible:
        read_tagged_fields(r, None, None)
    return RequestHeader(api_key, api_version, correlation_id, client_id), r.pos


def decode_request_body(api_key: int, version: int, frame: bytes | bytearray | memoryview, start: int) -> Msg:
    """Decode a request body; raises DecodeError on malformed bytes.

    Bytes left after the body are ignored, as Kafka's own parser does: librdkafka 2.16 sends
    three of them after an all-topics Metadata v12 request.
    """
    return request_codec(api_key, version).decode(Reader(frame, start))


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> Out:
    """Encode a response frame, size prefix included (the size counts spliced file slices)."""
    codec = response_codec(api_key, version)
    out = Out()
    out.extend(b"\0\0\0\0")
    out.extend(I32.pack(correlation_id))
    if codec.flexible and api_key != API_VERSIONS_KEY:
        out.append(0)  # no header tagged fields
    codec.encode(out, body)
    I32.pack_into(out, 0, out.total_size - 4)
    return out


def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: Any) -> Out:
    """Encode a request frame (used by tests, tools and, later, inter-broker clients)."""
    codec = request_codec(api_key, version)
    out = Out()
    out.extend(b"\0\0\0\0")
    out.extend(I32.pack((api_key << 16) | (version & 0xFFFF)) if api_key < 0x8000 else b"")
    out.extend(I32.pack(correlation_id))
    if client_id is None:
        out.extend(b"\xff\xff")
    else:
        cid = client_id.encode()
        out.extend(len(cid).to_bytes(2, "big"))
        out.extend(cid)
    if codec.flexible:
        out.append(0)
    codec.encode(out, body)
    I32.pack_into(out, 0, out.total_size - 4)
    return out


def decode_response(api_key: int, version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Msg]:
    """Decode a response frame body (without size prefix): (correlation_id, body)."""
    codec = response_codec(api_key, version)
    r = Reader(frame)
    correlation_id = r.int32()
    if codec.flexible and api_key != API_VERSIONS_KEY:
        read_tagged_fields(r, None, None)
    return correlation_id, codec.decode(r)
