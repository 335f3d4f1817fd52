"""Rebuilding a shard from its records, and compacting them."""

from __future__ import annotations

from samsa.coordinator.group import GroupState
from samsa.coordinator.records import (
    GroupMetadataKey,
    OffsetCommitValue,
    decode_key,
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)
from tests.unit.test_coordinator_harness import Harness, make_shard

NONE = 0
UNKNOWN_MEMBER_ID = 25


def busy_history() -> Harness:
    """A partition's worth of history: a live group, an emptied one, a simple one, a deleted one."""
    h = Harness()
    (a, _b), gen = h.stable_group("live", 2)
    for i in range(3):
        h.commit("live", {("t", 0): 10 + i, ("t", 1): 20 + i}, member_id=a, generation=gen)
    (c,), gen2 = h.stable_group("emptied", 1)
    h.commit("emptied", {("u", 0): 5}, member_id=c, generation=gen2)
    h.leave("emptied", (c, None))
    h.commit("simple", {("t", 0): 99})
    (d,), _ = h.stable_group("deleted", 1)
    h.leave("deleted", (d, None))
    h.commit("deleted", {("t", 0): 1})
    assert h.shard.delete_group("deleted") == 0
    h.drain()
    return h


def snapshot(h: Harness) -> dict[str, object]:
    out: dict[str, object] = {}
    for gid, g in sorted(h.shard.groups.items()):
        out[gid] = (g.state, g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                    {m.member_id: (m.assignment, m.session_timeout_ms, m.protocols) for m in g.members.values()},
                    dict(g.offsets))
    return out


def reload(h: Harness, records: list[tuple[bytes, bytes | None]]) -> Harness:
    h2 = Harness()
    h2.clock.t = h.clock.t
    h2.shard.replay(records)
    return h2


def test_replay_reproduces_offsets_and_groups() -> None:
    h = busy_history()
    h2 = reload(h, h.records)
    assert snapshot(h2) == snapshot(h)
    assert h2.committed("live") == {("t", 0): 12, ("t", 1): 22}
    assert h2.committed("simple") == {("t", 0): 99}
    assert h2.shard.group("deleted") is None
    live = h2.shard.group("live")
    assert live is not None and live.state is GroupState.STABLE
    assert h2.shard.group("emptied").state is GroupState.EMPTY  # type: ignore[union-attr]
    assert h2.shard.drain_records() == []


def test_members_of_a_loaded_group_carry_on_and_sessions_restart_at_load() -> None:
    h = busy_history()
    live = h.shard.group("live")
    assert live is not None
    a, b = list(live.members)
    gen = live.generation_id
    h2 = reload(h, h.records)
    assert h2.sync("live", b, gen).r.assignment == b.encode()
    assert h2.commit("live", {("t", 0): 50}, member_id=b, generation=gen) == {("t", 0): NONE}
    h2.advance(9000)
    assert h2.heartbeat("live", a, gen) == NONE
    h2.advance(1000)  # b's session, restarted at load (10 s), ran out; a's did not
    g = h2.shard.group("live")
    assert g is not None and list(g.members) == [a] and g.state is GroupState.PREPARING_REBALANCE
    assert h2.heartbeat("live", b, gen) == UNKNOWN_MEMBER_ID


def test_compact_view_is_one_live_record_per_key_and_replays_the_same() -> None:
    h = busy_history()
    view = h.shard.compact_view()
    keys = [k for k, _ in view]
    assert len(keys) == len(set(keys)) and all(v is not None for _, v in view)
    assert len(view) < len(h.records)
    assert snapshot(reload(h, view)) == snapshot(h)
    groups_in_view = {decode_key(k).group for k, _ in view if isinstance(decode_key(k), GroupMetadataKey)}  # type: ignore[union-attr]
    assert groups_in_view == {"live", "emptied"}  # "simple" never had metadata, "deleted" is gone


def test_replay_keeps_foreign_records_skips_garbage_and_respects_order() -> None:
    foreign_key = b"\x00\x03\x00\x01g"
    records: list[tuple[bytes, bytes | None]] = [
        (offset_commit_key("g", "t", 0), offset_commit_value(OffsetCommitValue(1, -1, "", 10))),
        (b"\x00", b"garbage"),  # not even a key
        (offset_commit_key("g", "t", 1), b"\x00\x09junk"),  # a value of no known version
        (foreign_key, b"kip-848 stuff"),
        # the same offset under a v0 key, later: the later write wins
        (b"\x00\x00" + offset_commit_key("g", "t", 0)[2:], offset_commit_value(OffsetCommitValue(2, -1, "", 20))),
        (group_metadata_key("gone"), None),
    ]
    h = Harness()
    h.shard.replay(records)
    assert h.shard.skipped_records == 2
    assert h.committed("g") == {("t", 0): 2}
    assert (foreign_key, b"kip-848 stuff") in h.shard.compact_view()
    h.shard.replay(records + [(foreign_key, None), (offset_commit_key("g", "t", 0), None)])
    assert h.shard.compact_view() == [] and h.shard.group("g") is None


def test_replay_fails_parked_calls_of_the_previous_state() -> None:
    h = Harness(group_initial_rebalance_delay_ms=5000)
    parked = h.join("g", version=3)
    h.shard.replay([])
    assert parked.r.error_code == 16  # NOT_COORDINATOR
    assert h.shard.groups == {}


def test_a_replayed_shard_keeps_working() -> None:
    h = busy_history()
    h2 = reload(h, h.shard.compact_view())
    h2.commit("simple", {("t", 0): 100})
    (_x,), _gen = h2.stable_group("new", 1)
    h2.drain()
    h3 = reload(h2, h2.shard.compact_view())
    assert snapshot(h3) == snapshot(h2)
    assert make_shard(h3.clock).next_deadline() is not None  # the retention check is always armed


def test_a_group_loaded_over_capacity_rebalances_at_once() -> None:
    h = Harness()
    h.stable_group("g", 3)
    h.drain()
    h2 = Harness(group_max_size=2)
    h2.shard.replay(h.records)
    g = h2.shard.group("g")
    assert g is not None and g.state is GroupState.PREPARING_REBALANCE
