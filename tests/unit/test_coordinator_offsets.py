"""Committed offsets: commit validation, fetch in every shape, OffsetDelete, retention."""

from __future__ import annotations

import pytest

from samsa.coordinator.group import GroupState
from samsa.coordinator.records import (
    OffsetCommitKey,
    decode_key,
    decode_offset_commit_value,
)
from tests.unit.test_coordinator_harness import DELETE_OFFSETS, Harness, request, subscription, wire

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86

DAY = 24 * 3600 * 1000


def offset_records(records: list[tuple[bytes, bytes | None]]) -> dict[tuple[str, str, int], int | None]:
    out: dict[tuple[str, str, int], int | None] = {}
    for k, v in records:
        key = decode_key(k)
        if isinstance(key, OffsetCommitKey):
            out[key] = None if v is None else decode_offset_commit_value(v).offset
    return out


def test_commit_validation_table() -> None:
    h = Harness()
    (a, b), gen = h.stable_group("g", 2)
    tp = ("t", 0)
    cases = [
        # (group, member, generation, version) -> error
        (("g", a, gen, 8), NONE),
        (("g", b, gen, 8), NONE),
        (("g", a, gen + 1, 8), ILLEGAL_GENERATION),
        (("g", "stranger", gen, 8), UNKNOWN_MEMBER_ID),
        (("g", "", -1, 8), UNKNOWN_MEMBER_ID),  # simple commits only into empty groups
        (("g", a, -1, 8), ILLEGAL_GENERATION),
        (("simple", "", -1, 8), NONE),  # creates an Empty group
        (("simple", "", -1, 2), NONE),
        (("simple", "m", 1, 8), UNKNOWN_MEMBER_ID),
        (("nobody", "m", 1, 8), ILLEGAL_GENERATION),
        (("nobody", "m", 1, 9), GROUP_ID_NOT_FOUND),
    ]
    for (group, member, generation, version), error in cases:
        got = h.commit(group, {tp: 7}, member_id=member, generation=generation, version=version)
        assert got == {tp: error}, (group, member, generation, version)
    assert h.shard.group("simple") is not None and h.shard.group("nobody") is None
    assert h.committed("g") == {tp: 7}


def test_commit_writes_v3_records_and_fetch_returns_them() -> None:
    h = Harness()
    assert h.commit("g", {("t", 0): 10, ("t", 1): 11, ("u", 0): 12}, metadata="meta") == {
        ("t", 0): NONE, ("t", 1): NONE, ("u", 0): NONE}
    records = h.drain()
    assert offset_records(records) == {("g", "t", 0): 10, ("g", "t", 1): 11, ("g", "u", 0): 12}
    v = decode_offset_commit_value(records[0][1] or b"")
    assert (records[0][1] or b"")[:2] == b"\x00\x03"
    assert (v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp) == (3, "meta", h.clock.t, -1)

    r = h.fetch("g", {"t": [0, 1, 2], "x": [0]}, version=5)
    got = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.metadata)
           for t in r.topics for p in t.partitions}
    assert got == {("t", 0): (10, 3, "meta"), ("t", 1): (11, 3, "meta"), ("t", 2): (-1, -1, ""),
                   ("x", 0): (-1, -1, "")}
    assert r.error_code == NONE
    assert h.committed("g") == {("t", 0): 10, ("t", 1): 11, ("u", 0): 12}  # v7, topics null
    r1 = h.fetch("g", {"u": [0]}, version=1)
    assert [(p.partition_index, p.committed_offset) for t in r1.topics for p in t.partitions] == [(0, 12)]
    r8 = h.fetch("g", None, version=8)
    assert r8.groups[0].group_id == "g" and sum(len(t.partitions) for t in r8.groups[0].topics) == 3
    assert h.fetch("unknown", {"t": [0]}, version=8).groups[0].topics[0].partitions[0].committed_offset == -1
    assert h.fetch("unknown", None).topics == []


def test_group_errors_in_fetch_go_on_partitions_before_v2() -> None:
    h = Harness()
    h.shard.unload()
    r = h.fetch("g", {"t": [0]}, version=1)
    assert r.topics[0].partitions[0].error_code == 15  # COORDINATOR_NOT_AVAILABLE
    assert h.fetch("g", {"t": [0]}, version=3).error_code == 15


def test_metadata_too_large_and_unknown_topics_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4, topic_exists=lambda t, p: t == "t" and p < 2)
    assert h.commit("g", {("t", 0): 1, ("t", 5): 2, ("nope", 0): 3}, metadata="1234") == {
        ("t", 0): NONE, ("t", 5): UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert h.commit("g", {("t", 1): 1}, metadata="12345") == {("t", 1): OFFSET_METADATA_TOO_LARGE}
    assert h.commit("g", {("t", 1): 1}, metadata="\U0001F600\U0001F600\U0001F600") == {
        ("t", 1): OFFSET_METADATA_TOO_LARGE}  # Java counts UTF-16 units: 6 > 4
    assert h.commit("g", {("t", 1): 1}, metadata=None) == {("t", 1): NONE}
    assert h.committed("g") == {("t", 0): 1, ("t", 1): 1}


def test_commits_during_a_rebalance() -> None:
    h = Harness()
    (a, b), gen = h.stable_group("g", 2)
    h.join("g", a)  # leader rejoins: PreparingRebalance, commits of the old generation still go in
    assert h.commit("g", {("t", 0): 5}, member_id=b, generation=gen) == {("t", 0): NONE}
    jb = h.join("g", b)
    assert jb.r.generation_id == gen + 1  # CompletingRebalance now
    assert h.commit("g", {("t", 0): 6}, member_id=b, generation=gen + 1) == {("t", 0): REBALANCE_IN_PROGRESS}
    assert h.committed("g") == {("t", 0): 5}


def test_a_commit_keeps_the_session_alive() -> None:
    h = Harness()
    (a,), gen = h.stable_group("g", 1, session=10000)
    for i in range(5):
        h.advance(6000)
        assert h.commit("g", {("t", 0): i}, member_id=a, generation=gen) == {("t", 0): NONE}
    g = h.shard.group("g")
    assert g is not None and g.state is GroupState.STABLE


def offset_delete(h: Harness, group: str, topics: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
    req = request(DELETE_OFFSETS, 0, group_id=group, topics=[
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in topics.items()])
    r = wire(DELETE_OFFSETS, 0, h.shard.offset_delete(req, 0))
    return r.error_code, {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def test_offset_delete() -> None:
    h = Harness()
    (a,), gen = h.stable_group("g", 1, protocols=[("range", subscription("t"))])
    h.commit("g", {("t", 0): 1, ("old", 0): 2}, member_id=a, generation=gen)
    h.drain()
    assert offset_delete(h, "g", {"t": [0], "old": [0, 1]}) == (NONE, {
        ("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("old", 0): NONE, ("old", 1): NONE})
    assert offset_records(h.drain()) == {("g", "old", 0): None}
    assert h.committed("g") == {("t", 0): 1}
    assert offset_delete(h, "nope", {"t": [0]}) == (GROUP_ID_NOT_FOUND, {})
    h.join("other", version=3, protocol_type="connect", protocols=[("v0", b"")])
    h.advance(100)
    assert offset_delete(h, "other", {"t": [0]}) == (NON_EMPTY_GROUP, {})
    h.leave("g", (a, None))
    assert offset_delete(h, "g", {"t": [0]}) == (NONE, {("t", 0): NONE})
    assert h.shard.group("g") is None  # Empty and no offsets left: the group is gone too
    assert (("g", "t", 0), None) in offset_records(h.drain()).items()


def test_offset_delete_of_partitions_the_broker_does_not_have() -> None:
    """As Kafka's KafkaApis: UNKNOWN_TOPIC_OR_PARTITION for those (the offset stays), even of a
    subscribed topic; a group error still wins."""
    h = Harness(topic_exists=lambda t, p: t == "t" and p < 2)
    (a,), gen = h.stable_group("g", 1, protocols=[("range", subscription("t"))])
    assert offset_delete(h, "g", {"t": [0, 7], "nope": [0]}) == (NONE, {
        ("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("t", 7): UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION})
    assert offset_delete(h, "missing", {"nope": [0]}) == (GROUP_ID_NOT_FOUND, {})


def test_retention_counts_from_when_the_group_became_empty() -> None:
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=60000)
    (a,), gen = h.stable_group("g", 1, session=1800000)
    h.commit("g", {("t", 0): 1}, member_id=a, generation=gen)
    for _ in range(120):  # two days of an active member: nothing expires
        h.advance(DAY // 60)
        assert h.heartbeat("g", a, gen) == NONE
    assert h.committed("g") == {("t", 0): 1}
    h.leave("g", (a, None))
    h.drain()
    h.advance(DAY - 60000)
    assert h.committed("g") == {("t", 0): 1}
    h.advance(60000)
    assert h.committed("g") == {}
    assert h.shard.group("g") is None
    recs = h.drain()
    assert offset_records(recs) == {("g", "t", 0): None}
    assert len(recs) == 2 and recs[-1][1] is None  # and the group's tombstone


def test_retention_of_simple_groups_counts_from_each_commit_and_honours_retention_time() -> None:
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=1000)
    h.commit("s", {("t", 0): 1})
    h.advance(DAY // 2)
    h.commit("s", {("t", 1): 2})
    h.commit("s", {("t", 2): 3}, version=4, retention=3 * DAY)  # an explicit retention: v1 record
    assert h.drain()[-1][1][:2] == b"\x00\x01"  # type: ignore[index]
    h.advance(DAY // 2)
    assert h.committed("s") == {("t", 1): 2, ("t", 2): 3}
    h.advance(DAY // 2)
    assert h.committed("s") == {("t", 2): 3}
    h.advance(2 * DAY)
    assert h.shard.group("s") is None


def test_stable_consumer_group_expires_offsets_of_topics_nobody_subscribes_to() -> None:
    h = Harness(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=1000,
                group_max_session_timeout_ms=DAY * 10)
    (a,), gen = h.stable_group("g", 1, session=DAY * 10, protocols=[("range", subscription("t"))])
    h.commit("g", {("t", 0): 1, ("gone", 0): 2}, member_id=a, generation=gen)
    h.advance(DAY)
    assert h.committed("g") == {("t", 0): 1}


@pytest.mark.parametrize("version", [2, 5, 7, 8, 9])
def test_commit_versions_round_trip(version: int) -> None:
    h = Harness()
    assert h.commit("g", {("t", 3): 42}, version=version) == {("t", 3): NONE}
    assert h.committed("g") == {("t", 3): 42}


def test_topic_ids_of_v10_are_resolved_through_the_hooks() -> None:
    from samsa.coordinator import CoordinatorConfig, GroupCoordinatorShard
    from tests.unit.test_coordinator_harness import COMMIT, FETCH, FakeClock

    tid, unknown = b"\x01" * 16, b"\x02" * 16
    names = {tid: "t"}
    shard = GroupCoordinatorShard(0, CoordinatorConfig(), FakeClock(), topic_name_for_id=names.get,
                                  topic_id_for_name={"t": tid}.get)
    req = request(COMMIT, 10, group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        {"topic_id": tid, "partitions": [{"partition_index": 0, "committed_offset": 9}]},
        {"topic_id": unknown, "partitions": [{"partition_index": 0, "committed_offset": 9}]}])
    r = wire(COMMIT, 10, shard.offset_commit(req, 10))
    assert [(t.topic_id, t.partitions[0].error_code) for t in r.topics] == [(tid, NONE), (unknown, 100)]
    r = wire(FETCH, 10, shard.offset_fetch(request(FETCH, 10, groups=[{"group_id": "g", "topics": None}]), 10))
    (topic,) = r.groups[0].topics
    assert (topic.topic_id, topic.partitions[0].committed_offset) == (tid, 9)


def test_config_from_broker_keys() -> None:
    from samsa.coordinator import CoordinatorConfig

    c = CoordinatorConfig.from_broker_config({"offsets.retention.minutes": 2, "group.max.size": "5",
                                              "offsets.topic.num.partitions": 3})
    assert (c.offsets_retention_ms, c.group_max_size, c.offsets_topic_num_partitions) == (120000, 5, 3)
    assert c.group_min_session_timeout_ms == 6000 and CoordinatorConfig.from_broker_config({}) == CoordinatorConfig()
