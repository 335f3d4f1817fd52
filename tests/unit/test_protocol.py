"""The sans-io protocol layer: bounded decoding, tagged fields, round trips, fuzz."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.handlers import HANDLER_MODULES
from samsa.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_codec,
)
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
