"""The record walker (samsa/protocol/record_walk.py): the compiled walk and the Python one give
the same answer for every input, valid or not, and each way a record can be malformed is found."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.protocol import record_walk
from samsa.protocol.batch import HEADER_SIZE
from samsa.protocol.record_walk import LONG_MAX, LONG_MIN, Walk, walk_py
from samsa.protocol.records import _put_varint, build_batch

try:
    from samsa.protocol import _recwalk as native
except ImportError:  # not built: test_the_compiled_walker_is_built says so, the comparisons fail
    native = None  # type: ignore[assignment]


def test_the_compiled_walker_is_built() -> None:
    # pip install builds it (setup.py); without it every produce walks its records in Python
    assert record_walk.NATIVE, "samsa/protocol/_recwalk.c was not built: is a C compiler installed?"


def _both(data: bytes, count: int, base: int = 0, lo: int = LONG_MIN, hi: int = LONG_MAX,
          need_key: bool = False) -> Walk:
    py = walk_py(data, count, base, lo, hi, need_key)
    assert native is not None
    c = Walk._make(native.walk(data, count, base, lo, hi, need_key))
    assert c == py
    return c


def _body(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]]) -> bytes:
    return build_batch(records)[HEADER_SIZE:]


def _record(*fields: int | bytes) -> bytes:
    """One record from raw fields (ints as varints, bytes as they are), with its length."""
    inner = bytearray()
    for f in fields:
        if isinstance(f, int):
            _put_varint(inner, f)
        else:
            inner += f
    out = bytearray()
    _put_varint(out, len(inner))
    return bytes(out + inner)


OK_RECORD = (b"\x00", 0, 0, 1, b"k", 1, b"v", 0)  # attributes, ts delta, offset delta, key, value, no headers

MALFORMED = [
    ("more records declared than held", _record(*OK_RECORD), 2, "declares 2 records but holds 1"),
    ("length past the end", b"\x7e" + _record(*OK_RECORD)[1:], 1, "length 63"),
    ("zero length", b"\x00", 1, "length 0"),
    ("attributes not 0", _record(b"\x80", 0, 0, 1, b"k", 1, b"v", 0), 1, "attributes 128"),
    ("offset delta not its index", _record(b"\x00", 0, 5, 1, b"k", 1, b"v", 0), 1, "offset delta 5, expected 0"),
    ("key length -2", _record(b"\x00", 0, 0, -2, 1, b"v", 0), 1, "key length -2"),
    ("key overruns the record", _record(b"\x00", 0, 0, 9, b"k", 1, b"v", 0), 1, "key length 9"),
    ("negative header count", _record(b"\x00", 0, 0, 1, b"k", 1, b"v", -1), 1, "header count -1"),
    ("null header key", _record(b"\x00", 0, 0, 1, b"k", 1, b"v", 1, -1, -1), 1, "key length -1"),
    ("header value overruns", _record(b"\x00", 0, 0, 1, b"k", 1, b"v", 1, 1, b"h", 5, b"x"), 1, "header value length 5"),
    ("fields end short of the length", _record(*OK_RECORD, b"\x00\x00"), 1, "fields end 2 bytes short"),
    ("bytes after the last record", _record(*OK_RECORD) + b"\x01", 1, "1 bytes are left"),
    ("varint of 6 bytes", _record(b"\x00", 0, 0, b"\xff\xff\xff\xff\xff\x01", b"k", 1, b"v", 0), 1, "longer than Java's"),
    ("record ends inside a varint", _record(b"\x00", b"\x80"), 1, "ends inside a varint"),
]


@pytest.mark.parametrize(("data", "count", "why"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_records_are_found(data: bytes, count: int, why: str) -> None:
    w = _both(data, count)
    assert w.error is not None and why in w.error, w.error


def test_a_good_batch_walks_clean_with_its_largest_timestamp() -> None:
    records = [(b"k%d" % i, b"v" * i, [("h", b"x"), ("n", None)], 1000 + (i * 7) % 5) for i in range(200)]
    w = _both(_body(records), 200, base=1000)
    assert w == Walk(None, 1004, None, None)


def test_timestamps_out_of_bounds_and_null_keys_are_listed() -> None:
    records = [(None if i % 3 == 0 else b"k", b"v", [], ts) for i, ts in enumerate([50, 10, 99, 100, 101, 10])]
    w = _both(_body(records), 6, base=10, lo=20, hi=100, need_key=True)
    assert w == Walk(None, 101, [1, 4, 5], [0, 3])
    assert _both(_body(records), 6, base=10).keyless is None  # only looked for when asked


def test_timestamp_minus_one_is_no_timestamp_and_java_wraps_around() -> None:
    body = _record(b"\x00", -1, 0, 1, b"k", 1, b"v", 0)
    assert _both(body, 1, base=0, lo=0, hi=10) == Walk(None, -1, None, None)
    wrapped = _record(b"\x00", 1, 0, 1, b"k", 1, b"v", 0)
    assert _both(wrapped, 1, base=LONG_MAX).max_timestamp == -1  # Long.MAX + 1 wraps to Long.MIN, below -1


records_strategy = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=200)),
              st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=10))), max_size=3),
              st.integers(min_value=0, max_value=2**40)),
    min_size=1, max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_strategy)
def test_any_built_batch_walks_clean(records: list) -> None:  # type: ignore[type-arg]
    base = min(r[3] for r in records)
    w = _both(_body(records), len(records), base=base, need_key=True)
    assert w.error is None and w.max_timestamp == max(r[3] for r in records)
    assert w.keyless == ([i for i, r in enumerate(records) if r[0] is None] or None)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records_strategy, st.integers(min_value=0, max_value=2**32), st.integers(min_value=-2, max_value=2))
def test_mutated_records_get_the_same_answer_from_both_walks(records: list, seed: int,  # type: ignore[type-arg]
                                                              count_change: int) -> None:
    rng = random.Random(seed)
    data = bytearray(_body(records))
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(4)
        i = rng.randrange(len(data) + 1)
        if kind == 0 and i < len(data):
            data[i] = rng.randrange(256)
        elif kind == 1:
            data[i:i] = bytes([rng.randrange(256)])
        elif kind == 2 and i < len(data):
            del data[i]
        else:
            data = data[:i]
    count = max(0, len(records) + count_change)
    base = min(r[3] for r in records)
    _both(bytes(data), count, base=base, lo=base + 5, hi=base + 2**39, need_key=bool(seed & 1))


@pytest.mark.parametrize("name", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"ab\xe2\x82",
                                  b"\xe2\x28\xa1"])
def test_a_header_key_must_be_utf8(name: bytes) -> None:
    # invalid byte, overlong NUL, a surrogate, past U+10FFFF, cut short, bad continuation
    w = _both(_record(b"\x00", 0, 0, 1, b"k", 1, b"v", 1, len(name), name, -1), 1)
    assert w.error is not None and "not valid UTF-8" in w.error


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12))
def test_utf8_checks_agree_with_pythons_strict_decoder(name: bytes) -> None:
    w = _both(_record(b"\x00", 0, 0, 1, b"k", 1, b"v", 1, len(name), name, -1), 1)
    try:
        name.decode("utf-8")
        assert w.error is None
    except UnicodeDecodeError:
        assert w.error is not None
