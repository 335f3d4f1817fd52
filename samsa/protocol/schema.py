"""Message codecs compiled from flattened kio schemas.

kio (PyPI) carries one frozen dataclass per Kafka message and version, with each field's wire
type, tag, nullability and nesting. `gen_specs` flattens those into plain tuples once
(`_specs.py`, committed), and this module compiles a spec into a pair of Python functions,
generated as source for that message and version (a request is parsed on every call, so the
per-field dispatch of a generic walker costs more than the work):

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
from typing import Any, NamedTuple

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

    __slots__ = ("slices",)
    slices: list[tuple[int, Any]]

    def __init__(self) -> None:  # (bytearray's own __init__ has nothing to do for an empty one)
        self.slices = []

    @property
    def total_size(self) -> int:
        slices = self.slices
        if not slices:
            return len(self)
        return len(self) + sum(s.size for _, s in slices)


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
    straight-line code in which nested structs and arrays of structs are inlined, runs of
    fixed-width fields are read or written by one `struct` call (after one bounds check), and
    strings, bytes, arrays of scalars and tagged fields go through small helpers.
    """

    def __init__(self, spec: tuple[bool, tuple[Any, ...]]) -> None:
        flexible, fields = spec
        self.flexible = flexible
        self.tagged: dict[int, FieldSpec] = {}
        # The fields in wire order: (compiled field, its schema tuple, the codec of a nested struct)
        self._members: list[_Member] = []
        for f in fields:
            fs, nested_codec = _compile_field(f, flexible)
            if fs.tag is None:
                self._members.append(_Member(fs, f, nested_codec))
            else:
                self.tagged[fs.tag] = fs
        self._tag_order = sorted(self.tagged.values(), key=lambda s: s.tag or 0)
        self.decode: Callable[[Reader], Msg] = self._compile_decoder()
        self.encode: Callable[[Out, Any], None] = self._compile_encoder()
        self._error_counter: Callable[[Any], dict[int, int] | None] | None = None

    def error_paths(self) -> list[tuple[str, ...]]:
        """Where this message's error codes are: for each field of Kafka's error-code type, the
        names of the fields leading to it through nested structs and arrays of them (tagged
        fields left out)."""
        paths: list[tuple[str, ...]] = []
        for m in self._members:
            name, kind, _, is_array = m.schema[:4]
            if m.codec is not None:
                paths += [(name, *p) for p in m.codec.error_paths()]
            elif kind == "error_code" and not is_array:
                paths.append((name,))
        return paths

    def count_errors(self, obj: Any) -> dict[int, int] | None:
        """The error codes other than 0 in `obj` (a message as the encoder takes it: dicts or
        objects with the fields as attributes) with how often each occurs; None when there is
        none. A function generated for this message visits only the fields on the way to an
        error code (`error_paths`): the broker counts every response's errors with it."""
        return self.error_counter()(obj)

    def error_counter(self) -> Callable[[Any], dict[int, int] | None]:
        """`count_errors` as the generated function itself (compiled at the first call)."""
        if self._error_counter is None:
            self._error_counter = self._compile_error_counter()
        return self._error_counter

    def _compile_error_counter(self) -> Callable[[Any], dict[int, int] | None]:
        env: dict[str, Any] = {"partial": functools.partial}
        lines = ["def count(obj):", " found = None"]
        self._emit_error_count(lines, 0, " ", "obj")
        lines.append(" return found")
        return _define("count", lines, env)

    def _emit_error_count(self, lines: list[str], depth: int, ind: str, obj: str) -> None:
        g = f"g{depth}"
        wanted = [m for m in self._members
                  if (m.codec is not None and m.codec.error_paths()) or (m.codec is None and m.schema[1] == "error_code"
                                                                         and not m.schema[3])]
        if not wanted:
            return
        lines.append(f"{ind}{g} = {obj}.get if type({obj}) is dict else partial(getattr, {obj})")
        for m in wanted:
            name, _, _, is_array = m.schema[:4]
            if m.codec is None:
                lines += [f"{ind}v = {g}({name!r}, 0)", f"{ind}if v:", f"{ind} if found is None:",
                          f"{ind}  found = {{}}", f"{ind} found[v] = found.get(v, 0) + 1"]
                continue
            item = f"o{depth + 1}"
            lines += [f"{ind}{item}s = {g}({name!r}, None)", f"{ind}if {item}s:"]
            if is_array:
                lines.append(f"{ind} for {item} in {item}s:")
                m.codec._emit_error_count(lines, depth + 1, ind + "  ", item)
            else:
                m.codec._emit_error_count(lines, depth + 1, ind + " ", f"{item}s")

    def _compile_decoder(self) -> Callable[[Reader], Msg]:
        """One function for the whole message: nested structs and arrays of structs are
        inlined, with the position in a local; every read is bounds-checked first."""
        env: dict[str, Any] = {"Msg": Msg, "DecodeError": DecodeError, "Reader": Reader, "uvarint_at": _uvarint_at}
        lines = ["def decode(r):", " buf = r.buf", " p = r.pos", " end = r.end"]
        self._emit_struct(lines, env, 0, " ")
        lines += [" r.pos = p", " return m0"]
        return _define("decode", lines, env)

    def _emit_struct(self, lines: list[str], env: dict[str, Any], depth: int, ind: str) -> None:
        """Code that reads this struct at `p` into `m{depth}` (a Msg) and advances `p`."""

        def ref(value: Any) -> str:
            key = f"X{len(env)}"
            env[key] = value
            return key

        d = f"d{depth}"
        lines += [f"{ind}m{depth} = Msg()", f"{ind}{d} = m{depth}.__dict__"]
        for run in _runs(self._members, _FIXED_DECODE):
            if isinstance(run, list):
                fmt = struct.Struct(">" + "".join(_FIXED_DECODE[m.schema[1]] for m in run))
                targets = ", ".join(f"{d}[{m.spec.name!r}]" for m in run)
                lines += [f"{ind}if p + {fmt.size} > end:",
                          f"{ind} raise DecodeError(f'need {fmt.size} bytes at {{p}}, have {{end - p}}')",
                          f"{ind}{targets}, = {ref(fmt)}.unpack_from(buf, p)",
                          f"{ind}p += {fmt.size}"]
                continue
            spec, (name, kind, nullable, is_array, _, _, _), codec = run
            target = f"{d}[{name!r}]"
            if codec is not None and is_array:
                self._emit_array(lines, env, depth, ind, codec, nullable, name, target, ref)
            elif codec is not None:
                if nullable:  # int8 presence marker, negative for null
                    lines += [f"{ind}if p >= end:", f"{ind} raise DecodeError('need 1 byte at ' + str(p))",
                              f"{ind}p += 1", f"{ind}if buf[p - 1] >= 128:", f"{ind} {target} = None", f"{ind}else:"]
                    codec._emit_struct(lines, env, depth + 1, ind + " ")
                    lines.append(f"{ind} {target} = m{depth + 1}")
                else:
                    codec._emit_struct(lines, env, depth + 1, ind)
                    lines.append(f"{ind}{target} = m{depth + 1}")
            elif not is_array and kind == "string":
                lines.append(f"{ind}{target}, p = {ref(_string_reader(self.flexible, nullable, name))}(buf, p, end)")
            elif not is_array and kind in ("bytes", "records"):
                reader = _bytes_reader(self.flexible, nullable, kind == "records", name)
                lines.append(f"{ind}{target}, p = {ref(reader)}(buf, p, end)")
            else:  # arrays of scalars and anything else: the field's own decoder on a Reader
                lines += [f"{ind}rr = Reader(buf, p, end)", f"{ind}{target} = {ref(spec.decode)}(rr)",
                          f"{ind}p = rr.pos"]
        if self.flexible:
            tail = ref(self._decode_tagged)
            if not self._tag_order:  # no tagged fields known: the common case is an empty section
                lines += [f"{ind}if p < end and buf[p] == 0:", f"{ind} p += 1", f"{ind}else:",
                          f"{ind} rr = Reader(buf, p, end)", f"{ind} {tail}(rr, {d})", f"{ind} p = rr.pos"]
            else:
                lines += [f"{ind}rr = Reader(buf, p, end)", f"{ind}{tail}(rr, {d})", f"{ind}p = rr.pos"]

    def _emit_array(self, lines: list[str], env: dict[str, Any], depth: int, ind: str, codec: StructCodec,
                    nullable: bool, name: str, target: str, ref: Callable[[Any], str]) -> None:
        n = f"n{depth + 1}"
        if self.flexible:  # compact: uvarint of count + 1
            lines += [f"{ind}if p < end and buf[p] < 128:", f"{ind} {n} = buf[p] - 1", f"{ind} p += 1",
                      f"{ind}else:", f"{ind} {n}, p = uvarint_at(buf, p, end)", f"{ind} {n} -= 1"]
        else:
            lines += [f"{ind}if p + 4 > end:", f"{ind} raise DecodeError(f'need 4 bytes at {{p}}, have {{end - p}}')",
                      f"{ind}{n}, = {ref(I32)}.unpack_from(buf, p)", f"{ind}p += 4"]
        lines += [f"{ind}if {n} < 0:",
                  f"{ind} if {n} != -1:",
                  f"{ind}  raise DecodeError(f'negative array length {{{n}}} for {name}')",
                  # Kafka's clients send -1 for some non-nullable empty arrays
                  f"{ind} {target} = {'None' if nullable else '[]'}",
                  f"{ind}else:",
                  f"{ind} if {n} > end - p:",
                  f"{ind}  raise DecodeError(f'array of {{{n}}} elements with only {{end - p}} bytes left')",
                  f"{ind} l{depth + 1} = []",
                  f"{ind} for _ in range({n}):"]
        codec._emit_struct(lines, env, depth + 1, ind + "  ")
        lines += [f"{ind}  l{depth + 1}.append(m{depth + 1})", f"{ind} {target} = l{depth + 1}"]

    def _decode_tagged(self, r: Reader, d: dict[str, Any]) -> None:
        for f in self._tag_order:
            d[f.name] = f.default() if callable(f.default) else f.default
        read_tagged_fields(r, self.tagged, d)

    def _compile_encoder(self) -> Callable[[Out, Any], None]:
        """One function for the whole message: arrays of structs and nested structs inlined."""
        env: dict[str, Any] = {"MISSING": _MISSING, "partial": functools.partial, "write_uvarint": write_uvarint,
                               "I32": I32}
        lines = ["def encode(out, obj):"]
        self._emit_encode(lines, env, 0, " ", "obj")
        lines.append(" return None")
        return _define("encode", lines, env)

    def _emit_encode(self, lines: list[str], env: dict[str, Any], depth: int, ind: str, obj: str) -> None:
        """Code that writes the struct held in variable `obj` (a dict, or any object with the
        fields as attributes; absent fields take their defaults)."""

        def ref(value: Any) -> str:
            key = f"X{len(env)}"
            env[key] = value
            return key

        g = f"g{depth}"
        lines.append(f"{ind}{g} = {obj}.get if isinstance({obj}, dict) else partial(getattr, {obj})")

        def value(f: FieldSpec, var: str) -> None:
            """The field's value (its default when absent) into `var`."""
            if callable(f.default):
                lines.extend([f"{ind}{var} = {g}({f.name!r}, MISSING)", f"{ind}if {var} is MISSING:",
                              f"{ind} {var} = {ref(f.default)}()"])
            else:
                lines.append(f"{ind}{var} = {g}({f.name!r}, {ref(f.default)})")

        def length(n: str, at: str) -> list[str]:
            """Code writing the count or length `n` (an expression; -1 is null) at indent `at`."""
            if self.flexible:
                return [f"{at}c = {n} + 1", f"{at}if c < 128:", f"{at} out.append(c)", f"{at}else:",
                        f"{at} write_uvarint(out, c)"]
            return [f"{at}out += I32.pack({n})"]

        for run in _runs(self._members, _FIXED_ENCODE):
            if isinstance(run, list):
                names = []
                for i, m in enumerate(run):
                    value(m.spec, f"v{i}")
                    if m.schema[2]:  # a nullable time (kio's datetime | None) is -1 on the wire
                        lines.extend([f"{ind}if v{i} is None:", f"{ind} v{i} = -1"])
                    names.append(f"v{i}")
                fmt = struct.Struct(">" + "".join(_FIXED_ENCODE[m.schema[1]] for m in run))
                lines.append(f"{ind}out += {ref(fmt)}.pack({', '.join(names)})")
                continue
            spec, (name, kind, nullable, is_array, _, _, _), codec = run
            a = f"a{depth}"
            value(spec, a)
            if codec is not None and is_array:
                x = f"x{depth + 1}"
                lines.append(f"{ind}if {a} is None:")
                lines += length("-1" if nullable else "0", ind + " ")
                lines.append(f"{ind}else:")
                lines += length(f"len({a})", ind + " ")
                lines.append(f"{ind} for {x} in {a}:")
                codec._emit_encode(lines, env, depth + 1, ind + "  ", x)
            elif codec is not None and nullable:
                lines += [f"{ind}if {a} is None:", f"{ind} out.append(255)", f"{ind}else:", f"{ind} out.append(1)"]
                codec._emit_encode(lines, env, depth + 1, ind + " ", a)
            elif codec is not None:
                codec._emit_encode(lines, env, depth + 1, ind, a)
            else:
                lines.append(f"{ind}{ref(spec.encode)}(out, {a})")
        if self.flexible:
            lines.append(f"{ind}out.append(0)" if not self._tag_order else f"{ind}{ref(self._encode_tagged)}(out, {g})")

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


def _uvarint_at(buf: Any, p: int, end: int) -> tuple[int, int]:
    """Reader.uvarint over (buf, p, end): (value, next position)."""
    result = 0
    shift = 0
    while True:
        if p >= end:
            raise DecodeError("truncated varint")
        b = buf[p]
        p += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, p
        shift += 7
        if shift >= 35:
            raise DecodeError("varint too long")


def _length_at(buf: Any, p: int, end: int, compact: bool, width: int) -> tuple[int, int]:
    """A string's or bytes' length: compact (uvarint N+1) or classic (int16/int32); -1 is null."""
    if compact:
        if p < end and buf[p] < 0x80:
            return buf[p] - 1, p + 1
        n, p = _uvarint_at(buf, p, end)
        return n - 1, p
    if p + width > end:
        raise DecodeError(f"need {width} bytes at {p}, have {end - p}")
    return (I16 if width == 2 else I32).unpack_from(buf, p)[0], p + width


def _string_reader(compact: bool, nullable: bool, name: str) -> Callable[[Any, int, int], tuple[Any, int]]:
    def read(buf: Any, p: int, end: int) -> tuple[str | None, int]:
        n, p = _length_at(buf, p, end, compact, 2)
        if n < 0:
            if n != -1:
                raise DecodeError(f"negative string length {n}")
            if not nullable:
                raise DecodeError(f"null in non-nullable string {name}")
            return None, p
        q = p + n
        if q > end:
            raise DecodeError(f"need {n} bytes at {p}, have {end - p}")
        try:
            return str(buf[p:q], "utf-8"), q
        except UnicodeDecodeError as e:
            raise DecodeError(f"string is not UTF-8: {e}") from None

    return read


def _bytes_reader(compact: bool, nullable: bool, keep_view: bool,
                  name: str) -> Callable[[Any, int, int], tuple[Any, int]]:
    def read(buf: Any, p: int, end: int) -> tuple[Any, int]:
        n, p = _length_at(buf, p, end, compact, 4)
        if n < 0:
            if n != -1:
                raise DecodeError(f"negative bytes length {n}")
            if not nullable and not keep_view:
                raise DecodeError(f"null in non-nullable bytes {name}")
            return None, p
        q = p + n
        if q > end:
            raise DecodeError(f"need {n} bytes at {p}, have {end - p}")
        return (buf[p:q] if keep_view else bytes(buf[p:q])), q

    return read


class _Member(NamedTuple):
    spec: FieldSpec
    schema: tuple[Any, ...]  # (name, kind, nullable, is_array, tag, default, nested)
    codec: StructCodec | None  # a nested struct's


def _runs(members: list[_Member], fixed: dict[str, str]) -> list[Any]:
    """The members in order, each run of fixed-width scalars (kinds in `fixed`) grouped in a list."""
    out: list[Any] = []
    for m in members:
        _, kind, _, is_array, _, _, nested = m.schema
        if not is_array and nested is None and kind in fixed:
            if out and isinstance(out[-1], list):
                out[-1].append(m)
            else:
                out.append([m])
        else:
            out.append(m)
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


def _compile_field(f: tuple[Any, ...], flexible: bool) -> tuple[FieldSpec, StructCodec | None]:
    name, kind, nullable, is_array, tag, default, nested = f
    codec = None
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
    return FieldSpec(name, tag, default, dec, enc), codec


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
