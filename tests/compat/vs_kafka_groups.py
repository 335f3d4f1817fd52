"""Consumer-group cases of the differential test against Apache Kafka (test_vs_kafka.py).

Each sends, over raw frames, what a group member or an admin client sends: the classic
protocol's JoinGroup, SyncGroup, Heartbeat and LeaveGroup, offset commits and fetches, the admin
requests on groups, and KIP-848's ConsumerGroupHeartbeat. The versions are those a current Java
client sends to both brokers (the highest both serve): JoinGroup v9, SyncGroup v5, Heartbeat v4,
LeaveGroup v5, DescribeGroups v6, ListGroups v5, OffsetDelete v0, ConsumerGroupHeartbeat v1;
OffsetCommit and OffsetFetch v9 and DeleteGroups v2, where Kafka 4.4 also serves v10 (topic ids)
and v3 (KIP-1043's group types), which Samsa does not.

Member ids, generations a broker is free to choose and client hosts are reduced to what a
client checks: whether an id was given, whether the leader is this member.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from samsa.protocol.schema import Msg
from tests.compat.vs_kafka import CaseSet, client, coordinator, name, topic
from tests.rawclient import RawClient

case = CaseSet()

# error codes, for reading the cases (the results hold the numbers)
MEMBER_ID_REQUIRED = 79


def subscription(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: the member's metadata in JoinGroup for protocol type
    "consumer" (Kafka reads it to know which topics a classic group is subscribed to)."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0."""
    out = struct.pack(">hi", 0, len(partitions))
    for t, ps in partitions.items():
        out += struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", -1)


def join_body(group: str, member_id: str = "", topics: tuple[str, ...] = (), protocol_type: str = "consumer",
              session: int = 30000, protocol: str = "range") -> dict[str, Any]:
    return {"group_id": group, "session_timeout": session, "rebalance_timeout": 30000, "member_id": member_id,
            "group_instance_id": None, "protocol_type": protocol_type, "reason": None,
            "protocols": [{"name": protocol, "metadata": subscription(list(topics))}]}


def join(c: RawClient, group: str, member_id: str = "", **kw: Any) -> Msg:
    """JoinGroup v9."""
    return c.request(11, 9, join_body(group, member_id, **kw))


def sync(c: RawClient, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
         protocol_name: str = "range") -> Msg:
    """SyncGroup v5."""
    return c.request(14, 5, {"group_id": group, "generation_id": generation, "member_id": member_id,
                             "group_instance_id": None, "protocol_type": "consumer", "protocol_name": protocol_name,
                             "assignments": [{"member_id": m, "assignment": a}
                                             for m, a in (assignments or {}).items()]})


def heartbeat(c: RawClient, group: str, generation: int, member_id: str, instance_id: str | None = None) -> int:
    """Heartbeat v4: the error code."""
    return int(c.request(12, 4, {"group_id": group, "generation_id": generation, "member_id": member_id,
                                 "group_instance_id": instance_id}).error_code)


def member(c: RawClient, group: str, topics: tuple[str, ...] = ()) -> tuple[str, int]:
    """A classic member that joined (asked for a member id, then rejoined with it) and synced as
    the leader, assigned every partition 0 of `topics`: (member id, generation). The group is
    Stable afterwards."""
    coordinator(c, group)
    first = join(c, group, topics=topics)
    assert first.error_code == MEMBER_ID_REQUIRED, first
    joined = join(c, group, first.member_id, topics=topics)
    assert joined.error_code == 0 and joined.leader == first.member_id, joined
    synced = sync(c, group, joined.generation_id, joined.member_id,
                  {joined.member_id: assignment({t: [0] for t in topics})})
    assert synced.error_code == 0, synced
    return joined.member_id, joined.generation_id


def commit(c: RawClient, group: str, offsets: dict[tuple[str, int], tuple[int, str | None, int]],
           generation: int = -1, member_id: str = "") -> dict[str, int]:
    """OffsetCommit v9 of {(topic, partition): (offset, metadata, leader epoch)}; generation -1
    and no member id make it a simple (standalone) commit. {"topic-partition": error code}."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), (offset, metadata, epoch) in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": offset,
                                         "committed_leader_epoch": epoch, "committed_metadata": metadata})
    resp = c.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member_id,
                            "group_instance_id": None,
                            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
    return dict(sorted((_tp(t.name, p.partition_index), int(p.error_code)) for t in resp.topics for p in t.partitions))


def fetch_offsets(c: RawClient, group: str, partitions: dict[str, list[int]] | None) -> dict[str, Any]:
    """OffsetFetch v9 of one group (`partitions` None: all it has): {"error": group error,
    "topic-partition": (offset, leader epoch, metadata, error)}; the topics are named by the
    labels `_tp` gives."""
    topics = None if partitions is None else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
    resp = c.request(9, 9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
                            "require_stable": True})
    (g,) = resp.groups
    return {"error": int(g.error_code), **dict(sorted(
        (_tp(t.name, p.partition_index), (int(p.committed_offset), int(p.committed_leader_epoch), p.metadata,
                                          int(p.error_code))) for t in g.topics for p in t.partitions))}


# topic names in results: each case's own random names, replaced by what they are
_LABELS: dict[str, str] = {}


def _tp(t: str, p: int) -> str:
    return f"{_LABELS.get(t, t)}-{p}"


def _label(t: str, label: str) -> str:
    _LABELS[t] = label
    return t


def describe(c: RawClient, group: str) -> Any:
    """DescribeGroups v6 of one group."""
    (g,) = c.request(15, 6, {"groups": [group], "include_authorized_operations": False}).groups
    return g


def list_groups(c: RawClient, mine: dict[str, str], states: list[str] | None = None,
                types: list[str] | None = None) -> Any:
    """ListGroups v5 with the filters: (error, {label: (protocol type, state, type)} of the
    groups of `mine` (name -> label) listed)."""
    resp = c.request(16, 5, {"states_filter": states or [], "types_filter": types or []})
    listed = {mine[g.group_id]: (g.protocol_type, g.group_state, g.group_type) for g in resp.groups
              if g.group_id in mine}
    return int(resp.error_code), dict(sorted(listed.items()))


# --------------------------------------------------------------------------- the classic protocol


@case("JoinGroup v9: a first join without a member id, the rejoin with the id given, an unknown member id for "
      "the group, another protocol type, a session timeout out of range, an unknown member of an unknown group")
def case_join_group(b: str) -> dict[str, Any]:
    with client(b) as c:
        group = name()
        coordinator(c, group)
        first = join(c, group)
        joined = join(c, group, first.member_id)
        out: dict[str, Any] = {
            "first join": (int(first.error_code), bool(first.member_id), int(first.generation_id)),
            "rejoin with that id": (int(joined.error_code), int(joined.generation_id), joined.protocol_type,
                                    joined.protocol_name, joined.leader == joined.member_id == first.member_id,
                                    len(joined.members)),
            "unknown member id": int(join(c, group, "no-such-member").error_code),
            "protocol type 'other'": int(join(c, group, protocol_type="other").error_code),
            "session timeout 1 ms": int(join(c, name(), session=1).error_code),
            "unknown member, unknown group": int(join(c, name(), "no-such-member").error_code),
        }
        return out


@case("SyncGroup v5: a wrong generation, an unknown member, another protocol name, then the leader's own "
      "assignment")
def case_sync_group(b: str) -> dict[str, Any]:
    with client(b) as c:
        group = name()
        coordinator(c, group)
        first = join(c, group)
        joined = join(c, group, first.member_id)
        me, gen = joined.member_id, joined.generation_id
        mine = assignment({"t": [0, 1]})

        def code(r: Msg) -> int:
            return int(r.error_code)
        out: dict[str, Any] = {
            "generation + 1": code(sync(c, group, gen + 1, me, {me: mine})),
            "unknown member": code(sync(c, group, gen, "no-such-member", {me: mine})),
            "protocol name 'roundrobin'": code(sync(c, group, gen, me, {me: mine}, protocol_name="roundrobin"))}
        ok = sync(c, group, gen, me, {me: mine})
        out["right generation"] = (code(ok), ok.protocol_type, ok.protocol_name, bytes(ok.assignment) == mine)
        out["unknown group"] = code(sync(c, name(), 1, me, {me: mine}))
        return out


@case("Heartbeat v4: a member of a Stable group, an unknown member, a wrong generation, an unknown group; while "
      "a second member's join is held (REBALANCE_IN_PROGRESS), then the rejoin both wait for")
def case_heartbeat(b: str) -> dict[str, Any]:
    with client(b) as c, client(b) as c2:
        group = name()
        me, gen = member(c, group)
        out: dict[str, Any] = {"member": heartbeat(c, group, gen, me), "unknown member": heartbeat(c, group, gen, "x"),
                               "generation + 1": heartbeat(c, group, gen + 1, me),
                               "generation - 1": heartbeat(c, group, gen - 1, me),
                               "unknown group": heartbeat(c, name(), gen, me)}
        second = join(c2, group)
        out["second member's first join"] = int(second.error_code)
        held = c2.send(11, 9, join_body(group, second.member_id))
        deadline = time.monotonic() + 30  # (c2's join and c's requests race: wait for the rebalance)
        while (d := describe(c, group)).group_state != "PreparingRebalance":
            assert time.monotonic() < deadline, d
            time.sleep(0.02)  # the other connection's request: no event to await on this one
        out["described: (state, members)"] = (d.group_state, len(d.members))
        out["member, during the rebalance"] = heartbeat(c, group, gen, me)
        mine = join(c, group, me)
        theirs = c2.receive(11, 9, held)
        out["rejoin: (error, generation - old, members the leader sees)"] = (
            int(mine.error_code), mine.generation_id - gen, len(mine.members))
        out["second: (error, generation - old, members it sees, leader is the first)"] = (
            int(theirs.error_code), theirs.generation_id - gen, len(theirs.members), theirs.leader == me)
        out["described after the rejoin: state"] = describe(c, group).group_state
        out["old generation now"] = heartbeat(c, group, gen, me)
        out["new generation, before the SyncGroup"] = heartbeat(c, group, mine.generation_id, me)
        # the second's SyncGroup is held until the leader's brings its assignment
        held = c2.send(14, 5, {"group_id": group, "generation_id": theirs.generation_id,
                               "member_id": theirs.member_id, "group_instance_id": None, "protocol_type": "consumer",
                               "protocol_name": "range", "assignments": []})
        yours = assignment({"t": [3]})
        out["leader's SyncGroup"] = int(sync(c, group, mine.generation_id, me, {me: assignment({}),
                                                                                theirs.member_id: yours}).error_code)
        synced = c2.receive(14, 5, held)
        out["then the second's: (error, the leader's assignment for it)"] = (int(synced.error_code),
                                                                           bytes(synced.assignment) == yours)
        return out


@case("Static membership (JoinGroup v9 with a group instance id): the same instance joining again without a "
      "member id, the old member id's heartbeat (FENCED_INSTANCE_ID), a LeaveGroup of an unknown instance")
def case_static_member(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        group = name()
        coordinator(c, group)

        def static_join(member_id: str = "") -> Msg:
            return c.request(11, 9, {**join_body(group, member_id, (t,)), "group_instance_id": "i1"})
        first = static_join()
        synced = sync(c, group, first.generation_id, first.member_id, {first.member_id: assignment({t: [0]})})
        again = static_join()
        out: dict[str, Any] = {
            "first join: (error, generation, leader)": (int(first.error_code), first.generation_id,
                                                        first.leader == first.member_id),
            "sync": int(synced.error_code),
            "again, no member id: (error, new id, same generation)": (
                int(again.error_code), again.member_id != first.member_id, again.generation_id == first.generation_id),
            "old member id's heartbeat": heartbeat(c, group, first.generation_id, first.member_id),
            "old member id's heartbeat, with the instance id": heartbeat(c, group, first.generation_id,
                                                                        first.member_id, "i1"),
            "new member id's heartbeat": heartbeat(c, group, again.generation_id, again.member_id, "i1"),
            "described: (state, members)": (lambda d: (d.group_state, len(d.members), d.members[0].group_instance_id))(
                describe(c, group))}
        resp = c.request(13, 5, {"group_id": group, "members": [
            {"member_id": "", "group_instance_id": "i2", "reason": None},
            {"member_id": first.member_id, "group_instance_id": "i1", "reason": None},
            {"member_id": "", "group_instance_id": "i1", "reason": None}]})
        out["leave i2, i1 with the old id, i1"] = (int(resp.error_code), [int(m.error_code) for m in resp.members])
        out["described after: state"] = describe(c, group).group_state
        return out


@case("LeaveGroup v5: an unknown member of a group, a member of an unknown group, the member itself; the "
      "group's state afterwards")
def case_leave_group(b: str) -> dict[str, Any]:
    with client(b) as c:
        group = name()
        me, _ = member(c, group)

        def leave(g: str, m: str) -> tuple[int, list[int]]:
            resp = c.request(13, 5, {"group_id": g, "members": [{"member_id": m, "group_instance_id": None,
                                                                 "reason": "vs-kafka"}]})
            return int(resp.error_code), [int(x.error_code) for x in resp.members]
        return {"unknown member": leave(group, "no-such-member"), "unknown group": leave(name(), me),
                "the member": leave(group, me), "state after": describe(c, group).group_state,
                "the member again": leave(group, me)}


# --------------------------------------------------------------------------- offsets


@case("OffsetCommit v9 with generation -1 (a simple commit), then OffsetFetch v9: offset, leader epoch, "
      "metadata (given, null, empty); one partition never committed; all of the group's; the group it makes")
def case_simple_commit(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c, 3), "t")
        group = name()
        coordinator(c, group)
        committed = commit(c, group, {(t, 0): (5, "m", 7), (t, 1): (9, None, -1)})
        committed |= commit(c, group, {(t, 2): (0, "", -1)})
        g = describe(c, group)
        return {"commit": committed, "fetch 0, 1, 2": fetch_offsets(c, group, {t: [0, 1, 2]}),
                "fetch all": fetch_offsets(c, group, None),
                "group: (error, state, protocol type, protocol, members)": (
                    int(g.error_code), g.group_state, g.protocol_type, g.protocol_data, len(g.members)),
                "commit with generation 1": commit(c, group, {(t, 0): (6, "", -1)}, generation=1),
                "commit with generation 1 and a member id": commit(c, group, {(t, 0): (6, "", -1)}, generation=1,
                                                                   member_id="no-such-member")}


@case("OffsetCommit to a partition the topic does not have and to an unknown topic; what OffsetFetch gives "
      "for them")
def case_commit_unknown_partition(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c), "t")
        unknown = _label(name(), "unknown")
        group = name()
        coordinator(c, group)
        return {"commit": commit(c, group, {(t, 0): (1, "", -1), (t, 3): (1, "", -1), (unknown, 0): (1, "", -1)}),
                "fetch": fetch_offsets(c, group, {t: [0, 3], unknown: [0]})}


@case("OffsetFetch v9 for a group that does not exist: some partitions, and all")
def case_fetch_unknown_group(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c), "t")
        group = name()
        coordinator(c, group)
        return {"partitions": fetch_offsets(c, group, {t: [0]}), "all": fetch_offsets(c, group, None)}


@case("OffsetDelete v0: a topic the Stable group is subscribed to (GROUP_SUBSCRIBED_TO_TOPIC), one it is not, "
      "an unknown topic, an unknown group; the offsets left")
def case_offset_delete(b: str) -> dict[str, Any]:
    with client(b) as c:
        subscribed, other = _label(topic(c), "subscribed"), _label(topic(c), "other")
        unknown = _label(name(), "unknown")
        group = name()
        me, gen = member(c, group, (subscribed,))
        assert commit(c, group, {(subscribed, 0): (1, "", -1), (other, 0): (2, "", -1)}, gen, me) == {
            _tp(subscribed, 0): 0, _tp(other, 0): 0}

        def delete(g: str, t: str) -> tuple[int, dict[str, int]]:
            resp = c.request(47, 0, {"group_id": g, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]})
            return int(resp.error_code), dict(sorted((_tp(x.name, p.partition_index), int(p.error_code))
                                                     for x in resp.topics for p in x.partitions))
        return {"subscribed": delete(group, subscribed), "not subscribed": delete(group, other),
                "unknown topic": delete(group, unknown), "unknown group": delete(name(), other),
                "offsets left": fetch_offsets(c, group, None)}


# --------------------------------------------------------------------------- admin


@case("DescribeGroups v6: an unknown group, an Empty one (simple commits only), a Stable one")
def case_describe_groups(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        empty, stable = name(), name()
        coordinator(c, empty)
        commit(c, empty, {(t, 0): (1, "", -1)})
        me, _ = member(c, stable, (t,))
        out: dict[str, Any] = {}
        for label, g in (("unknown", name()), ("empty", empty), ("stable", stable)):
            d = describe(c, g)
            out[label] = (int(d.error_code), d.group_state, d.protocol_type, d.protocol_data, len(d.members))
        m = describe(c, stable).members[0]
        out["stable's member: (id, client id, metadata, assignment)"] = (
            m.member_id == me, m.client_id, bytes(m.member_metadata) == subscription([t]),
            bytes(m.member_assignment) == assignment({t: [0]}))
        return out


@case("ListGroups v5: no filter, by state (Empty, Stable, stable, an unknown state), by type (classic, consumer)")
def case_list_groups(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        empty, stable, kip848 = name(), name(), name()
        coordinator(c, empty)
        commit(c, empty, {(t, 0): (1, "", -1)})
        member(c, stable, (t,))
        assert consumer_heartbeat(c, kip848, str(uuid.uuid4()), 0, [t]).error_code == 0
        mine = {empty: "empty", stable: "stable", kip848: "consumer"}
        return {"all": list_groups(c, mine), "Empty": list_groups(c, mine, states=["Empty"]),
                "Stable": list_groups(c, mine, states=["Stable"]), "stable": list_groups(c, mine, states=["stable"]),
                "Bogus": list_groups(c, mine, states=["Bogus"]), "classic": list_groups(c, mine, types=["classic"]),
                "consumer": list_groups(c, mine, types=["consumer"])}


@case("DeleteGroups v2: a Stable group (NON_EMPTY_GROUP), an unknown one, an Empty one; its offsets afterwards")
def case_delete_groups(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = _label(topic(c), "t")
        empty, stable = name(), name()
        coordinator(c, empty)
        commit(c, empty, {(t, 0): (1, "", -1)})
        member(c, stable, (t,))
        unknown = name()
        labels = {empty: "empty", stable: "stable", unknown: "unknown"}
        resp = c.request(42, 2, {"groups_names": [stable, unknown, empty]})
        return {"delete": dict(sorted((labels[r.group_id], int(r.error_code)) for r in resp.results)),
                "offsets of the deleted": fetch_offsets(c, empty, {t: [0]}),
                "describe the deleted": describe(c, empty).group_state}


# --------------------------------------------------------------------------- KIP-848


def consumer_heartbeat(c: RawClient, group: str, member_id: str, epoch: int, topics: list[str] | None = None,
                       owned: list[Any] | None = None) -> Msg:
    """ConsumerGroupHeartbeat v1 (KIP-848; from v1 the member makes up its own id)."""
    return c.request(68, 1, {"group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
                             "rack_id": None, "rebalance_timeout": 30000 if epoch == 0 else -1,
                             "subscribed_topic_names": topics, "subscribed_topic_regex": None, "server_assignor": None,
                             "topic_partitions": [] if epoch == 0 else owned})


@case("ConsumerGroupHeartbeat v1: a join (member epoch 0), heartbeats until the assignment is there, a wrong "
      "epoch (FENCED_MEMBER_EPOCH), an unknown member id, no member id, DescribeGroups of the group, a leave (epoch -1)")
def case_consumer_group_heartbeat(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c, 2)
        md = c.request(3, 12, {"topics": [{"name": t}], "allow_auto_topic_creation": False,
                               "include_topic_authorized_operations": False})
        topic_id = bytes(md.topics[0].topic_id)
        group, me = name(), str(uuid.uuid4())
        coordinator(c, group)

        def answer(r: Msg) -> tuple[int, bool, int]:
            """(error, member epoch > 0, heartbeat interval): a member echoes the epoch it is given."""
            return int(r.error_code), r.member_epoch > 0, int(r.heartbeat_interval)
        joined = consumer_heartbeat(c, group, me, 0, [t])
        out: dict[str, Any] = {"join": answer(joined), "member id kept": joined.member_id == me}
        # The first answer may carry no partitions yet (Kafka's coordinator can assign before
        # its metadata has the new topic, then bumps the group epoch): heartbeat until it does.
        epoch, owned, deadline = joined.member_epoch, joined.assignment, time.monotonic() + 30
        while owned is None or sum(len(tp.partitions) for tp in owned.topic_partitions) < 2:
            assert time.monotonic() < deadline, "no assignment after 30 s"
            time.sleep(0.1)  # the assignment comes with a heartbeat: nothing to await but the next one
            r = consumer_heartbeat(c, group, me, epoch, owned=_owned(owned))
            assert r.error_code == 0, r
            epoch, owned = r.member_epoch, r.assignment or owned
        out["assignment"] = sorted((bytes(tp.topic_id) == topic_id, sorted(tp.partitions))
                                   for tp in owned.topic_partitions)
        out["next heartbeat: (error, epoch unchanged, assignment)"] = (
            lambda r: (int(r.error_code), r.member_epoch == epoch, r.assignment))(
            consumer_heartbeat(c, group, me, epoch, owned=_owned(owned)))
        out["epoch + 5"] = answer(consumer_heartbeat(c, group, me, epoch + 5, owned=_owned(owned)))
        out["unknown member id"] = answer(consumer_heartbeat(c, group, str(uuid.uuid4()), 1))
        out["no member id"] = answer(consumer_heartbeat(c, name(), "", 0, [t]))
        d = describe(c, group)
        out["DescribeGroups: (error, state, protocol type, members)"] = (int(d.error_code), d.group_state,
                                                                         d.protocol_type, len(d.members))
        left = consumer_heartbeat(c, group, me, -1)
        out["leave: (error, epoch)"] = (int(left.error_code), int(left.member_epoch))
        out["heartbeat after leaving"] = answer(consumer_heartbeat(c, group, me, epoch, owned=_owned(owned)))
        return out


def _owned(assigned: Any) -> list[dict[str, Any]]:
    """The topic_partitions a member reports owning: what it was assigned."""
    return [{"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
            for tp in (assigned.topic_partitions if assigned is not None else [])]


@case("Classic and KIP-848 members in one group: a classic JoinGroup to a consumer group with a member, a "
      "ConsumerGroupHeartbeat join to a Stable classic group")
def case_protocol_migration(b: str) -> dict[str, Any]:
    with client(b) as c:
        t = topic(c)
        kip848, classic = name(), name()
        coordinator(c, kip848)
        assert consumer_heartbeat(c, kip848, str(uuid.uuid4()), 0, [t]).error_code == 0
        member(c, classic, (t,))
        return {"JoinGroup to the consumer group": int(join(c, kip848, topics=(t,)).error_code),
                "ConsumerGroupHeartbeat to the classic group": int(
                    consumer_heartbeat(c, classic, str(uuid.uuid4()), 0, [t]).error_code)}
