"""`__consumer_offsets` record formats: Kafka's bytes, every version, garbage, partition_for.

The expected bytes are worked out by hand from Kafka's message schemas
(group-coordinator/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json): an int16 version, then the fields of that version.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordDecodeError,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    group_metadata_key,
    group_metadata_value,
    java_string_hash,
    offset_commit_key,
    offset_commit_value,
    partition_for,
    subscription_topics,
)


def hx(s: str) -> bytes:
    """Hex digits; whitespace and `# comments` are ignored."""
    return bytes.fromhex("".join(line.split("#")[0].replace(" ", "") for line in s.splitlines()))


MEMBER = MemberMetadata("m", None, "c", "/h", 300000, 45000, b"\x01", b"\x02")
GROUP = GroupMetadataValue("consumer", 1, "range", "m", 1000, (MEMBER,))


def test_offset_commit_key_v1() -> None:
    raw = hx("0001  0001 67  0001 74  00000000")
    assert offset_commit_key("g", "t", 0) == raw
    assert decode_key(raw) == OffsetCommitKey("g", "t", 0)
    assert decode_key(hx("0000  0001 67  0001 74  00000007")) == OffsetCommitKey("g", "t", 7)  # v0 key


def test_group_metadata_key_v2_and_unknown_types() -> None:
    assert group_metadata_key("g") == hx("0002 0001 67")
    assert decode_key(hx("0002 0001 67")) == GroupMetadataKey("g")
    assert decode_key(hx("0003 0001 67")) == UnknownKey(3)  # a KIP-848 record


def test_offset_commit_value_versions() -> None:
    v = OffsetCommitValue(5, 2, "m", 1000)
    v3 = hx("0003  0000000000000005  00000002  0001 6d  00000000000003e8")
    assert offset_commit_value(v) == v3
    assert decode_offset_commit_value(v3) == v
    v1 = hx("0001  0000000000000005  0000  00000000000003e8  00000000000007d0")
    expiring = OffsetCommitValue(5, -1, "", 1000, 2000)
    assert offset_commit_value(expiring) == v1  # a retention was asked: Kafka writes v1
    assert decode_offset_commit_value(v1) == expiring
    v0 = hx("0000  0000000000000005  0001 6d  00000000000003e8")
    assert decode_offset_commit_value(v0) == OffsetCommitValue(5, -1, "m", 1000)
    # v4: flexible; a tagged field Kafka might add later is skipped.
    v4 = hx("0004  0000000000000005  00000002  02 6d  00000000000003e8  01 07 02 abcd")
    assert decode_offset_commit_value(v4) == v
    assert offset_commit_value(v, version=4) == hx("0004 0000000000000005 00000002 02 6d 00000000000003e8 00")


def test_group_metadata_value_v3() -> None:
    raw = hx("""
        0003
        0008 636f6e73756d6572      # protocol_type "consumer"
        00000001                   # generation 1
        0005 72616e6765            # protocol "range"
        0001 6d                    # leader "m"
        00000000000003e8           # current_state_timestamp 1000
        00000001                   # one member:
          0001 6d                  #   member_id "m"
          ffff                     #   group_instance_id null
          0001 63                  #   client_id "c"
          0002 2f68                #   client_host "/h"
          000493e0                 #   rebalance_timeout 300000
          0000afc8                 #   session_timeout 45000
          00000001 01              #   subscription
          00000001 02              #   assignment
    """)
    assert group_metadata_value(GROUP) == raw
    assert decode_group_metadata_value(raw) == GROUP


def test_group_metadata_value_v4_and_old_versions() -> None:
    v4 = hx("""0004  09 636f6e73756d6572  00000001  06 72616e6765  00  00000000000003e8
               02  02 6d  00  02 63  03 2f68  000493e0  0000afc8  02 01  02 02  00
               00""")
    assert decode_group_metadata_value(v4) == GROUP._replace(leader=None)
    assert group_metadata_value(GROUP._replace(leader=None), version=4) == v4
    # v0: no rebalance timeout (the session timeout stands in), no timestamp, no instance id.
    v0 = hx("0000 0008 636f6e73756d6572 00000001 0005 72616e6765 0001 6d 00000001"
            " 0001 6d 0001 63 0002 2f68 0000afc8 00000001 01 00000001 02")
    assert decode_group_metadata_value(v0) == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, (MEMBER._replace(rebalance_timeout=45000),))
    empty = GroupMetadataValue("consumer", 4, None, None, 1000, ())
    assert decode_group_metadata_value(group_metadata_value(empty)) == empty


@pytest.mark.parametrize("raw", [
    hx("0005 0000000000000005 0000 00000000000003e8"),  # unknown version
    hx("0003 0000000000000005"),  # truncated
    hx("0003 0000000000000005 00000002 ffff 00000000000003e8"),  # null metadata
    hx("0003 0000000000000005 00000002 0002 ff fe 00000000000003e8"),  # not UTF-8
    b"",
])
def test_bad_offset_values(raw: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_offset_commit_value(raw)


def test_bad_group_values() -> None:
    with pytest.raises(RecordDecodeError):
        decode_group_metadata_value(hx("0003 0000 00000001 ffff ffff 0000000000000000 7fffffff"))  # huge array
    with pytest.raises(RecordDecodeError):
        decode_group_metadata_value(hx("0003 0000 00000001 ffff ffff 0000000000000000 ffffffff"))  # null array


def test_java_hash_and_partition_for() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("test") == 3556498
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) is 0
    name = "payments-consumer-v2"
    reference = sum(ord(c) * 31 ** (len(name) - 1 - i) for i, c in enumerate(name)) % 2**32
    assert java_string_hash(name) == reference - 2**32 == -991761133  # overflows to negative
    assert partition_for(name, 50) == 991761133 % 50
    assert partition_for("test", 50) == 3556498 % 50


# -- hostile and random bytes ---------------------------------------------------------------------

DECODERS = [decode_key, decode_offset_commit_value, decode_group_metadata_value, subscription_topics]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80), st.sampled_from(DECODERS))
def test_random_bytes_raise_only_record_decode_error(data: bytes, decode: object) -> None:
    try:
        decode(data)  # type: ignore[operator]
    except RecordDecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4), st.binary(max_size=60), st.integers(0, 58))
def test_mutated_values_raise_only_record_decode_error(version: int, noise: bytes, cut: int) -> None:
    for raw in (offset_commit_value(OffsetCommitValue(5, 2, "m", 1000, 7 if version == 1 else -1), version),
                group_metadata_value(GROUP, version)):
        for data in (raw[:cut], raw[:cut] + noise, raw[:2] + noise):
            for decode in (decode_offset_commit_value, decode_group_metadata_value):
                try:
                    decode(data)
                except RecordDecodeError:
                    pass


text = st.text(max_size=12)
members = st.builds(MemberMetadata, text, st.none() | text, text, text, st.integers(-(2**31), 2**31 - 1),
                    st.integers(-(2**31), 2**31 - 1), st.binary(max_size=20), st.binary(max_size=20))


@settings(max_examples=100, deadline=None)
@given(st.builds(GroupMetadataValue, text, st.integers(0, 2**31 - 1), st.none() | text, st.none() | text,
                 st.integers(-1, 2**62), st.lists(members, max_size=3).map(tuple)))
def test_group_values_round_trip_v3_and_v4(value: GroupMetadataValue) -> None:
    for version in (3, 4):
        assert decode_group_metadata_value(group_metadata_value(value, version)) == value


@settings(max_examples=100, deadline=None)
@given(st.builds(OffsetCommitValue, st.integers(-1, 2**62), st.integers(-1, 2**31 - 1), text,
                 st.integers(-1, 2**62), st.just(-1)))
def test_offset_values_round_trip(value: OffsetCommitValue) -> None:
    for version in (3, 4):
        assert decode_offset_commit_value(offset_commit_value(value, version)) == value
