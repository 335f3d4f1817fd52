"""Harness for the coordinator tests: a fake clock, real decoded requests, wire-checked responses.

Requests are built the way the broker gets them: a dict encoded with Samsa's own codec for the
API version and decoded back, so every field of that version is present with its default.
Responses are encoded with the response codec of the version and decoded again, so a test sees
exactly what a client would (and a response the codec cannot encode fails the test).
"""

from __future__ import annotations

import struct
from typing import Any

from samsa.coordinator import CoordinatorConfig, GroupCoordinatorShard
from samsa.protocol.messages import request_codec, response_codec
from samsa.protocol.schema import Msg, Out
from samsa.protocol.wire import Reader

JOIN, SYNC, HEARTBEAT, LEAVE, COMMIT, FETCH, DESCRIBE, DELETE_OFFSETS = 11, 14, 12, 13, 8, 9, 15, 47
T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, t: int = T0) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t

    def advance(self, ms: int) -> None:
        self.t += ms


def request(api_key: int, version: int, **fields: Any) -> Any:
    codec = request_codec(api_key, version)
    out = Out()
    codec.encode(out, fields)
    return codec.decode(Reader(bytes(out)))


def wire(api_key: int, version: int, body: dict[str, Any]) -> Any:
    codec = response_codec(api_key, version)
    out = Out()
    codec.encode(out, body)
    r = Reader(bytes(out))
    msg = codec.decode(r)
    assert r.remaining == 0
    return msg


def subscription(*topics: str, version: int = 1) -> bytes:
    """A ConsumerProtocolSubscription (v1: topics, null user data, no owned partitions)."""
    out = bytearray(struct.pack(">hi", version, len(topics)))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    out += struct.pack(">i", -1)  # user data: null
    if version >= 1:
        out += struct.pack(">i", 0)  # owned partitions
    return bytes(out)


class Pending:
    """A JoinGroup or SyncGroup answer that may arrive later; it must arrive exactly once."""

    def __init__(self, api_key: int, version: int) -> None:
        self.api_key = api_key
        self.version = version
        self.calls: list[Msg] = []

    def __call__(self, body: dict[str, Any]) -> None:
        self.calls.append(wire(self.api_key, self.version, body))
        assert len(self.calls) == 1, "respond called twice"

    @property
    def done(self) -> bool:
        return bool(self.calls)

    @property
    def r(self) -> Any:
        assert self.calls, "no response yet"
        return self.calls[0]


def make_shard(clock: FakeClock, **config: Any) -> GroupCoordinatorShard:
    config.setdefault("group_initial_rebalance_delay_ms", 100)
    topic_exists = config.pop("topic_exists", None)
    return GroupCoordinatorShard(0, CoordinatorConfig(**config), clock, topic_exists=topic_exists)


class Harness:
    """A shard plus helpers speaking in requests and wire-level responses."""

    def __init__(self, **config: Any) -> None:
        self.clock = FakeClock()
        self.shard = make_shard(self.clock, **config)
        self.records: list[tuple[bytes, bytes | None]] = []

    def drain(self) -> list[tuple[bytes, bytes | None]]:
        new = self.shard.drain_records()
        self.records.extend(new)
        return new

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.shard.tick()

    def settle(self, *pending: Pending) -> None:
        """Move the clock from deadline to deadline until every given answer has arrived."""
        for _ in range(1000):
            if all(p.done for p in pending):
                return
            deadline = self.shard.next_deadline()
            assert deadline is not None, "waiting for answers with no timer armed"
            self.clock.t = max(self.clock.t, deadline)
            self.shard.tick()
        raise AssertionError("answers never came")

    def join(self, group: str, member_id: str = "", *, version: int = 9, instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, protocol_type: str = "consumer",
             session: int = 10000, rebalance: int = 30000, client_id: str = "client") -> Pending:
        p = Pending(JOIN, version)
        fields: dict[str, Any] = {
            "group_id": group, "session_timeout": session, "rebalance_timeout": rebalance, "member_id": member_id,
            "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in (protocols or [("range", subscription("t"))])],
        }
        self.shard.join_group(request(JOIN, version, **fields), version, client_id, "/127.0.0.1", p)
        return p

    def join_new(self, group: str, **kw: Any) -> Pending:
        """A dynamic member joining as modern clients do: MEMBER_ID_REQUIRED, then again with the id."""
        first = self.join(group, **kw)
        assert first.r.error_code == 79, first.r
        return self.join(group, first.r.member_id, **kw)

    def sync(self, group: str, member_id: str, generation: int, *, version: int = 5,
             assignments: dict[str, bytes] | None = None, instance: str | None = None,
             protocol_type: str | None = "consumer", protocol_name: str | None = "range") -> Pending:
        p = Pending(SYNC, version)
        req = request(SYNC, version, group_id=group, generation_id=generation, member_id=member_id,
                      group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
                      assignments=[{"member_id": k, "assignment": v} for k, v in (assignments or {}).items()])
        self.shard.sync_group(req, version, p)
        return p

    def heartbeat(self, group: str, member_id: str, generation: int, *, version: int = 4,
                  instance: str | None = None) -> int:
        req = request(HEARTBEAT, version, group_id=group, generation_id=generation, member_id=member_id,
                      group_instance_id=instance)
        return int(wire(HEARTBEAT, version, self.shard.heartbeat(req, version)).error_code)

    def leave(self, group: str, *members: tuple[str, str | None], version: int = 5) -> Any:
        if version >= 3:
            req = request(LEAVE, version, group_id=group,
                          members=[{"member_id": m, "group_instance_id": i} for m, i in members])
        else:
            req = request(LEAVE, version, group_id=group, member_id=members[0][0])
        return wire(LEAVE, version, self.shard.leave_group(req, version))

    def commit(self, group: str, offsets: dict[tuple[str, int], int], *, member_id: str = "", generation: int = -1,
               version: int = 8, metadata: str | None = "", instance: str | None = None,
               retention: int = -1) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": 3, "committed_metadata": metadata})
        req = request(COMMIT, version, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                      group_instance_id=instance, retention_time=retention,
                      topics=[{"name": t, "partitions": ps} for t, ps in topics.items()])
        resp = wire(COMMIT, version, self.shard.offset_commit(req, version))
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def fetch(self, group: str, topics: dict[str, list[int]] | None = None, *, version: int = 7) -> Any:
        tl = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        if version >= 8:
            req = request(FETCH, version, groups=[{"group_id": group, "topics": tl}])
        else:
            req = request(FETCH, version, group_id=group, topics=tl)
        return wire(FETCH, version, self.shard.offset_fetch(req, version))

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        resp = self.fetch(group, None, version=7)
        return {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}

    def stable_group(self, group: str, n: int, **kw: Any) -> tuple[list[str], int]:
        """n dynamic members joined and synced; returns (member ids, generation), leader first."""
        first = [self.join(group, **kw) for _ in range(n)]
        assert all(p.r.error_code == 79 for p in first)
        joins = [self.join(group, p.r.member_id, **kw) for p in first]
        self.settle(*joins)
        gen = joins[0].r.generation_id
        leader = joins[0].r.leader
        ids = [j.r.member_id for j in joins]
        followers = [self.sync(group, m, gen) for m in ids if m != leader]
        self.sync(group, leader, gen, assignments={m: m.encode() for m in ids})
        assert all(f.r.error_code == 0 for f in followers)
        ids.sort(key=lambda m: m != leader)
        return ids, gen


def test_requests_carry_every_field_of_their_version() -> None:
    req = request(JOIN, 0, group_id="g", session_timeout=10000, member_id="", protocol_type="consumer",
                  protocols=[])
    assert not hasattr(req, "rebalance_timeout")
    req = request(JOIN, 5, group_id="g", session_timeout=10000, member_id="", protocol_type="consumer", protocols=[])
    assert req.group_instance_id is None and req.rebalance_timeout == -1  # Kafka's default


def test_subscription_helper_is_what_the_coordinator_reads() -> None:
    from samsa.coordinator.records import subscription_topics

    assert subscription_topics(subscription("a", "b")) == ["a", "b"]
    assert subscription_topics(subscription("a", version=0)) == ["a"]
