"""KIP-848 (ConsumerGroupHeartbeat / ConsumerGroupDescribe) in the coordinator shard, with a fake clock."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.coordinator import CoordinatorConfig, GroupCoordinatorShard
from samsa.coordinator.assignors import range_, uniform
from samsa.protocol.errors import ErrorCode as E

T1 = uuid.uuid4().bytes
T2 = uuid.uuid4().bytes


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def env() -> Any:
    clock = Clock()
    topics = {"t": (T1, 6), "u": (T2, 3)}
    shard = GroupCoordinatorShard(
        0, CoordinatorConfig(), clock,
        topic_exists=lambda name, p: name in topics and p < topics[name][1],
        topic_name_for_id=lambda tid: next((n for n, (i, _) in topics.items() if i == tid), None),
        topic_id_for_name=lambda name: topics[name][0] if name in topics else None,
        topic_partitions=lambda name: topics[name][1] if name in topics else None,
    )
    return SimpleNamespace(shard=shard, clock=clock, topics=topics)


def req(member_id: str, epoch: int, *, group: str = "g", topics: list[str] | None = None,
        owned: dict[bytes, set[int]] | None = None, instance_id: str | None = None,
        assignor: str | None = None, rebalance_timeout: int = -1) -> Any:
    return SimpleNamespace(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id, rack_id=None,
        rebalance_timeout=rebalance_timeout, subscribed_topic_names=topics, subscribed_topic_regex=None,
        server_assignor=assignor,
        topic_partitions=None if owned is None else [SimpleNamespace(topic_id=t, partitions=sorted(p))
                                                     for t, p in owned.items()])


class Client:
    """A KIP-848 consumer: applies every assignment it gets at once and reports what it owns."""

    def __init__(self, shard: GroupCoordinatorShard, member_id: str, topics: list[str], group: str = "g",
                 instance_id: str | None = None) -> None:
        self.shard, self.member_id, self.topics, self.group = shard, member_id, topics, group
        self.instance_id = instance_id
        self.epoch = 0
        self.owned: dict[bytes, set[int]] = {}

    def heartbeat(self) -> dict[str, Any]:
        if self.epoch == 0:
            r = req(self.member_id, 0, group=self.group, topics=self.topics, owned={}, rebalance_timeout=60000,
                    instance_id=self.instance_id)
        else:
            r = req(self.member_id, self.epoch, group=self.group, owned=self.owned, instance_id=self.instance_id)
        resp = self.shard.consumer_group_heartbeat(r, 1)
        if resp["error_code"] == 0:
            self.epoch = resp["member_epoch"]
            if resp["assignment"] is not None:
                self.owned = {tp["topic_id"]: set(tp["partitions"]) for tp in resp["assignment"]["topic_partitions"]}
        return resp

    def partitions(self) -> set[tuple[bytes, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}

    def leave(self) -> dict[str, Any]:
        return self.shard.consumer_group_heartbeat(req(self.member_id, -1, group=self.group), 1)


def converge(clients: list[Client], rounds: int = 10) -> None:
    for _ in range(rounds):
        for c in clients:
            assert c.heartbeat()["error_code"] == 0
        # never two owners at once
        seen: set[tuple[bytes, int]] = set()
        for c in clients:
            assert not (c.partitions() & seen)
            seen |= c.partitions()


def describe(shard: GroupCoordinatorShard, group: str = "g") -> dict[str, Any]:
    return shard.consumer_group_describe([group])[0]


def test_three_members_converge_to_a_stable_balanced_assignment(env: Any) -> None:
    clients = [Client(env.shard, f"m{i}", ["t"]) for i in range(3)]
    converge(clients)
    assert sorted(len(c.partitions()) for c in clients) == [2, 2, 2]
    assert set().union(*(c.partitions() for c in clients)) == {(T1, p) for p in range(6)}
    d = describe(env.shard)
    assert d["error_code"] == 0 and d["group_state"] == "Stable"
    assert d["group_epoch"] == d["assignment_epoch"] == 3
    assert {m["member_epoch"] for m in d["members"]} == {3}
    for m in d["members"]:
        assert m["assignment"] == m["target_assignment"]
        assert m["assignment"]["topic_partitions"][0]["topic_name"] == "t"
    assert env.shard.list_groups() == [("g", "consumer", "Stable")]
    assert env.shard.list_groups_typed()[0]["group_type"] == "consumer"


def test_v0_generates_the_member_id(env: Any) -> None:
    r = req("", 0, topics=["t"], owned={}, rebalance_timeout=1000)
    resp = env.shard.consumer_group_heartbeat(r, 0)
    assert resp["error_code"] == 0 and len(resp["member_id"]) == 22 and resp["member_epoch"] == 1
    assert resp["heartbeat_interval"] == 5000
    assert sorted(resp["assignment"]["topic_partitions"][0]["partitions"]) == list(range(6))


def test_a_new_member_gets_partitions_only_after_their_owner_revokes_them(env: Any) -> None:
    a = Client(env.shard, "a", ["t"])
    converge([a])
    assert len(a.partitions()) == 6
    b = Client(env.shard, "b", ["t"])
    b.heartbeat()
    assert b.partitions() == set() and b.epoch == 2  # target moved on, but a still owns everything
    assert describe(env.shard)["group_state"] == "Reconciling"
    # a heartbeats *without* acknowledging: it is asked to revoke 3 partitions, keeps its epoch
    resp = env.shard.consumer_group_heartbeat(req("a", 1), 1)
    assert resp["member_epoch"] == 1
    b.heartbeat()
    assert b.partitions() == set()
    a.owned = {tp["topic_id"]: set(tp["partitions"]) for tp in resp["assignment"]["topic_partitions"]}
    assert len(a.partitions()) == 3  # the client applies the shrunk assignment; the next heartbeat reports it
    a.heartbeat()
    assert a.epoch == 2
    b.heartbeat()
    assert len(b.partitions()) == 3 and not (a.partitions() & b.partitions())
    assert describe(env.shard)["group_state"] == "Stable"


def test_a_leaving_member_partitions_are_reassigned(env: Any) -> None:
    clients = [Client(env.shard, f"m{i}", ["t"]) for i in range(3)]
    converge(clients)
    gone = clients.pop(0)
    assert gone.leave()["member_epoch"] == -1
    converge(clients)
    assert sorted(len(c.partitions()) for c in clients) == [3, 3]
    assert describe(env.shard)["group_epoch"] == 4


def test_session_expiry_fences_the_member(env: Any) -> None:
    a, b = Client(env.shard, "a", ["t"]), Client(env.shard, "b", ["t"])
    converge([a, b])
    env.clock.t += 30_000
    a.heartbeat()
    env.clock.t += 20_000  # b silent for 50 s > 45 s
    assert env.shard.next_deadline() is not None and env.shard.next_deadline() <= env.clock.t
    env.shard.tick()
    assert [m["member_id"] for m in describe(env.shard)["members"]] == ["a"]
    assert b.heartbeat()["error_code"] == E.UNKNOWN_MEMBER_ID
    converge([a])
    assert len(a.partitions()) == 6


def test_revocation_timeout_fences_the_member(env: Any) -> None:
    a = Client(env.shard, "a", ["t"])
    converge([a])
    b = Client(env.shard, "b", ["t"])
    b.heartbeat()
    for _ in range(3):  # a keeps heartbeating, asked to revoke, but keeps reporting everything
        assert env.shard.consumer_group_heartbeat(req("a", a.epoch, owned=a.owned), 1)["error_code"] == 0
        b.heartbeat()
        env.clock.t += 20_000
        env.shard.tick()
    assert [m["member_id"] for m in describe(env.shard)["members"]] == ["b"]


def test_stale_and_future_epochs_are_fenced(env: Any) -> None:
    a = Client(env.shard, "a", ["t"])
    converge([a])
    assert env.shard.consumer_group_heartbeat(req("a", a.epoch + 1), 1)["error_code"] == E.FENCED_MEMBER_EPOCH
    b = Client(env.shard, "b", ["t"])
    converge([a, b])
    assert a.epoch == 2
    # the previous epoch is accepted when the owned partitions are a subset (a lost response)
    assert env.shard.consumer_group_heartbeat(req("a", 1, owned=a.owned), 1)["error_code"] == 0
    assert env.shard.consumer_group_heartbeat(req("a", 1, owned={T1: set(range(6))}), 1)["error_code"] \
        == E.FENCED_MEMBER_EPOCH
    assert env.shard.consumer_group_heartbeat(req("a", 0, topics=["t"], owned={}, rebalance_timeout=1), 1)[
        "error_code"] == 0  # re-joining with epoch 0 starts the member over


def test_the_assignment_is_sent_when_it_changed_or_for_a_full_request(env: Any) -> None:
    """Kafka's rule: an unchanged assignment is not sent back to a heartbeat that reports its
    owned partitions; it is to a join and to a full request (rebalance timeout, subscription and
    owned partitions all given, what a member sends to resynchronise after an error)."""
    a = Client(env.shard, "a", ["t"])
    converge([a])
    hb = env.shard.consumer_group_heartbeat
    assert hb(req("a", a.epoch, owned=a.owned), 1)["assignment"] is None
    assert hb(req("a", a.epoch), 1)["assignment"] is None
    assert hb(req("a", a.epoch, topics=["t"], owned=a.owned), 1)["assignment"] is None  # (no rebalance timeout)
    full = hb(req("a", a.epoch, topics=["t"], owned=a.owned, rebalance_timeout=60000), 1)["assignment"]
    assert full == {"topic_partitions": [{"topic_id": T1, "partitions": list(range(6))}]}
    b = Client(env.shard, "b", ["t"])
    b.heartbeat()
    changed = hb(req("a", a.epoch, owned=a.owned), 1)["assignment"]  # (b joined: a must give up half)
    assert changed is not None and len(changed["topic_partitions"][0]["partitions"]) == 3


def test_request_validation(env: Any) -> None:
    hb = env.shard.consumer_group_heartbeat
    assert hb(req("m", 0, topics=None, owned={}, rebalance_timeout=1), 1)["error_code"] == E.INVALID_REQUEST
    assert hb(req("m", 0, topics=["t"], owned=None, rebalance_timeout=1), 1)["error_code"] == E.INVALID_REQUEST
    assert hb(req("m", 0, topics=["t"], owned={}), 1)["error_code"] == E.INVALID_REQUEST
    assert hb(req("", 0, topics=["t"], owned={}, rebalance_timeout=1), 1)["error_code"] == E.INVALID_REQUEST
    assert hb(req("m", -2), 1)["error_code"] == E.INVALID_REQUEST
    assert hb(req("m", 0, topics=["t"], owned={}, rebalance_timeout=1, assignor="nope"), 1)["error_code"] \
        == E.UNSUPPORTED_ASSIGNOR
    assert hb(req("m", 3), 1)["error_code"] == E.UNKNOWN_MEMBER_ID
    assert env.shard.consumer_group_describe(["nope"])[0]["error_code"] == E.GROUP_ID_NOT_FOUND


def test_group_max_size(env: Any) -> None:
    shard = GroupCoordinatorShard(0, CoordinatorConfig(consumer_group_max_size=1), env.clock,
                                  topic_partitions=lambda n: 6)
    assert Client(shard, "a", ["t"]).heartbeat()["error_code"] == 0
    assert Client(shard, "b", ["t"]).heartbeat()["error_code"] == E.GROUP_MAX_SIZE_REACHED


def test_static_member_leaves_temporarily_and_comes_back(env: Any) -> None:
    a = Client(env.shard, "a1", ["t"], instance_id="i")
    b = Client(env.shard, "b", ["t"])
    converge([a, b])
    mine = a.partitions()
    resp = env.shard.consumer_group_heartbeat(req("a1", -2, instance_id="i"), 1)
    assert resp["member_epoch"] == -2
    again = Client(env.shard, "a2", ["t"], instance_id="i")
    again.heartbeat()
    assert again.partitions() == mine
    other = Client(env.shard, "a3", ["t"], instance_id="i")
    assert other.heartbeat()["error_code"] == E.UNRELEASED_INSTANCE_ID


def test_partition_count_change_bumps_the_group_epoch(env: Any) -> None:
    a, b = Client(env.shard, "a", ["t"]), Client(env.shard, "b", ["t"])
    converge([a, b])
    env.topics["t"] = (T1, 8)
    converge([a, b])
    assert describe(env.shard)["group_epoch"] == 3
    assert sorted(len(c.partitions()) for c in (a, b)) == [4, 4]


def test_offset_commit_validation(env: Any) -> None:
    a = Client(env.shard, "a", ["t"])
    converge([a])

    def commit(member_id: str, epoch: int) -> int:
        r = SimpleNamespace(group_id="g", generation_id_or_member_epoch=epoch, member_id=member_id,
                            group_instance_id=None, retention_time=-1,
                            topics=[SimpleNamespace(name="t", partitions=[SimpleNamespace(
                                partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                committed_metadata="")])])
        return int(env.shard.offset_commit(r, 9)["topics"][0]["partitions"][0]["error_code"])

    assert commit("a", a.epoch) == 0
    assert commit("a", a.epoch - 1) == E.STALE_MEMBER_EPOCH
    assert commit("zz", a.epoch) == E.UNKNOWN_MEMBER_ID
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID  # not while the group has members
    assert env.shard.drain_records()  # the accepted commit is a record
    assert env.shard.fetch_offsets("g", [("t", None, [0])])["topics"][0]["partitions"][0]["committed_offset"] == 5
    a.leave()
    assert commit("", -1) == 0  # an empty group takes simple commits


def test_classic_and_consumer_groups_exclude_each_other(env: Any) -> None:
    a = Client(env.shard, "a", ["t"])
    converge([a])
    got: list[dict[str, Any]] = []
    join = SimpleNamespace(group_id="g", member_id="", group_instance_id=None, session_timeout=10000,
                           rebalance_timeout=10000, protocol_type="consumer",
                           protocols=[SimpleNamespace(name="range", metadata=b"")], reason=None)
    env.shard.join_group(join, 5, "c", "/h", got.append)
    assert got[0]["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    assert env.shard.describe_group("g")["group_state"] == "Dead"
    v6 = env.shard.describe_group("g", 6)
    assert (v6["error_code"], v6["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group g is not a classic group.")
    assert env.shard.delete_group("g") == E.NON_EMPTY_GROUP
    a.leave()
    assert env.shard.delete_group("g") == 0
    assert env.shard.consumer_group_describe(["g"])[0]["error_code"] == E.GROUP_ID_NOT_FOUND


def test_assignors() -> None:
    members = {"a": {"t"}, "b": {"t"}, "c": {"t", "u"}}
    topics = {"t": (T1, 7), "u": (T2, 2)}
    out = uniform(members, topics, {})
    counts = sorted(sum(len(p) for p in a.values()) for a in out.values())
    assert counts == [3, 3, 3]
    assert T2 not in out["a"] and T2 not in out["b"]
    # sticky: a new member takes partitions without reshuffling the others'
    members2 = {**members, "d": {"t"}}
    out2 = uniform(members2, topics, out)
    for m in "abc":
        assert all(out2[m].get(t, frozenset()) <= out[m].get(t, frozenset()) for t in out2[m])
    r = range_({"a": {"t"}, "b": {"t"}}, {"t": (T1, 5)}, {})
    assert r == {"a": {T1: frozenset({0, 1, 2})}, "b": {T1: frozenset({3, 4})}}
