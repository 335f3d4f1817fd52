"""The sans-io protocol layer: bounded decoding, tagged fields, round trips, fuzz."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.handlers import HANDLER_MODULES
from samsa.protocol._specs import REQUESTS, RESPONSES
from samsa.protocol.messages import (
    _decode_request_header,
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_codec,
    response_codec,
)
from samsa.protocol.schema import Out
from samsa.protocol.wire import DecodeError, Reader

SUPPORTED = [(m.API_KEY, v) for m in HANDLER_MODULES for v in range(m.MIN_VERSION, m.MAX_VERSION + 1)]


def test_huge_compact_array_length_is_rejected_not_allocated() -> None:
    # kio 0.6.5's native decoder allocates 32 GiB for this body and aborts the process.
    body = bytes.fromhex("ffffffff0f")
    with pytest.raises(DecodeError):
        decode_request_body(3, 12, body, 0)  # Metadata v12: compact array of topics first


def test_huge_classic_array_length_is_rejected() -> None:
    body = bytes.fromhex("7fffffff")
    with pytest.raises(DecodeError):
        decode_request_body(3, 4, body + b"\x01", 0)


def test_unknown_tagged_field_is_skipped() -> None:
    frame = bytes(encode_request(3, 12, 1, "c", {"topics": [{"name": "a"}]}))[4:]
    header, start = decode_request_header(frame, True)
    # Replace the body's trailing empty tagged-field section with one unknown tag (99, 3 bytes).
    assert frame[-1] == 0
    patched = frame[:-1] + bytes([1, 99, 3, 1, 2, 3])
    msg = decode_request_body(3, 12, patched, start)
    assert [t.name for t in msg.topics] == ["a"]


def test_truncated_tagged_field_is_an_error() -> None:
    frame = bytes(encode_request(3, 12, 1, "c", {"topics": []}))[4:]
    _, start = decode_request_header(frame, True)
    with pytest.raises(DecodeError):
        decode_request_body(3, 12, frame[:-1] + bytes([1, 99, 50, 1]), start)


def test_varint_longer_than_five_bytes_is_an_error() -> None:
    with pytest.raises(DecodeError):
        Reader(b"\xff\xff\xff\xff\xff\x01").uvarint()


@pytest.mark.parametrize("api_key,version", SUPPORTED)
def test_request_round_trip_with_defaults(api_key: int, version: int) -> None:
    frame = bytes(encode_request(api_key, version, 42, "client", {}))
    body = frame[4:]
    header, start = decode_request_header(body, request_codec(api_key, version).flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (api_key, version, 42, "client")
    decode_request_body(api_key, version, body, start)


def test_default_valued_tagged_fields_are_not_written() -> None:
    # ApiVersions v3 has tagged fields whose defaults must stay off the wire (librdkafka 2.0).
    out = bytes(encode_response(18, 3, 7, {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12}]}))
    cid, msg = decode_response(18, 3, out[4:])
    assert cid == 7 and msg.finalized_features_epoch == -1
    assert out.endswith(b"\x00\x00\x00\x00\x00\x00")  # throttle_time, then zero tagged fields


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(SUPPORTED), st.binary(max_size=200))
def test_fuzz_request_decoding_only_raises_decode_error(api_and_version: tuple[int, int], data: bytes) -> None:
    api_key, version = api_and_version
    flexible = request_codec(api_key, version).flexible
    try:
        _, start = decode_request_header(data, flexible)
        decode_request_body(api_key, version, data, start)
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SUPPORTED), st.data())
def test_fuzz_mutated_valid_requests(api_and_version: tuple[int, int], data: st.DataObject) -> None:
    api_key, version = api_and_version
    frame = bytearray(bytes(encode_request(api_key, version, 1, "c", {}))[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    try:
        _, start = decode_request_header(frame, request_codec(api_key, version).flexible)
        decode_request_body(api_key, version, frame, start)
    except DecodeError:
        pass


# -- every schema, random values: the generated encoder and decoder agree -------------------------

_INT_BITS = {"int8": 7, "int16": 15, "error_code": 15, "int32": 31, "timedelta_i32": 31, "int64": 63,
             "timedelta_i64": 63, "datetime_i64": 63}


def _random_value(draw: Any, f: tuple[Any, ...]) -> Any:
    name, kind, nullable, is_array, tag, default, nested = f
    if is_array:
        if nullable and draw(st.booleans()):
            return None
        return [_random_element(draw, f) for _ in range(draw(st.integers(0, 2)))]
    if nested is not None and nullable and draw(st.integers(0, 3)) == 0:
        return None
    return _random_element(draw, f)


def _random_element(draw: Any, f: tuple[Any, ...]) -> Any:
    name, kind, nullable, is_array, tag, default, nested = f
    if nested is not None:
        return _random_struct(draw, nested)
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        return draw(st.integers(-(2**bits), 2**bits - 1))
    if kind == "uint16":
        return draw(st.integers(0, 0xFFFF))
    if kind == "float64":
        return draw(st.floats(allow_nan=False))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "uuid":
        return draw(st.binary(min_size=16, max_size=16))
    if kind == "string":
        return draw(st.one_of(st.none(), st.text(max_size=8)) if nullable else st.text(max_size=8))
    return draw(st.one_of(st.none(), st.binary(max_size=8)) if nullable else st.binary(max_size=8))


def _random_struct(draw: Any, spec: tuple[bool, tuple[Any, ...]]) -> dict[str, Any]:
    return {f[0]: _random_value(draw, f) for f in spec[1] if draw(st.integers(0, 5))}  # some left out


_ALL_SCHEMAS = [("request", k) for k in sorted(REQUESTS)] + [("response", k) for k in sorted(RESPONSES)]


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(_ALL_SCHEMAS), st.data())
def test_random_messages_survive_encode_decode_encode(schema: tuple[str, tuple[int, int]], data: st.DataObject) -> None:
    side, key = schema
    codec = (request_codec if side == "request" else response_codec)(*key)
    spec = (REQUESTS if side == "request" else RESPONSES)[key]
    message = _random_struct(data.draw, spec)
    first = Out()
    codec.encode(first, message)
    r = Reader(bytes(first))
    decoded = codec.decode(r)
    assert r.pos == len(first), "the decoder stopped short of what the encoder wrote"
    for name, value in message.items():  # what was given comes back (ints, strings, nested counts)
        got = getattr(decoded, name)
        if isinstance(value, (int, str, float)) and not isinstance(value, bool):
            assert got == value, name
        elif isinstance(value, list):
            assert isinstance(got, list) and len(got) == len(value), name
    second = Out()
    codec.encode(second, decoded)
    assert bytes(second) == bytes(first)


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([0, 3, 18]), st.one_of(st.none(), st.text(max_size=12)), st.booleans(), st.data())
def test_request_header_fast_path_agrees_with_the_general_one(api_key: int, client_id: str | None, flexible: bool,
                                                              data: st.DataObject) -> None:
    frame = bytearray(bytes(encode_request(api_key, 9 if api_key == 0 else 3, 77, client_id, {}))[4:])
    for _ in range(data.draw(st.integers(0, 3))):
        frame[data.draw(st.integers(0, min(len(frame), 24) - 1))] = data.draw(st.integers(0, 255))
    frame = frame[: data.draw(st.integers(0, len(frame)))]

    def outcome(fn: Any) -> Any:
        try:
            return fn(bytes(frame), flexible)
        except DecodeError:
            return "DecodeError"

    assert outcome(decode_request_header) == outcome(_decode_request_header)


@pytest.mark.parametrize("api_key,version", SUPPORTED)
def test_every_truncation_of_a_request_is_a_decode_error(api_key: int, version: int) -> None:
    body = {"topics": [{"name": "t", "topic": "t", "partitions": [{"partition": 0}], "partition_data": [{"index": 0}]}],
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"r"}]}], "group_id": "g"}
    if api_key == 35:  # DescribeLogDirs: its partitions are an array of int32, not of structs
        body = {"topics": [{"topic": "t", "partitions": [0, 1]}]}
    if api_key == 34:  # AlterReplicaLogDirs: likewise, under the dirs
        body = {"dirs": [{"path": "/data/b", "topics": [{"name": "t", "partitions": [0, 1]}]}]}
    if api_key == 10000:  # DescribeLogCleaner (Samsa's): likewise
        body = {"topics": [{"name": "t", "partitions": [0, 1]}]}
    frame = bytes(encode_request(api_key, version, 1, "c", body))[4:]
    flexible = request_codec(api_key, version).flexible
    _, start = decode_request_header(frame, flexible)
    decode_request_body(api_key, version, frame, start)  # whole: fine
    for cut in range(start, len(frame)):
        with pytest.raises(DecodeError):
            decode_request_body(api_key, version, frame[:cut], start)
