"""TxnOffsetCommit through the real handler, GroupManager and a real `__consumer_offsets` log:
the records are a transactional batch of the producer, the producer is verified first, the
marker (on_txn_marker, or a control batch in the log at load) commits or aborts, and the
partition is not compacted while offsets are pending."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest

from samsa.handlers import offset_fetch, txn_offset_commit
from samsa.protocol.batch import parse_header
from samsa.protocol.control import control_key
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import decode_request_body, decode_request_header, encode_request, request_codec
from samsa.protocol.records import build_batch, scan_batches
from samsa.server.context import Op, ResourceType
from samsa.server.replica_manager import AppendOutcome
from tests.unit.fake_context import fake_context
from tests.unit.test_group_manager import TOPIC, Coordinator, answer, commit

E = ErrorCode
PID, EPOCH = 7000, 3


class FakeTransactions:
    """The transaction coordinator's `verify`: records the calls, answers `code`."""

    def __init__(self) -> None:
        self.code = E.NONE
        self.calls: list[tuple[Any, ...]] = []

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str, partition: int,
                     *, add: bool = False) -> ErrorCode:
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition, add))
        return self.code


class DenyList:
    """An authorizer allowing everything but the (operation, resource type, name)s given."""

    def __init__(self, *denied: tuple[Op, ResourceType, str]) -> None:
        self.denied = set(denied)

    def authorize(self, principal: str, host: str, op: Op, rtype: ResourceType, name: str, api_key: int,
                  log_denied: bool = True) -> bool:
        return (op, rtype, name) not in self.denied


@pytest.fixture
def c(tmp_path: Path) -> Coordinator:
    return Coordinator(tmp_path, [0])


def call(c: Coordinator, module: Any, version: int, body: dict[str, Any], *, txns: FakeTransactions | None = None,
         authorizer: Any = None) -> Any:
    frame = bytes(encode_request(module.API_KEY, version, 7, "client", body))[4:]
    header, start = decode_request_header(frame, request_codec(module.API_KEY, version).flexible)
    req = decode_request_body(module.API_KEY, version, frame, start)
    ctx = fake_context(header=header, groups=c.groups, topics=c.broker.topics,
                       transactions=txns or FakeTransactions(), authorizer=authorizer)
    result = module.handle(ctx, req)
    if asyncio.iscoroutine(result):
        result = asyncio.run(result)
    return answer(result)


def txn_commit(c: Coordinator, offsets: dict[tuple[str, int], int], *, version: int = 3, group: str = "g",
               txns: FakeTransactions | None = None, authorizer: Any = None) -> dict[tuple[str, int], int]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (t, p), off in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off, "committed_metadata": ""})
    body = {"transactional_id": "tx", "group_id": group, "producer_id": PID, "producer_epoch": EPOCH,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    r = call(c, txn_offset_commit, version, body, txns=txns, authorizer=authorizer)
    return {(t["name"], p["partition_index"]): p["error_code"] for t in r["topics"] for p in t["partitions"]}


def fetch(c: Coordinator, partitions: list[int], *, stable: bool = False) -> dict[int, tuple[int, int]]:
    r = call(c, offset_fetch, 8, {"groups": [{"group_id": "g", "topics": [
        {"name": TOPIC, "partition_indexes": partitions}]}], "require_stable": stable})
    return {p["partition_index"]: (p["committed_offset"], p["error_code"])
            for g in r["groups"] for t in g["topics"] for p in t["partitions"]}


def last_batch(c: Coordinator) -> Any:
    lg = c.partition.log
    sl = lg.read(lg.log_start_offset, 1 << 20)
    assert sl is not None
    data = lg.read_bytes(sl)
    pos, _ = scan_batches(data)[-1]
    return parse_header(data, pos)


def append_marker(c: Coordinator, commit: bool) -> None:
    """A control batch of the producer, as part A's WriteTxnMarkers path appends it."""
    buf = bytearray(build_batch([(control_key(commit), struct.pack(">hi", 0, 5), [], 0)], producer_id=PID,
                                producer_epoch=EPOCH, base_sequence=-1, transactional=True, control=True))
    assert c.partition.append(buf, scan_batches(buf), log_append_time=False).error == 0


def reload(c: Coordinator) -> None:
    """Replay the partition into a fresh shard, as on becoming its leader again."""
    c.groups.shards.pop(0)
    c.groups.on_role(c.partition)
    assert 0 in c.groups.shards


def test_records_are_a_transactional_batch_and_the_marker_commits(c: Coordinator) -> None:
    assert answer(commit(c, "g", 5))["topics"][0]["partitions"][0]["error_code"] == 0
    txns = FakeTransactions()
    assert txn_commit(c, {(TOPIC, 0): 10}, txns=txns) == {(TOPIC, 0): 0}
    assert txns.calls == [("tx", PID, EPOCH, "__consumer_offsets", 0, False)]
    h = last_batch(c)
    assert (h.is_transactional, h.is_control, h.producer_id, h.producer_epoch, h.base_sequence) == (
        True, False, PID, EPOCH, -1)
    assert fetch(c, [0]) == {0: (5, 0)}
    assert fetch(c, [0], stable=True) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    c.groups.on_txn_marker(0, PID, EPOCH, True)
    assert fetch(c, [0], stable=True) == {0: (10, 0)}


def test_v5_verifies_with_add(c: Coordinator) -> None:
    txns = FakeTransactions()
    assert txn_commit(c, {(TOPIC, 0): 10}, version=5, txns=txns) == {(TOPIC, 0): 0}
    assert txns.calls == [("tx", PID, EPOCH, "__consumer_offsets", 0, True)]


def test_load_replays_markers_from_the_log(c: Coordinator) -> None:
    commit(c, "g", 5)
    txn_commit(c, {(TOPIC, 0): 10})
    reload(c)
    assert fetch(c, [0], stable=True) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT)}  # still open
    append_marker(c, commit=True)
    reload(c)
    assert fetch(c, [0], stable=True) == {0: (10, 0)}
    txn_commit(c, {(TOPIC, 0): 20})
    append_marker(c, commit=False)
    reload(c)
    assert fetch(c, [0], stable=True) == {0: (10, 0)}


@pytest.mark.parametrize(("code", "version", "answered"), [
    (E.TRANSACTION_ABORTABLE, 3, E.INVALID_TXN_STATE),
    (E.TRANSACTION_ABORTABLE, 4, E.TRANSACTION_ABORTABLE),
    (E.TRANSACTION_ABORTABLE, 5, E.TRANSACTION_ABORTABLE),
    (E.PRODUCER_FENCED, 3, E.INVALID_PRODUCER_EPOCH),
    (E.INVALID_TXN_STATE, 0, E.INVALID_TXN_STATE),
    (E.NETWORK_EXCEPTION, 3, E.COORDINATOR_LOAD_IN_PROGRESS),
    (E.NETWORK_EXCEPTION, 1, E.COORDINATOR_NOT_AVAILABLE),
])
def test_a_refused_verification_is_answered_on_every_partition(c: Coordinator, code: ErrorCode, version: int,
                                                               answered: ErrorCode) -> None:
    txns = FakeTransactions()
    txns.code = code
    end = c.partition.log.log_end_offset
    got = txn_commit(c, {(TOPIC, 0): 10, ("missing", 0): 1}, version=version, txns=txns)
    assert got == {(TOPIC, 0): answered, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.partition.log.log_end_offset == end  # nothing written
    assert not c.groups.shards[0].has_pending_transactions


def test_authorization(c: Coordinator) -> None:
    txns = FakeTransactions()
    deny_txn = DenyList((Op.WRITE, ResourceType.TRANSACTIONAL_ID, "tx"))
    assert txn_commit(c, {(TOPIC, 0): 1}, txns=txns, authorizer=deny_txn) == {
        (TOPIC, 0): E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    deny_group = DenyList((Op.READ, ResourceType.GROUP, "g"))
    assert txn_commit(c, {(TOPIC, 0): 1}, txns=txns, authorizer=deny_group) == {
        (TOPIC, 0): E.GROUP_AUTHORIZATION_FAILED}
    deny_topic = DenyList((Op.READ, ResourceType.TOPIC, TOPIC))
    assert txn_commit(c, {(TOPIC, 0): 1}, txns=txns, authorizer=deny_topic) == {
        (TOPIC, 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert txns.calls == []  # refused before the transaction coordinator is asked
    c.broker.topics["other"] = type(c.broker.topics[TOPIC])(name="other", partitions={0: [0]},
                                                            topic_id=c.broker.topics[TOPIC].topic_id)
    assert txn_commit(c, {(TOPIC, 0): 1, (TOPIC, 9): 1, ("other", 0): 2}, txns=txns, authorizer=deny_topic) == {
        (TOPIC, 0): E.TOPIC_AUTHORIZATION_FAILED, (TOPIC, 9): E.TOPIC_AUTHORIZATION_FAILED, ("other", 0): 0}
    assert txn_commit(c, {(TOPIC, 9): 1, (TOPIC, 0): 3}, txns=txns) == {
        (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 0): 0}
    assert len(txns.calls) == 2
    assert txn_commit(c, {(TOPIC, 0): 3}, group="", txns=txns) == {(TOPIC, 0): E.INVALID_GROUP_ID}


def test_a_failed_append_answers_the_error_and_leaves_nothing_pending(c: Coordinator,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(c.partition, "append", lambda *a, **k: AppendOutcome(E.INVALID_PRODUCER_EPOCH))
    assert txn_commit(c, {(TOPIC, 0): 10}) == {(TOPIC, 0): E.INVALID_PRODUCER_EPOCH}
    assert not c.groups.shards[0].has_pending_transactions
    monkeypatch.setattr(c.partition, "append", lambda *a, **k: AppendOutcome(E.NOT_LEADER_OR_FOLLOWER))
    assert txn_commit(c, {(TOPIC, 0): 10}) == {(TOPIC, 0): E.NOT_COORDINATOR}
    monkeypatch.undo()
    c.groups.on_txn_marker(0, PID, EPOCH, True)  # the zombie's offsets were never written: none commit
    assert fetch(c, [0]) == {0: (-1, 0)}


def test_a_marker_without_a_shard_is_ignored(c: Coordinator) -> None:
    c.groups.on_txn_marker(3, PID, EPOCH, True)  # (no such partition led here)
    c.groups.on_txn_marker(0, PID + 1, EPOCH, False)  # nothing pending for that producer
    assert c.groups.shards[0].drain_batches() == []
