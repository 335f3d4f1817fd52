"""The records of `__consumer_offsets` and `__transaction_state` as kafka-dump-log prints them.

Kafka's DumpLogSegments (`--offsets-decoder`, `--transaction-log-decoder`) prints each record's
key and value as the JSON its generated converters write, wrapped with the record type and the
value's version:

    key:     {"type":"<record type>","data":{...}}      (the key's int16 prefix is its type)
    payload: {"version":"<value version>","data":{...}} or <DELETE> for a tombstone

The converters' rules, which `_to_json` follows: fields in schema order under their camelCase
names; a field the version lacks is left out; a tagged field only when it differs from its
default; bytes as standard base64, a uuid as Kafka's Uuid string (URL-safe base64, no
padding); JSON with no spaces and only `"`, `\\` and control characters escaped (Jackson's
ObjectNode.toString). A group's members using the consumer protocol have their subscription
and assignment bytes decoded too (kept as base64 when they do not decode), and a transaction's
status is its state's name (the number itself when unknown), as DumpLogSegments does.

The schemas below are the record formats of samsa/coordinator/records.py and txn_records.py,
written as field tables so that every version reads the same way:

    (json name, type, first version, last version or None, nullable from version or None,
     tag or None, default of a tagged field, nested fields of an array of structs)

Record types Samsa never writes (KIP-848, share and streams groups: types 3 and up) are
reported as unknown; Kafka decodes them.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, NamedTuple

from samsa.protocol.wire import DecodeError, Reader


class F(NamedTuple):
    name: str
    type: str  # int8 int16 int32 int64 string bytes uuid [int32] [string] [struct]
    lo: int = 0
    hi: int | None = None
    nullable: int | None = None  # nullable from this version
    tag: int | None = None
    default: Any = None
    fields: tuple[F, ...] = ()


class Schema(NamedTuple):
    name: str
    versions: tuple[int, int]
    flexible_from: int | None
    fields: tuple[F, ...]


_ZERO_UUID = bytes(16)

OFFSET_COMMIT_KEY = Schema("OffsetCommitKey", (0, 0), None, (
    F("group", "string"), F("topic", "string"), F("partition", "int32")))
GROUP_METADATA_KEY = Schema("GroupMetadataKey", (0, 0), None, (F("group", "string"),))
LEGACY_OFFSET_COMMIT_VALUE = Schema("LegacyOffsetCommitValue", (0, 0), None, (
    F("offset", "int64"), F("metadata", "string"), F("commitTimestamp", "int64")))
OFFSET_COMMIT_VALUE = Schema("OffsetCommitValue", (0, 4), 4, (
    F("offset", "int64"),
    F("leaderEpoch", "int32", 3),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", 1, 1),
    F("topicId", "uuid", 4, tag=0, default=_ZERO_UUID),
))
GROUP_METADATA_VALUE = Schema("GroupMetadataValue", (0, 4), 4, (
    F("protocolType", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable=0),
    F("leader", "string", nullable=0),
    F("currentStateTimestamp", "int64", 2),
    F("members", "[struct]", fields=(
        F("memberId", "string"),
        F("groupInstanceId", "string", 3, nullable=3),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeout", "int32", 1),
        F("sessionTimeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    )),
))
_TOPIC_PARTITIONS = (F("topic", "string"), F("partitions", "[int32]"))
CONSUMER_SUBSCRIPTION = Schema("ConsumerProtocolSubscription", (0, 3), None, (
    F("topics", "[string]"),
    F("userData", "bytes", nullable=0),
    F("ownedPartitions", "[struct]", 1, fields=_TOPIC_PARTITIONS),
    F("generationId", "int32", 2),
    F("rackId", "string", 3, nullable=3),
))
CONSUMER_ASSIGNMENT = Schema("ConsumerProtocolAssignment", (0, 3), None, (
    F("assignedPartitions", "[struct]", fields=_TOPIC_PARTITIONS),
    F("userData", "bytes", nullable=0),
))
TRANSACTION_LOG_KEY = Schema("TransactionLogKey", (0, 0), None, (F("transactionalId", "string"),))
TRANSACTION_LOG_VALUE = Schema("TransactionLogValue", (0, 1), 1, (
    F("producerId", "int64"),
    F("previousProducerId", "int64", 1, tag=0, default=-1),
    F("nextProducerId", "int64", 1, tag=1, default=-1),
    F("producerEpoch", "int16"),
    F("nextProducerEpoch", "int16", 1, tag=3, default=-1),
    F("transactionTimeoutMs", "int32"),
    F("transactionStatus", "int8"),
    F("transactionPartitions", "[struct]", nullable=0, fields=(
        F("topic", "string"), F("partitionIds", "[int32]"))),
    F("transactionLastUpdateTimestampMs", "int64"),
    F("transactionStartTimestampMs", "int64"),
    F("clientTransactionVersion", "int16", 1, tag=2, default=0),
))

# record type -> (key schema, value schema), per topic
OFFSETS_RECORDS = {0: (OFFSET_COMMIT_KEY, LEGACY_OFFSET_COMMIT_VALUE), 1: (OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE),
                   2: (GROUP_METADATA_KEY, GROUP_METADATA_VALUE)}
TRANSACTION_RECORDS = {0: (TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}

# Kafka's TransactionState ids and names
TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
                      5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


class UnknownRecordType(Exception):
    def __init__(self, record_type: int) -> None:
        super().__init__(record_type)
        self.record_type = record_type


# -- reading ---------------------------------------------------------------------------------------


def _in(f: F, version: int) -> bool:
    return version >= f.lo and (f.hi is None or version <= f.hi)


def _read_string(r: Reader, flexible: bool, nullable: bool, what: str) -> str | None:
    n = r.compact_length() if flexible else r.int16()
    if n < 0:
        if nullable and n == -1:
            return None
        raise DecodeError(f"non-nullable field {what} was serialized as null" if n == -1
                          else f"string field {what} had invalid length {n}")
    return str(r.raw(n), "utf-8", "replace")


def _read_bytes(r: Reader, flexible: bool, nullable: bool, what: str) -> bytes | None:
    n = r.compact_length() if flexible else r.int32()
    if n < 0:
        if nullable and n == -1:
            return None
        raise DecodeError(f"non-nullable field {what} was serialized as null" if n == -1
                          else f"bytes field {what} had invalid length {n}")
    return bytes(r.raw(n))


def _read_count(r: Reader, flexible: bool, nullable: bool, what: str) -> int | None:
    n = r.compact_length() if flexible else r.int32()
    if n < 0:
        if nullable and n == -1:
            return None
        raise DecodeError(f"non-nullable field {what} was serialized as null")
    return r.check_count(n)


def _read_value(r: Reader, f: F, version: int, flexible: bool) -> Any:
    nullable = f.nullable is not None and version >= f.nullable
    t = f.type
    if t == "int8":
        return r.int8()
    if t == "int16":
        return r.int16()
    if t == "int32":
        return r.int32()
    if t == "int64":
        return r.int64()
    if t == "uuid":
        return r.uuid()
    if t == "string":
        return _read_string(r, flexible, nullable, f.name)
    if t == "bytes":
        return _read_bytes(r, flexible, nullable, f.name)
    n = _read_count(r, flexible, nullable, f.name)
    if n is None:
        return None
    if t == "[int32]":
        return [r.int32() for _ in range(n)]
    if t == "[string]":
        return [_read_string(r, flexible, False, f.name) for _ in range(n)]
    return [_read_struct(r, f.fields, version, flexible) for _ in range(n)]


def _read_struct(r: Reader, fields: Sequence[F], version: int, flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.tag is None and _in(f, version):
            out[f.name] = _read_value(r, f, version, flexible)
    if flexible:
        tagged = {f.tag: f for f in fields if f.tag is not None and _in(f, version)}
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            field = tagged.get(tag)
            body = Reader(r.raw(size))
            if field is not None:
                out[field.name] = _read_value(body, field, version, flexible)
    return out


def read_message(schema: Schema, data: bytes | bytearray | memoryview, version: int) -> dict[str, Any]:
    """The fields of a `schema` message at `version` (without its version prefix)."""
    lo, hi = schema.versions
    if not lo <= version <= hi:
        raise DecodeError(f"Can't read version {version} of {schema.name}")
    flexible = schema.flexible_from is not None and version >= schema.flexible_from
    return _read_struct(Reader(data), schema.fields, version, flexible)


# -- writing JSON as Kafka's converters do ---------------------------------------------------------

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def json_string(s: str) -> str:
    """A JSON string as Jackson writes it: only quotes, backslashes and control characters escaped."""
    if not any(c in _SHORT_ESCAPES or c < " " for c in s):
        return f'"{s}"'
    return '"' + "".join(_SHORT_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if c < " " else c) for c in s) + '"'


def kafka_uuid(raw: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _json_value(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json_string(v)
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, bytes):
        return json_string(base64.b64encode(v).decode())
    if isinstance(v, list):
        return "[" + ",".join(_json_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{json_string(k)}:{_json_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no JSON for {type(v).__name__}")


class Raw(NamedTuple):
    """JSON text already written (a decoded subscription inside a member)."""

    text: str


def _to_json(fields: Sequence[F], data: dict[str, Any], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if f.name not in data or not _in(f, version):
            continue
        v = data[f.name]
        if f.tag is not None and v == f.default:
            continue
        if f.type == "uuid":
            v = kafka_uuid(v)
        elif f.type == "[struct]" and v is not None:
            v = [_to_json(f.fields, x, version) for x in v]
        out[f.name] = v
    return out


def message_json(schema: Schema, data: dict[str, Any], version: int) -> str:
    return _json_value(_to_json(schema.fields, data, version))


# -- the two decoders ------------------------------------------------------------------------------


def _embedded(schema: Schema, raw: bytes) -> Raw | bytes:
    """A consumer-protocol subscription or assignment as JSON, or its bytes when it does not decode."""
    try:
        r = Reader(raw)
        version = r.int16()
        fields = _read_struct(r, schema.fields, version, False)
        return Raw(message_json(schema, fields, version))
    except (DecodeError, ValueError):
        return raw


def _value_json(topic_records: dict[int, tuple[Schema, Schema]], record_type: int, value: bytes) -> str:
    schema = topic_records[record_type][1]
    r = Reader(value)
    version = r.int16()
    try:
        data = read_message(schema, r.raw(r.remaining), version)
    except DecodeError as e:
        raise DecodeError(f"Could not read record with version {version} from value's buffer due to: {e}.") from None
    body = _to_json(schema.fields, data, version)
    if schema is GROUP_METADATA_VALUE and data.get("protocolType") == "consumer":
        for member in body.get("members") or []:
            member["subscription"] = _embedded(CONSUMER_SUBSCRIPTION, member["subscription"])
            member["assignment"] = _embedded(CONSUMER_ASSIGNMENT, member["assignment"])
    if schema is TRANSACTION_LOG_VALUE:
        status = body["transactionStatus"]
        body["transactionStatus"] = TRANSACTION_STATES.get(status, str(status))
    return _json_value({"version": str(version), "data": body})


def _decode(topic_records: dict[int, tuple[Schema, Schema]], key: bytes, value: bytes | None) -> tuple[str, str]:
    """(key JSON, value JSON or <DELETE>); raises UnknownRecordType or DecodeError."""
    r = Reader(key)
    try:
        record_type = r.int16()
    except DecodeError:
        raise DecodeError("Could not read record type from key's buffer") from None
    if record_type not in topic_records:
        raise UnknownRecordType(record_type)
    key_schema = topic_records[record_type][0]
    try:
        key_data = read_message(key_schema, r.raw(r.remaining), 0)
    except DecodeError as e:
        raise DecodeError(f"Could not read record with version 0 from key's buffer due to: {e}.") from None
    key_json = _json_value({"type": str(record_type), "data": _to_json(key_schema.fields, key_data, 0)})
    if value is None:
        return key_json, "<DELETE>"
    return key_json, _value_json(topic_records, record_type, value)


def coordinator_record(topic_records: dict[int, tuple[Schema, Schema]], key: bytes, value: bytes | None,
                       offset: int) -> tuple[str, str | None]:
    """What DumpLogSegments prints as a coordinator record's key and payload (payload None: the
    record is skipped, the key says why)."""
    try:
        return _decode(topic_records, key, value)
    except UnknownRecordType as e:
        return f"Unknown record type {e.record_type} at offset {offset}, skipping.", None
    except (DecodeError, ValueError) as e:
        return f"Error at offset {offset}, skipping. {e}", None
