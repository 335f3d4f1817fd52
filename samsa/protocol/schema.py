"""Message codecs compiled from kio's generated schema classes.

kio (PyPI) carries one frozen dataclass per Kafka message and version, with each field's wire
type in its metadata, tagged fields marked by `tag`, nullability in the type annotation and
nesting as further dataclasses. We read that description once per (message, version) and
compile it into a pair of closures:

* a decoder over our bounded `Reader` that builds plain `Msg` objects (attribute access, ints
  for times and durations, memoryview for `records`), and
* an encoder that writes any object with the right attribute names (or a dict) into an `Out`
  buffer, filling absent fields with their defaults and writing a tagged field only when its
  value differs from the default (old librdkafka mis-skips tagged fields it does not expect).

kio's own native decoder is not used for untrusted bytes: a hostile array length makes it
allocate without bound and an unknown tagged field raises KeyError. Ours rejects both.

A `records` value being encoded may be a file slice (anything with `fd`, `position`, `size`):
the encoder writes its length and records where its bytes belong in `Out.slices`, so the
network layer can `sendfile` them instead of copying.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from types import NoneType, UnionType
from typing import Any, get_args, get_origin

from .wire import F64, I8, I16, I32, I64, U16, DecodeError, Reader, write_uvarint


class Msg:
    """A decoded message or nested struct: fields as attributes."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"Msg({inner})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Msg) and other.__dict__ == self.__dict__

    def to_dict(self) -> dict[str, Any]:
        def conv(v: Any) -> Any:
            if isinstance(v, Msg):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        return {k: conv(v) for k, v in self.__dict__.items()}


class Out(bytearray):
    """Encoder output: the bytes, plus (position, file slice) pairs spliced in at send time."""

    slices: list[tuple[int, Any]]

    def __init__(self) -> None:
        super().__init__()
        self.slices = []

    @property
    def total_size(self) -> int:
        return len(self) + sum(s.size for _, s in self.slices)


Decoder = Callable[[Reader], Any]
Encoder = Callable[[Out, Any], None]

_PRIMITIVE_DECODERS: dict[str, Decoder] = {
    "int8": Reader.int8,
    "int16": Reader.int16,
    "error_code": Reader.int16,
    "uint16": Reader.uint16,
    "int32": Reader.int32,
    "timedelta_i32": Reader.int32,
    "int64": Reader.int64,
    "timedelta_i64": Reader.int64,
    "datetime_i64": Reader.int64,
    "float64": Reader.float64,
    "bool": Reader.boolean,
    "uuid": Reader.uuid,
}

_ZERO_UUID = bytes(16)


def _fixed_encoder(s: Any) -> Encoder:
    size = s.size
    pack_into = s.pack_into

    def enc(out: Out, v: Any) -> None:
        p = len(out)
        out.extend(b"\0" * size)
        pack_into(out, p, v)

    return enc


def _enc_bool(out: Out, v: Any) -> None:
    out.append(1 if v else 0)


def _enc_uuid(out: Out, v: Any) -> None:
    if v is None:
        out.extend(_ZERO_UUID)
    elif isinstance(v, (bytes, bytearray)):
        out.extend(v)
    else:  # uuid.UUID
        out.extend(v.bytes)


_PRIMITIVE_ENCODERS: dict[str, Encoder] = {
    "int8": _fixed_encoder(I8),
    "int16": _fixed_encoder(I16),
    "error_code": _fixed_encoder(I16),
    "uint16": _fixed_encoder(U16),
    "int32": _fixed_encoder(I32),
    "timedelta_i32": _fixed_encoder(I32),
    "int64": _fixed_encoder(I64),
    "timedelta_i64": _fixed_encoder(I64),
    "datetime_i64": _fixed_encoder(I64),
    "float64": _fixed_encoder(F64),
    "bool": _enc_bool,
    "uuid": _enc_uuid,
}

_ZERO: dict[str, Any] = {
    "int8": 0, "int16": 0, "error_code": 0, "uint16": 0, "int32": 0, "timedelta_i32": 0,
    "int64": 0, "timedelta_i64": 0, "datetime_i64": 0, "float64": 0.0, "bool": False,
    "uuid": _ZERO_UUID, "string": "", "bytes": b"", "records": None,
}  # fmt: skip


def _length_writer(compact: bool) -> Callable[[Out, int], None]:
    """Writes a length or count; -1 means null."""
    if compact:
        return lambda out, n: write_uvarint(out, n + 1)
    return lambda out, n: out.extend(I32.pack(n))


def _normalize_default(v: Any) -> Any:
    if isinstance(v, datetime.timedelta):
        return int(v.total_seconds() * 1000)
    if isinstance(v, datetime.datetime):
        return int(v.timestamp() * 1000)
    if isinstance(v, tuple):
        return list(v)
    if hasattr(v, "bytes") and not isinstance(v, (bytes, bytearray)):  # uuid.UUID
        return v.bytes
    return v


class FieldSpec:
    __slots__ = ("name", "tag", "default", "decode", "encode")

    def __init__(self, name: str, tag: int | None, default: Any, decode: Decoder, encode: Encoder):
        self.name = name
        self.tag = tag
        self.default = default
        self.decode = decode
        self.encode = encode


class StructCodec:
    """Compiled codec of one kio dataclass (a message or a nested struct) at one version."""

    def __init__(self, cls: type, flexible: bool) -> None:
        self.cls = cls
        self.flexible = flexible
        self.fields: list[FieldSpec] = []
        self.tagged: dict[int, FieldSpec] = {}
        for f in dataclasses.fields(cls):
            spec = _compile_field(f, flexible)
            if spec.tag is None:
                self.fields.append(spec)
            else:
                self.tagged[spec.tag] = spec
        self._tag_order = sorted(self.tagged.values(), key=lambda s: s.tag or 0)

    def decode(self, r: Reader) -> Msg:
        m = Msg()
        d = m.__dict__
        for f in self.fields:
            d[f.name] = f.decode(r)
        if self.flexible:
            for f in self._tag_order:
                d[f.name] = f.default() if callable(f.default) else f.default
            read_tagged_fields(r, self.tagged, d)
        return m

    def encode(self, out: Out, obj: Any) -> None:
        get = obj.get if isinstance(obj, dict) else (lambda n, dflt: getattr(obj, n, dflt))
        for f in self.fields:
            f.encode(out, get(f.name, _MISSING))
        if self.flexible:
            present = []
            for f in self._tag_order:
                v = get(f.name, _MISSING)
                if v is _MISSING or v is None:
                    continue
                dflt = f.default() if callable(f.default) else f.default
                if v == dflt:
                    continue
                present.append((f, v))
            write_uvarint(out, len(present))
            for f, v in present:
                sub = Out()
                f.encode(sub, v)
                write_uvarint(out, f.tag or 0)
                write_uvarint(out, len(sub))
                out.extend(sub)


_MISSING: Any = object()


def read_tagged_fields(r: Reader, known: dict[int, FieldSpec] | None, into: dict[str, Any] | None) -> None:
    n = r.check_count(r.uvarint())
    last = -1
    for _ in range(n):
        tag = r.uvarint()
        if tag <= last:
            raise DecodeError(f"tagged fields out of order ({tag} after {last})")
        last = tag
        size = r.uvarint()
        if size > r.remaining:
            raise DecodeError(f"tagged field {tag} of {size} bytes with {r.remaining} left")
        end = r.pos + size
        spec = known.get(tag) if known else None
        if spec is not None and into is not None:
            sub = Reader(r.buf, r.pos, end)
            into[spec.name] = spec.decode(sub)
        r.pos = end  # unknown tags are skipped, as the protocol requires


def _unwrap_optional(t: Any) -> tuple[Any, bool]:
    if get_origin(t) is UnionType:
        args = [a for a in get_args(t) if a is not NoneType]
        if len(args) != 1:
            raise TypeError(f"unsupported union {t}")
        return args[0], True
    return t, False


def _compile_field(f: dataclasses.Field[Any], flexible: bool) -> FieldSpec:
    tag = f.metadata.get("tag")
    t, nullable = _unwrap_optional(f.type)
    is_array = get_origin(t) is tuple
    elem = get_args(t)[0] if is_array else t
    elem, elem_nullable = _unwrap_optional(elem)
    nested = dataclasses.is_dataclass(elem)
    kind = None if nested else f.metadata.get("kafka_type")
    if not nested and kind is None:
        raise TypeError(f"field {f.name} has no kafka_type")
    name = f.name

    if nested:
        codec = StructCodec(elem, flexible)  # type: ignore[arg-type]
        elem_dec: Decoder = codec.decode
        elem_enc: Encoder = codec.encode
    else:
        elem_dec, elem_enc = _scalar_codec(kind, flexible, nullable and not is_array, name)

    if is_array:
        dec = _array_decoder(elem_dec, flexible, nullable, name)
        enc = _array_encoder(elem_enc, flexible, nullable, name)
    elif nested and nullable:
        dec, enc = _nullable_struct(elem_dec, elem_enc)
    else:
        dec, enc = elem_dec, elem_enc

    if f.default is not dataclasses.MISSING:
        default: Any = _normalize_default(f.default)
    elif f.default_factory is not dataclasses.MISSING:
        factory = f.default_factory
        default = lambda: _normalize_default(factory())  # noqa: E731
    elif is_array:
        default = None if nullable else list
    elif nested:
        default = None
    else:
        default = None if nullable else _ZERO[kind]  # type: ignore[index]
    if tag is None:
        inner_enc = enc

        def enc(out: Out, v: Any, _inner: Encoder = inner_enc, _d: Any = default) -> None:
            if v is _MISSING:
                v = _d() if callable(_d) else _d
            _inner(out, v)

    return FieldSpec(name, tag, default, dec, enc)


def _scalar_codec(kind: str, flexible: bool, nullable: bool, name: str) -> tuple[Decoder, Encoder]:
    if kind in _PRIMITIVE_DECODERS:
        return _PRIMITIVE_DECODERS[kind], _PRIMITIVE_ENCODERS[kind]
    write_len = _length_writer(flexible)
    if kind == "string":

        def dec_s(r: Reader) -> str | None:
            v = r.string(flexible)
            if v is None and not nullable:
                raise DecodeError(f"null in non-nullable string {name}")
            return v

        def enc_s(out: Out, v: str | None) -> None:
            if v is None:
                if flexible:
                    out.append(0)
                else:
                    out.extend(b"\xff\xff")
                return
            b = v.encode()
            if flexible:
                write_uvarint(out, len(b) + 1)
            else:
                out.extend(I16.pack(len(b)))
            out.extend(b)

        return dec_s, enc_s
    if kind in ("bytes", "records"):
        keep_view = kind == "records"

        def dec_b(r: Reader) -> Any:
            v = r.bytes_(flexible)
            if v is None:
                if not nullable and not keep_view:
                    raise DecodeError(f"null in non-nullable bytes {name}")
                return None
            return v if keep_view else bytes(v)

        def enc_b(out: Out, v: Any) -> None:
            if v is None:
                write_len(out, -1)
            elif hasattr(v, "fd"):
                write_len(out, v.size)
                out.slices.append((len(out), v))
            else:
                write_len(out, len(v))
                out.extend(v)

        return dec_b, enc_b
    raise TypeError(f"unsupported kafka_type {kind} for {name}")


def _array_decoder(elem: Decoder, flexible: bool, nullable: bool, name: str) -> Decoder:
    def dec(r: Reader) -> list[Any] | None:
        n = r.compact_length() if flexible else r.int32()
        if n < 0:
            if n == -1 and nullable:
                return None
            if n == -1:
                return []  # Kafka's clients send -1 for some non-nullable empty arrays
            raise DecodeError(f"negative array length {n} for {name}")
        r.check_count(n)
        return [elem(r) for _ in range(n)]

    return dec


def _array_encoder(elem: Encoder, flexible: bool, nullable: bool, name: str) -> Encoder:
    write_len = _length_writer(flexible)

    def enc(out: Out, v: Any) -> None:
        if v is None:
            write_len(out, -1 if nullable else 0)
            return
        write_len(out, len(v))
        for x in v:
            elem(out, x)

    return enc


def _nullable_struct(dec: Decoder, enc: Encoder) -> tuple[Decoder, Encoder]:
    def d(r: Reader) -> Any:
        return None if r.int8() < 0 else dec(r)

    def e(out: Out, v: Any) -> None:
        if v is None:
            out.append(0xFF)
        else:
            out.append(1)
            enc(out, v)

    return d, e
