"""The classic group state machine, driven with a fake clock: joins, syncs, heartbeats, timeouts."""

from __future__ import annotations

import pytest

from samsa.coordinator.group import GroupState
from samsa.coordinator.records import GroupMetadataKey, decode_group_metadata_value, decode_key
from tests.unit.test_coordinator_harness import Harness, subscription

NONE = 0
UNKNOWN_SERVER_ERROR = -1
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82


def state(h: Harness, group: str) -> GroupState:
    g = h.shard.group(group)
    assert g is not None
    return g.state


def group_records(records: list[tuple[bytes, bytes | None]]) -> list[tuple[str, bytes | None]]:
    out = []
    for k, v in records:
        key = decode_key(k)
        if isinstance(key, GroupMetadataKey):
            out.append((key.group, v))
    return out


# -- a group forms ------------------------------------------------------------------------------


def test_three_members_join_one_leader_gets_the_members_and_sync_hands_out_assignments() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    ids = [h.join("g").r.member_id for _ in range(3)]
    assert all(m.startswith("client-") for m in ids) and len(set(ids)) == 3
    joins = [h.join("g", m) for m in ids]
    assert not any(j.done for j in joins)  # the initial delay holds the first rebalance
    assert state(h, "g") is GroupState.PREPARING_REBALANCE
    h.advance(3000)  # members arrived during the delay: it is extended once more
    assert not any(j.done for j in joins)
    h.advance(3000)
    assert all(j.r.error_code == NONE and j.r.generation_id == 1 for j in joins)
    assert {j.r.leader for j in joins} == {ids[0]}
    assert all(j.r.protocol_name == "range" and j.r.protocol_type == "consumer" for j in joins)
    assert sorted(m.member_id for m in joins[0].r.members) == sorted(ids)
    assert all(m.metadata == subscription("t") for m in joins[0].r.members)
    assert joins[1].r.members == [] and joins[2].r.members == []
    assert state(h, "g") is GroupState.COMPLETING_REBALANCE

    followers = [h.sync("g", m, 1) for m in ids[1:]]
    assert not any(f.done for f in followers)  # parked until the leader's assignment
    assert h.drain() == []
    leader = h.sync("g", ids[0], 1, assignments={ids[0]: b"A", ids[1]: b"B", ids[2]: b"C"})
    assert [leader.r.assignment, followers[0].r.assignment, followers[1].r.assignment] == [b"A", b"B", b"C"]
    assert all(p.r.error_code == NONE and p.r.protocol_name == "range" for p in [leader, *followers])
    assert state(h, "g") is GroupState.STABLE
    (record,) = group_records(h.drain())
    value = decode_group_metadata_value(record[1] or b"")
    assert (value.generation, value.protocol, value.leader) == (1, "range", ids[0])
    assert {m.member_id: m.assignment for m in value.members} == {ids[0]: b"A", ids[1]: b"B", ids[2]: b"C"}
    # A late SyncGroup in Stable just gets the current assignment.
    assert h.sync("g", ids[1], 1).r.assignment == b"B"


def test_missing_assignments_are_empty_and_unknown_ones_ignored() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    a = h.join_new("g")
    b_first = h.join("g")
    b = h.join("g", b_first.r.member_id)
    # a's join was answered alone (no delay): b's arrival starts generation 2.
    assert a.r.generation_id == 1 and not b.done
    assert h.heartbeat("g", a.r.member_id, 1) == REBALANCE_IN_PROGRESS
    a2 = h.join("g", a.r.member_id)
    assert a2.r.generation_id == 2 and b.r.generation_id == 2
    follower = h.sync("g", b.r.member_id, 2)
    h.sync("g", a.r.member_id, 2, assignments={a.r.member_id: b"x", "stranger": b"y"})
    assert follower.r.error_code == NONE and follower.r.assignment == b""


def test_protocol_is_chosen_by_vote_among_the_common_ones() -> None:
    h = Harness(group_initial_rebalance_delay_ms=1000)
    prefs = [[("roundrobin", b"1"), ("range", b"2")], [("range", b"3"), ("roundrobin", b"4")],
             [("range", b"5"), ("sticky", b"6")]]
    joins = [h.join("g", version=3, protocols=p) for p in prefs]
    h.advance(1000)
    assert not any(j.done for j in joins)  # members kept arriving: one more delay
    h.advance(1000)
    assert {j.r.protocol_name for j in joins} == {"range"}  # the only protocol all three support
    leader = next(j for j in joins if j.r.leader == j.r.member_id)
    assert sorted(m.metadata for m in leader.r.members) == [b"2", b"3", b"5"]


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"protocol_type": "connect"}, INCONSISTENT_GROUP_PROTOCOL),
        ({"protocols": [("sticky", b"")]}, INCONSISTENT_GROUP_PROTOCOL),
        ({"session": 5999}, INVALID_SESSION_TIMEOUT),
        ({"session": 1800001}, INVALID_SESSION_TIMEOUT),
    ],
)
def test_join_errors(kwargs: dict[str, object], error: int) -> None:
    h = Harness()
    h.stable_group("g", 1)
    assert h.join("g", **kwargs).r.error_code == error  # type: ignore[arg-type]


def test_join_validation_table() -> None:
    h = Harness()
    (_a,), _gen = h.stable_group("g", 1)
    assert h.join("").r.error_code == INVALID_GROUP_ID
    assert h.join("nope", "someone").r.error_code == UNKNOWN_MEMBER_ID
    assert h.join("g", "someone").r.error_code == UNKNOWN_MEMBER_ID
    assert h.join("g", protocol_type="").r.error_code == INCONSISTENT_GROUP_PROTOCOL
    r = h.join("g", version=6).r  # before v7 a missing protocol name is "", not null
    assert r.error_code == MEMBER_ID_REQUIRED and r.protocol_name == ""


def test_member_id_required_only_from_v4_and_pending_ids_expire() -> None:
    h = Harness(group_initial_rebalance_delay_ms=5000)
    old = h.join("g", version=3)
    assert not old.done  # v3 joins at once, parked in the initial delay
    first = h.join("g", version=4, session=6000)
    assert first.r.error_code == MEMBER_ID_REQUIRED and first.r.member_id.startswith("client-")
    g = h.shard.group("g")
    assert g is not None and first.r.member_id in g.pending_members
    h.advance(6000)  # the id handed out was never used: forgotten after the session timeout
    assert first.r.member_id not in g.pending_members
    assert h.join("g", first.r.member_id, version=4).r.error_code == UNKNOWN_MEMBER_ID
    assert old.r.error_code == NONE and old.r.generation_id == 1


def test_a_pending_member_holds_the_join_phase_until_it_rejoins() -> None:
    h = Harness()
    (a,), gen = h.stable_group("g", 1)
    b_first = h.join("g")
    a2 = h.join("g", a)  # the leader rejoins: rebalance, but b's id is still pending
    assert not a2.done
    b = h.join("g", b_first.r.member_id)
    assert a2.r.generation_id == gen + 1 and b.r.generation_id == gen + 1


def test_max_group_size() -> None:
    h = Harness(group_max_size=2)
    ids, _gen = h.stable_group("g", 2)
    first = h.join("g")
    assert first.r.error_code == GROUP_MAX_SIZE_REACHED and first.r.member_id == ""
    assert h.join("g", ids[1]).r.error_code == NONE  # members may still rejoin


# -- heartbeats ---------------------------------------------------------------------------------


def test_heartbeat_error_table() -> None:
    h = Harness()
    (a, b), gen = h.stable_group("g", 2)
    cases = [
        (("g", a, gen), NONE),
        (("g", b, gen), NONE),
        (("g", "stranger", gen), UNKNOWN_MEMBER_ID),
        (("g", a, gen + 1), ILLEGAL_GENERATION),
        (("g", a, gen - 1), ILLEGAL_GENERATION),
        (("other", a, gen), UNKNOWN_MEMBER_ID),
        (("", a, gen), INVALID_GROUP_ID),
    ]
    for args, error in cases:
        assert h.heartbeat(*args) == error, args
    assert h.heartbeat("g", a, gen, instance="i") == UNKNOWN_MEMBER_ID  # no such static member


def test_rejoin_while_stable_rebalances_and_others_learn_by_heartbeat() -> None:
    # What a cooperative-sticky member does after revoking partitions: join again, new metadata.
    h = Harness()
    (a, b, c), gen = h.stable_group("g", 3)
    jb = h.join("g", b, protocols=[("range", subscription("t", "u"))])
    assert not jb.done and state(h, "g") is GroupState.PREPARING_REBALANCE
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", c, gen) == REBALANCE_IN_PROGRESS
    assert h.sync("g", c, gen).r.error_code == REBALANCE_IN_PROGRESS
    ja, jc = h.join("g", a), h.join("g", c)
    assert {j.r.generation_id for j in (ja, jb, jc)} == {gen + 1}
    assert h.heartbeat("g", a, gen + 1) == NONE  # CompletingRebalance: heartbeats are fine
    assert h.heartbeat("g", a, gen) == ILLEGAL_GENERATION


def test_follower_rejoining_with_same_metadata_gets_current_generation() -> None:
    h = Harness()
    (_a, b), gen = h.stable_group("g", 2)
    jb = h.join("g", b)
    assert jb.r.error_code == NONE and jb.r.generation_id == gen and jb.r.members == []
    assert state(h, "g") is GroupState.STABLE


def test_member_leaving_triggers_a_rebalance() -> None:
    h = Harness()
    (a, b, c), gen = h.stable_group("g", 3)
    r = h.leave("g", (c, None), ("stranger", None))
    assert r.error_code == NONE
    assert [(m.member_id, m.error_code) for m in r.members] == [(c, NONE), ("stranger", UNKNOWN_MEMBER_ID)]
    assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", c, gen) == UNKNOWN_MEMBER_ID
    ja = h.join("g", a)
    jb = h.join("g", b)
    assert ja.r.generation_id == jb.r.generation_id == gen + 1
    assert sorted(m.member_id for m in ja.r.members) == sorted([a, b])


def test_leave_v0_and_last_member_leaving_empties_the_group() -> None:
    h = Harness()
    (a,), gen = h.stable_group("g", 1)
    h.drain()
    assert h.leave("g", ("stranger", None), version=0).error_code == UNKNOWN_MEMBER_ID
    assert h.leave("g", (a, None), version=1).error_code == NONE
    assert state(h, "g") is GroupState.EMPTY
    (record,) = group_records(h.drain())  # the Empty generation is persisted
    value = decode_group_metadata_value(record[1] or b"")
    assert value.members == () and value.generation == gen + 1 and value.protocol is None


def test_session_expiry_removes_a_member() -> None:
    h = Harness()
    (a, b, c), gen = h.stable_group("g", 3, session=10000)
    for _ in range(3):
        h.advance(4000)
        assert h.heartbeat("g", a, gen) in (NONE, REBALANCE_IN_PROGRESS)
        assert h.heartbeat("g", b, gen) in (NONE, REBALANCE_IN_PROGRESS)
    g = h.shard.group("g")
    assert g is not None and c not in g.members and g.state is GroupState.PREPARING_REBALANCE
    ja, jb = h.join("g", a), h.join("g", b)
    assert ja.r.generation_id == gen + 1 and len(ja.r.members) == 2 and jb.done


def test_next_deadline_tracks_the_earliest_session() -> None:
    h = Harness()
    (a,), gen = h.stable_group("g", 1, session=10000)
    assert h.shard.next_deadline() == h.clock.t + 10000
    h.advance(5000)
    h.heartbeat("g", a, gen)
    assert h.shard.next_deadline() == h.clock.t + 10000
    h.clock.advance(9999)
    h.shard.tick()
    assert state(h, "g") is GroupState.STABLE
    h.advance(1)
    assert state(h, "g") is GroupState.EMPTY


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    (a, b, c), gen = h.stable_group("g", 3, session=10000, rebalance=20000)
    ja = h.join("g", a, session=10000, rebalance=20000)
    jb = h.join("g", b, session=10000, rebalance=20000)
    for _ in range(3):  # c heartbeats (told to rejoin) but never does
        h.advance(5000)
        assert h.heartbeat("g", c, gen) == REBALANCE_IN_PROGRESS
    assert not ja.done
    h.advance(5000)
    assert ja.r.generation_id == gen + 1 and jb.r.generation_id == gen + 1
    assert sorted(m.member_id for m in ja.r.members) == sorted([a, b])
    assert h.heartbeat("g", c, gen) == UNKNOWN_MEMBER_ID


def test_new_member_that_never_completes_its_join_times_out() -> None:
    h = Harness(new_member_join_timeout_ms=60000)
    (a,), gen = h.stable_group("g", 1, session=30000, rebalance=600000)
    late = h.join_new("g", session=30000, rebalance=600000)
    for _ in range(2):
        h.advance(25000)
        assert h.heartbeat("g", a, gen) == REBALANCE_IN_PROGRESS
    h.advance(10000)  # 60 s after the new member joined, a never rejoined: the new one expires
    assert late.r.error_code == UNKNOWN_MEMBER_ID


def test_members_that_do_not_sync_are_removed() -> None:
    h = Harness()
    ids = [h.join("g").r.member_id for _ in range(2)]
    joins = [h.join("g", m, session=30000, rebalance=15000) for m in ids]
    h.settle(*joins)
    gen = joins[0].r.generation_id
    leader = joins[0].r.leader
    other = next(m for m in ids if m != leader)
    h.sync("g", leader, gen, assignments={leader: b"L", other: b"O"})
    assert state(h, "g") is GroupState.STABLE
    h.advance(10000)
    assert h.heartbeat("g", leader, gen) == NONE
    h.advance(5000)  # `other` never sent SyncGroup within the rebalance timeout
    assert h.heartbeat("g", leader, gen) == REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", other, gen) == UNKNOWN_MEMBER_ID


def test_leader_not_syncing_fails_the_parked_followers() -> None:
    h = Harness()
    ids = [h.join("g").r.member_id for _ in range(2)]
    joins = [h.join("g", m, session=30000, rebalance=15000) for m in ids]
    h.settle(*joins)
    gen = joins[0].r.generation_id
    follower = next(m for m in ids if m != joins[0].r.leader)
    parked = h.sync("g", follower, gen)
    h.advance(15000)
    assert parked.r.error_code == REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", follower, gen) == REBALANCE_IN_PROGRESS


# -- static membership --------------------------------------------------------------------------


def static_group(h: Harness, n: int, version: int = 9) -> tuple[list[str], int]:
    joins = [h.join("g", instance=f"i{k}", version=version) for k in range(n)]
    h.settle(*joins)
    gen = joins[-1].r.generation_id
    assert all(j.r.generation_id == gen for j in joins[1:])
    ids = [j.r.member_id for j in joins]
    assert all(m.startswith(f"i{k}-") for k, m in enumerate(ids))
    leader = joins[-1].r.leader
    for m in ids:
        if m != leader:
            h.sync("g", m, gen, instance=f"i{ids.index(m)}")
    h.sync("g", leader, gen, instance=f"i{ids.index(leader)}", assignments={m: m.encode() for m in ids})
    assert state(h, "g") is GroupState.STABLE
    return ids, gen


def test_static_member_rejoin_replaces_and_fences_the_old_id_without_rebalance() -> None:
    h = Harness()
    ids, gen = static_group(h, 2)
    g = h.shard.group("g")
    assert g is not None and g.leader_id is not None
    leader = g.leader_id
    h.drain()
    follower_k = 1 - ids.index(leader)
    old = ids[follower_k]
    again = h.join("g", instance=f"i{follower_k}")  # restarted: no member id
    new = again.r.member_id
    assert again.r.error_code == NONE and new != old and again.r.generation_id == gen
    assert state(h, "g") is GroupState.STABLE  # no rebalance
    (record,) = group_records(h.drain())
    assert new in {m.member_id for m in decode_group_metadata_value(record[1] or b"").members}
    assert h.heartbeat("g", old, gen, instance=f"i{follower_k}") == FENCED_INSTANCE_ID
    assert h.heartbeat("g", new, gen, instance=f"i{follower_k}") == NONE
    assert h.sync("g", new, gen, instance=f"i{follower_k}").r.assignment == old.encode()
    assert h.commit("g", {("t", 0): 1}, member_id=old, generation=gen, instance=f"i{follower_k}") == {
        ("t", 0): FENCED_INSTANCE_ID}


def test_static_leader_rejoin_v9_skips_assignment_older_versions_see_old_leader() -> None:
    h = Harness()
    _ids, _gen = static_group(h, 1)
    again = h.join("g", instance="i0", version=9)
    assert again.r.leader == again.r.member_id and again.r.skip_assignment
    assert [m.member_id for m in again.r.members] == [again.r.member_id]
    older = h.join("g", instance="i0", version=8)
    assert older.r.leader == again.r.member_id != older.r.member_id  # not told it leads


def test_static_member_parked_join_is_fenced_by_its_replacement() -> None:
    h = Harness(group_initial_rebalance_delay_ms=5000)
    parked = h.join("g", instance="i0")
    replacement = h.join("g", instance="i0")
    assert parked.r.error_code == FENCED_INSTANCE_ID
    h.advance(5000)
    assert replacement.r.error_code == NONE and replacement.r.generation_id == 1


def test_static_members_are_kept_past_the_rebalance_timeout() -> None:
    h = Harness()
    ids, gen = static_group(h, 2)
    j0 = h.join("g", ids[0], instance="i0", protocols=[("range", subscription("t", "new"))])
    assert not j0.done
    for _ in range(5):
        h.advance(5000)
        assert h.heartbeat("g", ids[1], gen, instance="i1") == REBALANCE_IN_PROGRESS
    h.advance(5000)  # i1 did not rejoin, but a static member is not removed for that
    assert j0.r.generation_id == gen + 1
    g = h.shard.group("g")
    assert g is not None and ids[1] in g.members
    assert j0.r.leader == ids[0] and len(j0.r.members) == 2


def test_leave_by_instance_id() -> None:
    h = Harness()
    ids, gen = static_group(h, 2)
    r = h.leave("g", ("", "i1"), ("", "nobody"))
    assert [m.error_code for m in r.members] == [NONE, UNKNOWN_MEMBER_ID]
    assert h.heartbeat("g", ids[1], gen, instance="i1") == UNKNOWN_MEMBER_ID


# -- coordinator state ----------------------------------------------------------------------------


def test_unload_answers_parked_calls_and_refuses_new_ones() -> None:
    h = Harness(group_initial_rebalance_delay_ms=5000)
    parked = h.join("g", version=3)
    h.shard.unload()
    assert parked.r.error_code == NOT_COORDINATOR
    assert h.join("g", version=3).r.error_code == COORDINATOR_NOT_AVAILABLE
    assert h.heartbeat("g", "m", 1) == COORDINATOR_NOT_AVAILABLE
    assert h.shard.next_deadline() is None
    assert h.shard.describe_group("g")["error_code"] == COORDINATOR_NOT_AVAILABLE
    assert h.shard.delete_group("g") == COORDINATOR_NOT_AVAILABLE and h.shard.list_groups() == []


def test_wrong_partition_is_not_coordinator() -> None:
    from samsa.coordinator import partition_for

    h = Harness(offsets_topic_num_partitions=50)
    mine = next(f"g{i}" for i in range(1000) if partition_for(f"g{i}", 50) == 0)
    other = next(f"g{i}" for i in range(1000) if partition_for(f"g{i}", 50) != 0)
    assert h.join(other, version=3).r.error_code == NOT_COORDINATOR
    assert h.join(mine, version=4).r.error_code == MEMBER_ID_REQUIRED


def test_list_describe_and_delete_groups() -> None:
    h = Harness()
    (a, b), _gen = h.stable_group("g", 2)
    h.commit("simple", {("t", 0): 5})
    assert sorted(h.shard.list_groups()) == [("g", "consumer", "Stable"), ("simple", "", "Empty")]
    assert h.shard.list_groups(["empty"]) == [("simple", "", "Empty")]
    d = h.shard.describe_group("g")
    assert (d["group_state"], d["protocol_type"], d["protocol_data"]) == ("Stable", "consumer", "range")
    assert {m["member_id"]: m["member_assignment"] for m in d["members"]} == {a: a.encode(), b: b.encode()}
    assert all(m["client_host"] == "/127.0.0.1" and m["member_metadata"] == subscription("t")
               for m in d["members"])
    assert h.shard.describe_group("nope")["group_state"] == "Dead"
    # DescribeGroups v6 (KIP-1043): also GROUP_ID_NOT_FOUND, which Kafka's Admin 4.x raises as
    # GroupIdNotFoundException (tests/compat/test_java_clients_data.py)
    gone = h.shard.describe_group("nope", 6)
    assert (gone["group_state"], gone["error_code"], gone["error_message"]) == ("Dead", 69, "Group nope not found.")
    assert h.shard.describe_group("g", 6)["error_code"] == 0
    h.drain()
    assert h.shard.delete_group("g") == 68  # NON_EMPTY_GROUP
    assert h.shard.delete_group("nope") == 69  # GROUP_ID_NOT_FOUND
    assert h.shard.delete_group("simple") == 0
    assert h.shard.group("simple") is None and h.fetch("simple", {"t": [0]}).topics[0].partitions[0].committed_offset == -1
    assert [v for _, v in h.drain()] == [None]  # the offset's tombstone (no group record existed)
    h.leave("g", (a, None), (b, None))
    h.drain()
    assert h.shard.describe_group("g")["group_state"] == "Empty"
    assert h.shard.delete_group("g") == 0
    assert group_records(h.drain()) == [("g", None)]


def test_a_failing_callback_does_not_get_a_second_answer() -> None:
    h = Harness()
    calls = []

    def boom(body: dict[str, object]) -> None:
        calls.append(body)
        raise RuntimeError("socket gone")

    from tests.unit.test_coordinator_harness import JOIN, request

    req = request(JOIN, 3, group_id="g", session_timeout=1, rebalance_timeout=10000, member_id="",
                  protocol_type="consumer", protocols=[{"name": "range", "metadata": b""}])
    with pytest.raises(RuntimeError):
        h.shard.join_group(req, 3, "c", "h", boom)
    assert len(calls) == 1


@pytest.mark.parametrize("version", range(10))
def test_every_join_and_sync_version_forms_a_group(version: int) -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    first = h.join("g", version=version, instance="i" if version >= 5 else None, session=7000, rebalance=20000)
    if version >= 4 and version < 5:
        first = h.join("g", first.r.member_id, version=version, session=7000, rebalance=20000)
    r = first.r
    assert r.error_code == NONE and r.generation_id == 1 and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id]
    if version >= 5:
        assert r.members[0].group_instance_id == "i"
    g = h.shard.group("g")
    assert g is not None
    member = g.members[r.member_id]
    assert member.rebalance_timeout_ms == (7000 if version == 0 else 20000)  # v0 has none: the session's
    sync_version = min(version, 5)
    s = h.sync("g", r.member_id, 1, version=sync_version, assignments={r.member_id: b"a"},
               instance="i" if version >= 5 else None)
    assert s.r.error_code == NONE and s.r.assignment == b"a"
    if sync_version >= 5:
        assert (s.r.protocol_type, s.r.protocol_name) == ("consumer", "range")
        bad = h.sync("g", r.member_id, 1, version=5, protocol_type=None, instance="i" if version >= 5 else None)
        assert bad.r.error_code == INCONSISTENT_GROUP_PROTOCOL
        wrong = h.sync("g", r.member_id, 1, version=5, protocol_name="roundrobin",
                       instance="i" if version >= 5 else None)
        assert wrong.r.error_code == INCONSISTENT_GROUP_PROTOCOL
