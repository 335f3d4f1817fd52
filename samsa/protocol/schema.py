"""Message codecs compiled from flattened kio schemas.

kio (PyPI) carries one frozen dataclass per Kafka message and version, with each field's wire
type, tag, nullability and nesting. `gen_specs` flattens those into plain tuples once
(`_specs.py`, committed), and this module compiles a spec into a pair of closures:

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

import functools
import struct
from collections.abc import Callable
from typing import Any

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


class FieldSpec:
    __slots__ = ("name", "tag", "default", "decode", "encode")

    def __init__(self, name: str, tag: int | None, default: Any, decode: Decoder, encode: Encoder):
        self.name = name
        self.tag = tag
        self.default = default
        self.decode = decode
        self.encode = encode


# Fixed-width wire types as struct format characters: a run of them is read with one unpack
# (after one bounds check) and written with one pack. uuid is read this way; it is written by
# `_enc_uuid`, which also takes None and uuid.UUID.
_FIXED_DECODE = {"int8": "b", "int16": "h", "error_code": "h", "uint16": "H", "int32": "i",
                 "timedelta_i32": "i", "int64": "q", "timedelta_i64": "q", "datetime_i64": "q",
                 "float64": "d", "bool": "?", "uuid": "16s"}
_FIXED_ENCODE = {k: v for k, v in _FIXED_DECODE.items() if k != "uuid"}


class StructCodec:
    """Compiled codec of one kio dataclass (a message or a nested struct) at one version.

    `decode(reader)` and `encode(out, obj)` are Python functions generated for this struct:
    straight-line code with runs of fixed-width fields read and written by one struct call,
    and the other fields through the per-field codecs of `_compile_field`.
    """

    def __init__(self, spec: tuple[bool, tuple[Any, ...]]) -> None:
        flexible, fields = spec
        self.flexible = flexible
        self.fields: list[FieldSpec] = []
        self.tagged: dict[int, FieldSpec] = {}
        kinds: list[str | None] = []
        for f in fields:
            spec = _compile_field(f, flexible)
            if spec.tag is None:
                self.fields.append(spec)
                name, kind, _, is_array, _, _, nested = f
                kinds.append(kind if not is_array and nested is None else None)
            else:
                self.tagged[spec.tag] = spec
        self._tag_order = sorted(self.tagged.values(), key=lambda s: s.tag or 0)
        self.decode: Callable[[Reader], Msg] = self._compile_decoder(kinds)
        self.encode: Callable[[Out, Any], None] = self._compile_encoder(kinds)

    def _compile_decoder(self, kinds: list[str | None]) -> Callable[[Reader], Msg]:
        env: dict[str, Any] = {"Msg": Msg, "DecodeError": DecodeError, "tail": self._decode_tagged}
        lines = ["def decode(r):", " buf = r.buf", " m = Msg()", " d = m.__dict__"]
        for run in _runs(self.fields, kinds, _FIXED_DECODE):
            if isinstance(run, FieldSpec):
                env[f"D{len(env)}"] = run.decode
                lines.append(f" d[{run.name!r}] = D{len(env) - 1}(r)")
                continue
            fmt = struct.Struct(">" + "".join(_FIXED_DECODE[k] for _, k in run))
            env[f"S{len(env)}"] = fmt
            targets = ", ".join(f"d[{f.name!r}]" for f, _ in run)
            lines += [" p = r.pos",
                      f" if p + {fmt.size} > r.end:",
                      f"  raise DecodeError(f'need {fmt.size} bytes at {{p}}, have {{r.end - p}}')",
                      f" {targets}, = S{len(env) - 1}.unpack_from(buf, p)",
                      f" r.pos = p + {fmt.size}"]
        if self.flexible:
            if not self._tag_order:  # no tagged fields known: the common case is an empty section
                lines += [" p = r.pos", " if p < r.end and buf[p] == 0:", "  r.pos = p + 1", "  return m"]
            lines.append(" tail(r, d)")
        lines.append(" return m")
        return _define("decode", lines, env)

    def _decode_tagged(self, r: Reader, d: dict[str, Any]) -> None:
        for f in self._tag_order:
            d[f.name] = f.default() if callable(f.default) else f.default
        read_tagged_fields(r, self.tagged, d)

    def _compile_encoder(self, kinds: list[str | None]) -> Callable[[Out, Any], None]:
        env: dict[str, Any] = {"MISSING": _MISSING, "partial": functools.partial, "tail": self._encode_tagged}
        lines = ["def encode(out, obj):", " g = obj.get if isinstance(obj, dict) else partial(getattr, obj)"]

        def value(f: FieldSpec) -> str:
            """Code for the field's value (the default when absent) into `v`."""
            env[f"F{len(env)}"] = f.default
            ref = f"F{len(env) - 1}"
            if callable(f.default):
                return f" v = g({f.name!r}, MISSING)\n if v is MISSING:\n  v = {ref}()"
            return f" v = g({f.name!r}, {ref})"

        for run in _runs(self.fields, kinds, _FIXED_ENCODE):
            if isinstance(run, FieldSpec):
                lines.append(value(run))
                env[f"E{len(env)}"] = run.encode
                lines.append(f" E{len(env) - 1}(out, v)")
                continue
            names = []
            for i, (f, _) in enumerate(run):
                lines.append(value(f))
                lines.append(f" v{i} = v")
                names.append(f"v{i}")
            env[f"S{len(env)}"] = struct.Struct(">" + "".join(_FIXED_ENCODE[k] for _, k in run))
            lines.append(f" out += S{len(env) - 1}.pack({', '.join(names)})")
        if self.flexible:
            lines.append(" out.append(0)" if not self._tag_order else " tail(out, g)")
        lines.append(" return None")
        return _define("encode", lines, env)

    def _encode_tagged(self, out: Out, get: Callable[[str, Any], Any]) -> None:
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


def _runs(fields: list[FieldSpec], kinds: list[str | None], fixed: dict[str, str]) -> list[Any]:
    """The fields in order, with each run of fixed-width ones grouped as [(field, kind), ...]."""
    out: list[Any] = []
    for f, kind in zip(fields, kinds):
        if kind in fixed:
            if out and isinstance(out[-1], list):
                out[-1].append((f, kind))
            else:
                out.append([(f, kind)])
        else:
            out.append(f)
    return out


def _define(name: str, lines: list[str], env: dict[str, Any]) -> Any:
    exec(compile("\n".join(lines), f"<samsa codec {name}>", "exec"), env)  # noqa: S102 - our own generated code
    return env[name]


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


def _compile_field(f: tuple[Any, ...], flexible: bool) -> FieldSpec:
    name, kind, nullable, is_array, tag, default, nested = f
    if nested is not None:
        codec = StructCodec(nested)
        elem_dec: Decoder = codec.decode
        elem_enc: Encoder = codec.encode
    else:
        elem_dec, elem_enc = _scalar_codec(kind, flexible, nullable and not is_array, name)

    if is_array:
        dec = _array_decoder(elem_dec, flexible, nullable, name)
        enc = _array_encoder(elem_enc, flexible, nullable, name)
    elif nested is not None and nullable:
        dec, enc = _nullable_struct(elem_dec, elem_enc)
    else:
        dec, enc = elem_dec, elem_enc

    if default is ...:  # a required field: the type's zero value
        if is_array:
            default = None if nullable else list
        elif nested is not None:
            default = None
        else:
            default = None if nullable else _ZERO[kind]
    elif isinstance(default, tuple):
        items = default
        default = lambda: list(items)  # noqa: E731
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
            if v is None and not nullable:
                v = ""  # a non-nullable string has no null on the wire
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
