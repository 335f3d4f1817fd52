"""The group coordinator's execution (samsa/server/group_manager.py) on a real GroupManager, a
real `__consumer_offsets` partition over a real log, and the real group handlers; only the
broker around them is a stand-in, and time is a manual clock.

* Answers wait until the records they depend on are on every in-sync replica, at most
  `offsets.commit.timeout.ms`; DeleteGroups answers each group's error code then.
* A JoinGroup parked in a rebalance is answered NOT_COORDINATOR when this broker stops leading
  the partition (the shard is unloaded, not just dropped).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from samsa.config import BrokerConfig
from samsa.handlers import delete_groups, join_group, offset_commit, sync_group
from samsa.metadata.zkdata import PartitionState
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import decode_request_body, decode_request_header, encode_request, request_codec
from samsa.server.group_manager import OFFSETS_TOPIC, GroupManager
from samsa.server.purgatory import Purgatory
from samsa.server.replica_manager import Partition, ReplicaManager
from samsa.server.responses import Pending
from samsa.storage.config import LogConfig
from samsa.storage.log import Log
from tests.unit.fake_context import fake_context
from tests.unit.manual_scheduler import ManualScheduler

PROTOCOLS = [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00"}]
TOPIC = "orders"


class Coordinator:
    """Broker 0 leading `__consumer_offsets-0` (the only partition), with `replicas`."""

    def __init__(self, tmp_path: Path, replicas: list[int]) -> None:
        self.sched = ManualScheduler()
        self.purgatory = Purgatory(self.sched)
        config = BrokerConfig({"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
                               "offsets.commit.timeout.ms": "5000"})
        self.replicas = ReplicaManager(self.purgatory)
        topics = {TOPIC: SimpleNamespace(name=TOPIC, partitions={0: [0]}, topic_id=uuid.uuid4())}
        self.broker = SimpleNamespace(config=config, replicas=self.replicas, loop=self.sched,
                                      purgatory=self.purgatory, topics=topics, node_id=0)
        log = Log.open(tmp_path / f"{OFFSETS_TOPIC}-0", LogConfig(segment_bytes=1 << 20, retention_ms=-1))
        self.partition = Partition(OFFSETS_TOPIC, 0, uuid.uuid4(), log, node_id=0)
        self.replicas.add(self.partition)
        self.epoch = 1
        self.partition.apply_state(PartitionState(leader=0, leader_epoch=self.epoch, isr=list(replicas)), replicas)
        self.groups = GroupManager(self.broker)  # type: ignore[arg-type]
        self.broker.groups = self.groups
        self.groups.on_role(self.partition)
        assert 0 in self.groups.shards

    def request(self, module: Any, version: int, body: dict[str, Any], peer: int = 1) -> Any:
        """The handler's result for `body` as the broker decodes it from the wire."""
        frame = bytes(encode_request(module.API_KEY, version, 7, "client", body))[4:]
        header, start = decode_request_header(frame, request_codec(module.API_KEY, version).flexible)
        req = decode_request_body(module.API_KEY, version, frame, start)
        ctx = fake_context(header=header, peer=("127.0.0.1", 40000 + peer), groups=self.groups)
        return module.handle(ctx, req)

    def follower_fetched(self, offset: int) -> None:
        """Broker 1 fetched from `offset` (what the replica fetcher's Fetch does on the leader)."""
        self.partition.update_follower(1, offset, lambda _: True)

    def lose_leadership(self) -> None:
        """The controller made broker 1 the leader: what Broker.on_partition_state does."""
        self.epoch += 1
        role = self.partition.apply_state(PartitionState(leader=1, leader_epoch=self.epoch, isr=[0, 1]), [0, 1])
        assert role == "follower"
        self.groups.on_role(self.partition)


@pytest.fixture
def single(tmp_path: Path) -> Iterator[Coordinator]:
    yield Coordinator(tmp_path, [0])


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[Coordinator]:
    yield Coordinator(tmp_path, [0, 1])


def answer(result: Any) -> Any:
    """The body a handler's Pending completed with (None while it waits)."""
    if isinstance(result, dict):  # no shard for the group: answered at once
        return result
    assert isinstance(result, Pending), "group handlers answer through a Pending"
    got: list[Any] = []
    result.on_done(lambda value, error: got.append(error if error is not None else value))
    return got[0] if got else None


def join(c: Coordinator, group: str, member_id: str, peer: int) -> Any:
    return c.request(join_group, 7, {"group_id": group, "session_timeout": 30000, "rebalance_timeout": 60000,
                                     "member_id": member_id, "group_instance_id": None,
                                     "protocol_type": "consumer", "protocols": PROTOCOLS}, peer)


def new_member(c: Coordinator, group: str, peer: int) -> str:
    first = answer(join(c, group, "", peer))
    assert first["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    return str(first["member_id"])


def commit(c: Coordinator, group: str, offset: int) -> Any:
    return c.request(offset_commit, 8, {
        "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})


def commit_code(body: Any) -> int:
    return int(body["topics"][0]["partitions"][0]["error_code"])


def test_a_parked_join_gets_not_coordinator_when_leadership_moves(single: Coordinator) -> None:
    c = single
    a = new_member(c, "g", 1)
    joined = answer(join(c, "g", a, 1))
    assert joined["error_code"] == 0 and joined["leader"] == a
    synced = answer(c.request(sync_group, 5, {
        "group_id": "g", "generation_id": joined["generation_id"], "member_id": a, "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": [{"member_id": a, "assignment": b"A"}]}))
    assert synced["error_code"] == 0
    b = new_member(c, "g", 2)
    parked = join(c, "g", b, 2)
    assert answer(parked) is None, "B waits for A to rejoin"
    c.lose_leadership()
    got = answer(parked)
    assert got is not None, "the parked JoinGroup must be answered, not forgotten"
    assert got["error_code"] == ErrorCode.NOT_COORDINATOR
    assert 0 not in c.groups.shards
    assert answer(join(c, "g", b, 2))["error_code"] == ErrorCode.NOT_COORDINATOR


def test_answers_wait_for_the_followers(replicated: Coordinator) -> None:
    c = replicated
    end = c.partition.log.log_end_offset
    pending = commit(c, "g", 5)
    assert answer(pending) is None, "the commit's record is not on broker 1 yet"
    assert c.partition.log.log_end_offset > end and c.partition.hw == end
    c.follower_fetched(end)  # nothing new for the leader: still waiting
    assert answer(pending) is None
    c.follower_fetched(c.partition.log.log_end_offset)  # broker 1 has it: the HW moves
    assert commit_code(answer(pending)) == 0
    assert len(c.purgatory) == 0


def test_answers_go_at_offsets_commit_timeout(replicated: Coordinator) -> None:
    c = replicated
    pending = commit(c, "g", 5)
    c.sched.advance(4.9)
    assert answer(pending) is None
    c.sched.advance(0.2)
    assert commit_code(answer(pending)) == 0, "the record stays in the log and will replicate"


def test_answers_go_when_leadership_moves_while_waiting(replicated: Coordinator) -> None:
    c = replicated
    pending = commit(c, "g", 5)
    c.lose_leadership()
    c.sched.run_soon()  # a role change is checked on the next turn of the loop
    assert answer(pending) is not None


def test_a_read_waits_behind_earlier_writes(replicated: Coordinator) -> None:
    """As in Kafka's coordinator runtime: an answer that wrote nothing still waits for what was
    written before it, so nobody acts on state that a new leader may not have."""
    c = replicated
    first = commit(c, "g", 5)
    second = commit(c, "g", 6)
    assert answer(first) is None and answer(second) is None
    c.follower_fetched(c.partition.log.log_end_offset)
    assert commit_code(answer(first)) == 0 and commit_code(answer(second)) == 0


@pytest.mark.parametrize("fixture", ["single", "replicated"])
def test_delete_groups_answers_error_codes(fixture: str, request: pytest.FixtureRequest) -> None:
    """DeleteGroups writes tombstones; its answer carries each group's error code, whether the
    tombstones replicate at once (one replica) or later."""
    c: Coordinator = request.getfixturevalue(fixture)
    committed = commit(c, "gone", 3)
    c.follower_fetched(c.partition.log.log_end_offset)
    assert commit_code(answer(committed)) == 0
    result = c.request(delete_groups, 2, {"groups_names": ["gone", "never-was"]})
    if fixture == "replicated":
        assert answer(result) is None, "the tombstones are not on broker 1 yet"
        c.follower_fetched(c.partition.log.log_end_offset)
    body = answer(result)
    assert body is not None
    assert [(r["group_id"], r["error_code"]) for r in body["results"]] == [
        ("gone", 0), ("never-was", ErrorCode.GROUP_ID_NOT_FOUND)]
