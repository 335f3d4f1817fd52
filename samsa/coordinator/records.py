"""The records of `__consumer_offsets`, byte-compatible with Kafka's.

Every key and every value starts with an int16 schema version (Kafka's
`MessageUtil.toVersionPrefixedBytes`); the key's version is also the record *type*:

    key v0/v1  OffsetCommitKey    group string, topic string, partition int32
    key v2     GroupMetadataKey   group string
    key v3+    records of the KIP-848 coordinator; this module reports them as `UnknownKey`

    OffsetCommitValue   v0: offset int64, metadata string, commit_timestamp int64
                        v1: v0 + expire_timestamp int64        (written when a retention was asked)
                        v2: as v0
                        v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
                        v4: as v3, flexible (compact strings, tagged fields)
    GroupMetadataValue  protocol_type string, generation int32, protocol nullable string,
                        leader nullable string, current_state_timestamp int64 (v2+),
                        members [member_id string, group_instance_id nullable string (v3+),
                                 client_id string, client_host string, rebalance_timeout int32 (v1+),
                                 session_timeout int32, subscription bytes, assignment bytes]
                        v4 is flexible.

Strings are int16-length UTF-8 (-1 = null), bytes and arrays int32-length; flexible versions use
unsigned-varint N+1 lengths and end every struct with tagged fields. Kafka writes OffsetCommitValue
v3 (v1 when the commit carried a retention time) and GroupMetadataValue v3; so does Samsa. A null
value is a tombstone: it deletes its key.

Decoding goes through the bounded `Reader`; whatever the bytes, the only exception that can
escape is `RecordDecodeError`.

Transactions (TxnOffsetCommit): a transactional batch of producer P (attributes bit 4, P's id and
epoch, base sequence -1) holds offset commits that stay *pending* until P's transaction marker, a
control batch (attributes bit 5) whose one record's key is int16 version 0 + int16 type
(0 ABORT, 1 COMMIT; Kafka's ControlRecordType) and whose value is int16 version 0 + int32
coordinator epoch (Kafka's EndTransactionMarker). The broker hands replay such records as
`TxnRecord` and the markers as `TxnMarker` (`samsa.protocol.control.decode_control_key` reads a
marker's key).

`partition_for(group_id, n)` is Kafka's `Utils.abs(groupId.hashCode()) % n`, with Java's
String.hashCode over UTF-16 code units.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from samsa.protocol.schema import read_tagged_fields
from samsa.protocol.wire import DecodeError, Reader, write_uvarint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


class RecordDecodeError(DecodeError):
    """The bytes are not a record of `__consumer_offsets` this module can read."""


# -- the record types -----------------------------------------------------------------------------


class OffsetCommitKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupMetadataKey(NamedTuple):
    group: str


class UnknownKey(NamedTuple):
    """A key of a record type this coordinator does not own (KIP-848 records, ...)."""

    version: int


class TxnRecord(NamedTuple):
    """A record of a transactional batch of `producer_id` (what replay keeps pending)."""

    key: bytes | bytearray | memoryview
    value: bytes | bytearray | memoryview | None
    producer_id: int


class TxnMarker(NamedTuple):
    """The transaction marker (control record) of `producer_id`: COMMIT if `commit`, else ABORT."""

    producer_id: int
    commit: bool


class OffsetCommitValue(NamedTuple):
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only in v1; -1 = none (the broker's retention applies)


class MemberMetadata(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


class GroupMetadataValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()


# -- writing --------------------------------------------------------------------------------------


class _Writer:
    """Appends Kafka primitive types to a bytearray, classic or flexible (compact) encoding."""

    __slots__ = ("flexible", "out")

    def __init__(self, version: int, flexible: bool) -> None:
        self.out = bytearray(_H.pack(version))
        self.flexible = flexible

    def int32(self, v: int) -> None:
        self.out += _I.pack(v)

    def int64(self, v: int) -> None:
        self.out += _Q.pack(v)

    def _length(self, n: int, classic: struct.Struct) -> None:
        if self.flexible:
            write_uvarint(self.out, n + 1)
        else:
            self.out += classic.pack(n)

    def string(self, v: str | None) -> None:
        if v is None:
            self._length(-1, _H)
            return
        b = v.encode()
        self._length(len(b), _H)
        self.out += b

    def bytes_(self, v: bytes | bytearray | memoryview) -> None:
        self._length(len(v), _I)
        self.out += v

    def array_length(self, n: int) -> None:
        self._length(n, _I)

    def tags(self) -> None:
        if self.flexible:
            self.out.append(0)  # no tagged fields


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer(OFFSET_COMMIT_KEY_VERSION, False)
    w.string(group)
    w.string(topic)
    w.int32(partition)
    return bytes(w.out)


def group_metadata_key(group: str) -> bytes:
    w = _Writer(GROUP_METADATA_KEY_VERSION, False)
    w.string(group)
    return bytes(w.out)


def offset_commit_value(v: OffsetCommitValue, version: int | None = None) -> bytes:
    """Kafka's choice of version unless one is forced: v1 with an expire timestamp, else v3."""
    if version is None:
        version = 1 if v.expire_timestamp != -1 else OFFSET_COMMIT_VALUE_VERSION
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise ValueError(f"OffsetCommitValue has no version {version}")
    w = _Writer(version, version >= 4)
    w.int64(v.offset)
    if version >= 3:
        w.int32(v.leader_epoch)
    w.string(v.metadata)
    w.int64(v.commit_timestamp)
    if version == 1:
        w.int64(v.expire_timestamp)
    w.tags()
    return bytes(w.out)


def group_metadata_value(v: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise ValueError(f"GroupMetadataValue has no version {version}")
    w = _Writer(version, version >= 4)
    w.string(v.protocol_type)
    w.int32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.int64(v.current_state_timestamp)
    w.array_length(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.out)


# -- reading --------------------------------------------------------------------------------------


def _nn_string(r: Reader, flexible: bool) -> str:
    s = r.string(flexible)
    if s is None:
        raise RecordDecodeError("null in a non-nullable string")
    return s


def _bytes(r: Reader, flexible: bool) -> bytes:
    b = r.bytes_(flexible)
    if b is None:
        raise RecordDecodeError("null in non-nullable bytes")
    return bytes(b)


def _array_length(r: Reader, flexible: bool) -> int:
    n = r.compact_length() if flexible else r.int32()
    if n < 0:
        raise RecordDecodeError(f"array length {n} in a non-nullable array")
    return r.check_count(n)


def _version(r: Reader) -> int:
    return r.int16()


def decode_key(key: bytes | bytearray | memoryview) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    try:
        r = Reader(key)
        version = _version(r)
        if version in (0, 1):
            return OffsetCommitKey(_nn_string(r, False), _nn_string(r, False), r.int32())
        if version == 2:
            return GroupMetadataKey(_nn_string(r, False))
        return UnknownKey(version)
    except RecordDecodeError:
        raise
    except DecodeError as e:
        raise RecordDecodeError(f"bad record key: {e}") from None


def is_offset_commit_key(key: bytes | bytearray | memoryview) -> bool:
    """Whether the key is an OffsetCommitKey's (version 0 or 1), from its first two bytes."""
    return len(key) >= 2 and key[0] == 0 and key[1] in (0, 1)


def decode_offset_commit_value(value: bytes | bytearray | memoryview) -> OffsetCommitValue:
    try:
        r = Reader(value)
        version = _version(r)
        if not 0 <= version <= MAX_VALUE_VERSION:
            raise RecordDecodeError(f"unknown OffsetCommitValue version {version}")
        flexible = version >= 4
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = _nn_string(r, flexible)
        commit_timestamp = r.int64()
        expire_timestamp = r.int64() if version == 1 else -1
        if flexible:
            read_tagged_fields(r, None, None)
        return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)
    except RecordDecodeError:
        raise
    except DecodeError as e:
        raise RecordDecodeError(f"bad OffsetCommitValue: {e}") from None


def decode_group_metadata_value(value: bytes | bytearray | memoryview) -> GroupMetadataValue:
    try:
        r = Reader(value)
        version = _version(r)
        if not 0 <= version <= MAX_VALUE_VERSION:
            raise RecordDecodeError(f"unknown GroupMetadataValue version {version}")
        flexible = version >= 4
        protocol_type = _nn_string(r, flexible)
        generation = r.int32()
        protocol = r.string(flexible)
        leader = r.string(flexible)
        state_ts = r.int64() if version >= 2 else -1
        members = []
        for _ in range(_array_length(r, flexible)):
            member_id = _nn_string(r, flexible)
            instance_id = r.string(flexible) if version >= 3 else None
            client_id = _nn_string(r, flexible)
            client_host = _nn_string(r, flexible)
            rebalance_timeout = r.int32() if version >= 1 else -1
            session_timeout = r.int32()
            if version == 0:
                rebalance_timeout = session_timeout  # as Kafka's loader does
            subscription = _bytes(r, flexible)
            assignment = _bytes(r, flexible)
            if flexible:
                read_tagged_fields(r, None, None)
            members.append(
                MemberMetadata(member_id, instance_id, client_id, client_host,
                               rebalance_timeout, session_timeout, subscription, assignment)
            )
        if flexible:
            read_tagged_fields(r, None, None)
        return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))
    except RecordDecodeError:
        raise
    except DecodeError as e:
        raise RecordDecodeError(f"bad GroupMetadataValue: {e}") from None


# -- the consumer protocol's subscription (what OffsetDelete needs to know) -----------------------


def subscription_topics(metadata: bytes | bytearray | memoryview) -> list[str]:
    """The topics of a ConsumerProtocolSubscription (version int16, then topics [string], ...).

    Every version starts the same way (Kafka parses newer versions as the newest it knows), so
    only the prefix is read. Raises RecordDecodeError when the bytes are not one.
    """
    try:
        r = Reader(metadata)
        if r.int16() < 0:
            raise RecordDecodeError("negative ConsumerProtocolSubscription version")
        return [_nn_string(r, False) for _ in range(_array_length(r, False))]
    except RecordDecodeError:
        raise
    except DecodeError as e:
        raise RecordDecodeError(f"bad ConsumerProtocolSubscription: {e}") from None


# -- which partition of __consumer_offsets holds a group ------------------------------------------


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % num_partitions` (abs(Integer.MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
