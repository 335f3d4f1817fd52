"""ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments handlers against a
fake controller: request checks, NOT_CONTROLLER, timeouts, and the shapes Kafka answers with.
Requests and responses go through the real codec so every answer is known to encode."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from samsa.handlers import alter_partition_reassignments, elect_leaders, list_partition_reassignments
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.messages import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_codec,
)
from samsa.server.context import RequestContext, Topic
from tests.unit.fake_context import fake_context

TP = tuple[str, int]


class FakeController:
    def __init__(self, active: bool = True) -> None:
        self.active = active
        self.calls: list[tuple[str, Any]] = []
        self.election: dict[TP, tuple[int, str | None]] = {}
        self.alter_result: dict[TP, tuple[int, str | None]] | None = None
        self.ongoing: dict[TP, tuple[list[int], list[int], list[int]]] = {}
        self.delay = 0.0
        self.raise_error: Exception | None = None

    async def elect_leaders(self, election_type: int, partitions: list[TP] | None) -> dict[TP, tuple[int, str | None]]:
        self.calls.append(("elect", (election_type, partitions)))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raise_error:
            raise self.raise_error
        return dict(self.election)

    async def alter_reassignments(self, changes: dict[TP, list[int] | None]) -> dict[TP, tuple[int, str | None]]:
        self.calls.append(("alter", changes))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.raise_error:
            raise self.raise_error
        if self.alter_result is not None:
            return dict(self.alter_result)
        return {tp: (0, None) for tp in changes}

    def list_reassignments(self, partitions: list[TP] | None) -> dict[TP, tuple[list[int], list[int], list[int]]]:
        self.calls.append(("list", partitions))
        if self.raise_error:
            raise self.raise_error
        if partitions is None:
            return dict(self.ongoing)
        return {tp: s for tp, s in self.ongoing.items() if tp in partitions}


def make_ctx(version: int, controller: Any = None, topics: dict[str, Topic] | None = None) -> RequestContext:
    # A broker always has a controller object; None stands for one that is not the active one.
    return fake_context(version, controller=controller or FakeController(active=False), topics=topics or {})


def call(module: Any, version: int, body: dict[str, Any], controller: Any = None,
         topics: dict[str, Topic] | None = None) -> Any:
    """Encode the request, decode it as the broker would, handle it, encode and decode the answer."""
    frame = bytes(encode_request(module.API_KEY, version, 7, "test", body))[4:]
    _, start = decode_request_header(frame, request_codec(module.API_KEY, version).flexible)
    req = decode_request_body(module.API_KEY, version, frame, start)
    result = module.handle(make_ctx(version, controller, topics), req)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    out = bytes(encode_response(module.API_KEY, version, 7, result))
    cid, msg = decode_response(module.API_KEY, version, out[4:])
    assert cid == 7
    return msg


async def _await(result: Any) -> Any:
    return await result


def election_results(msg: Any) -> dict[TP, tuple[int, str | None]]:
    return {(t.topic, p.partition_id): (p.error_code, p.error_message)
            for t in msg.replica_election_results for p in t.partition_result}


def alter_results(msg: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in msg.responses for p in t.partitions]


# ------------------------------------------------------------------------------ ElectLeaders


def test_elect_leaders_versions_are_advertised() -> None:
    assert (elect_leaders.API_KEY, elect_leaders.MIN_VERSION, elect_leaders.MAX_VERSION) == (43, 0, 2)
    assert (alter_partition_reassignments.API_KEY, alter_partition_reassignments.MAX_VERSION) == (45, 1)
    assert (list_partition_reassignments.API_KEY, list_partition_reassignments.MAX_VERSION) == (46, 0)


@pytest.mark.parametrize("controller", [None, FakeController(active=False)], ids=["none", "inactive"])
@pytest.mark.parametrize("version", [1, 2])
def test_elect_leaders_not_controller(controller: Any, version: int) -> None:
    body = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0, 1]}], "timeout": 1000}
    msg = call(elect_leaders, version, body, controller)
    assert msg.error_code == ErrorCode.NOT_CONTROLLER
    assert {tp: r[0] for tp, r in election_results(msg).items()} == {("t", 0): 41, ("t", 1): 41}


def test_elect_leaders_v0_not_controller_is_per_partition() -> None:
    msg = call(elect_leaders, 0, {"topic_partitions": [{"topic": "t", "partitions": [3]}], "timeout": 1000})
    assert election_results(msg)[("t", 3)][0] == ErrorCode.NOT_CONTROLLER


def test_elect_leaders_v0_is_preferred() -> None:
    c = FakeController()
    c.election = {("t", 0): (0, None)}
    call(elect_leaders, 0, {"topic_partitions": [{"topic": "t", "partitions": [0]}], "timeout": 1000}, c)
    assert c.calls == [("elect", (0, [("t", 0)]))]


def test_elect_leaders_passes_results_through_and_dedupes() -> None:
    c = FakeController()
    c.election = {
        ("a", 0): (0, None),
        ("a", 1): (int(ErrorCode.ELECTION_NOT_NEEDED), "Leader election not needed"),
        ("b", 0): (int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), "preferred replica 2 is not in the ISR"),
    }
    body = {"election_type": 0, "timeout": 1000, "topic_partitions": [
        {"topic": "a", "partitions": [0, 1, 0]}, {"topic": "b", "partitions": [0]}]}
    msg = call(elect_leaders, 2, body, c)
    assert c.calls == [("elect", (0, [("a", 0), ("a", 1), ("b", 0)]))]
    assert msg.error_code == 0
    assert election_results(msg) == c.election
    assert [t.topic for t in msg.replica_election_results] == ["a", "b"]


def test_elect_leaders_unclean_type_is_passed() -> None:
    c = FakeController()
    c.election = {("t", 0): (0, None)}
    call(elect_leaders, 1, {"election_type": 1, "timeout": 1000, "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert c.calls == [("elect", (1, [("t", 0)]))]


def test_elect_leaders_unknown_election_type() -> None:
    c = FakeController()
    msg = call(elect_leaders, 1, {"election_type": 5, "timeout": 1000, "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert msg.error_code == ErrorCode.INVALID_REQUEST and c.calls == []


def test_elect_leaders_all_partitions_omits_election_not_needed() -> None:
    c = FakeController()
    c.election = {("a", 0): (int(ErrorCode.ELECTION_NOT_NEEDED), None), ("a", 1): (0, None),
                  ("b", 2): (int(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE), None)}
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 1000, "topic_partitions": None}, c)
    assert c.calls == [("elect", (0, None))]
    assert {tp: r[0] for tp, r in election_results(msg).items()} == {("a", 1): 0, ("b", 2): 83}


def test_elect_leaders_empty_list_asks_nothing() -> None:
    c = FakeController()
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 1000, "topic_partitions": []}, c)
    assert msg.error_code == 0 and msg.replica_election_results == [] and c.calls == []


def test_elect_leaders_missing_result_is_an_error() -> None:
    c = FakeController()
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 1000,
                                  "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert election_results(msg)[("t", 0)][0] == ErrorCode.UNKNOWN_SERVER_ERROR


def test_elect_leaders_timeout() -> None:
    c = FakeController()
    c.delay = 1.0
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 50,
                                  "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert msg.error_code == 0
    assert election_results(msg)[("t", 0)][0] == ErrorCode.REQUEST_TIMED_OUT


def test_elect_leaders_controller_error() -> None:
    c = FakeController()
    c.raise_error = KafkaError(ErrorCode.NOT_CONTROLLER, "resigned")
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 1000,
                                  "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert msg.error_code == ErrorCode.NOT_CONTROLLER
    assert election_results(msg)[("t", 0)] == (41, "resigned")


def test_elect_leaders_controller_crash_is_answered() -> None:
    c = FakeController()
    c.raise_error = RuntimeError("boom")
    msg = call(elect_leaders, 2, {"election_type": 0, "timeout": 1000,
                                  "topic_partitions": [{"topic": "t", "partitions": [0]}]}, c)
    assert msg.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


# -------------------------------------------------------------- AlterPartitionReassignments


def alter_body(*parts: tuple[str, int, list[int] | None], version: int = 0, allow: bool = True) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for t, p, r in parts:
        topics.setdefault(t, []).append({"partition_index": p, "replicas": r})
    body: dict[str, Any] = {"timeout": 1000, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    if version >= 1:
        body["allow_replication_factor_change"] = allow
    return body


@pytest.mark.parametrize("version", [0, 1])
def test_alter_not_controller(version: int) -> None:
    msg = call(alter_partition_reassignments, version, alter_body(("t", 0, [1, 2]), version=version),
               FakeController(active=False))
    assert msg.error_code == ErrorCode.NOT_CONTROLLER
    assert alter_results(msg) == [("t", 0, 41)]


def test_alter_submits_targets_and_cancellations() -> None:
    c = FakeController()
    msg = call(alter_partition_reassignments, 0, alter_body(("t", 0, [1, 2]), ("t", 1, None), ("u", 0, [3])), c)
    assert c.calls == [("alter", {("t", 0): [1, 2], ("t", 1): None, ("u", 0): [3]})]
    assert msg.error_code == 0
    assert alter_results(msg) == [("t", 0, 0), ("t", 1, 0), ("u", 0, 0)]


def test_alter_controller_errors_per_partition() -> None:
    c = FakeController()
    c.alter_result = {("t", 0): (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), "nothing to cancel"),
                      ("t", 1): (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None)}
    msg = call(alter_partition_reassignments, 0, alter_body(("t", 0, None), ("t", 1, [1])), c)
    assert alter_results(msg) == [("t", 0, 85), ("t", 1, 3)]
    assert msg.responses[0].partitions[0].error_message == "nothing to cancel"


@pytest.mark.parametrize("replicas", [[], [1, 1], [1, -2]], ids=["empty", "duplicate", "negative"])
def test_alter_invalid_targets_never_reach_the_controller(replicas: list[int]) -> None:
    c = FakeController()
    msg = call(alter_partition_reassignments, 0, alter_body(("t", 0, replicas), ("t", 1, [1, 2])), c)
    assert alter_results(msg) == [("t", 0, ErrorCode.INVALID_REPLICA_ASSIGNMENT), ("t", 1, 0)]
    assert c.calls == [("alter", {("t", 1): [1, 2]})]


def test_alter_duplicate_partition_is_invalid_request() -> None:
    c = FakeController()
    body = {"timeout": 1000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [1]}]},
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [2]}, {"partition_index": 1, "replicas": [2]}]},
    ]}
    msg = call(alter_partition_reassignments, 0, body, c)
    assert alter_results(msg) == [("t", 0, 42), ("t", 0, 42), ("t", 1, 0)]
    assert c.calls == [("alter", {("t", 1): [2]})]


def test_alter_nothing_valid_asks_nothing() -> None:
    c = FakeController()
    msg = call(alter_partition_reassignments, 0, alter_body(("t", 0, [])), c)
    assert alter_results(msg) == [("t", 0, 39)] and c.calls == []


def test_alter_v1_refuses_replication_factor_change() -> None:
    import uuid

    c = FakeController()
    topics = {"t": Topic("t", uuid.uuid4(), {0: [1, 2], 1: [1, 2], 2: [3, 4, 1, 2]})}
    c.ongoing = {("t", 2): ([3, 4, 1, 2], [3, 4], [1, 2])}
    body = alter_body(("t", 0, [2, 3]), ("t", 1, [1, 2, 3]), ("t", 2, [3, 4]), ("t", 9, [1]), ("t", 1000, None),
                      version=1, allow=False)
    msg = call(alter_partition_reassignments, 1, body, c, topics)
    assert msg.allow_replication_factor_change is False
    assert alter_results(msg) == [("t", 0, 0), ("t", 1, ErrorCode.INVALID_REPLICATION_FACTOR), ("t", 2, 0),
                                  ("t", 9, 0), ("t", 1000, 0)]
    assert msg.responses[0].partitions[1].error_message == "The replication factor would change from 2 to 3"
    alter_calls = [arg for name, arg in c.calls if name == "alter"]
    assert alter_calls == [{("t", 0): [2, 3], ("t", 2): [3, 4], ("t", 9): [1], ("t", 1000): None}]


def test_alter_v1_default_allows_change() -> None:
    import uuid

    c = FakeController()
    topics = {"t": Topic("t", uuid.uuid4(), {0: [1]})}
    msg = call(alter_partition_reassignments, 1, alter_body(("t", 0, [1, 2]), version=1, allow=True), c, topics)
    assert alter_results(msg) == [("t", 0, 0)] and msg.allow_replication_factor_change is True


def test_alter_timeout() -> None:
    c = FakeController()
    c.delay = 1.0
    body = alter_body(("t", 0, [1]), ("t", 1, []))
    body["timeout"] = 50
    msg = call(alter_partition_reassignments, 0, body, c)
    assert alter_results(msg) == [("t", 0, ErrorCode.REQUEST_TIMED_OUT), ("t", 1, 39)]


def test_alter_controller_error_keeps_validation_errors() -> None:
    c = FakeController()
    c.raise_error = KafkaError(ErrorCode.NOT_CONTROLLER)
    msg = call(alter_partition_reassignments, 0, alter_body(("t", 0, [1]), ("t", 1, [])), c)
    assert msg.error_code == 41
    assert alter_results(msg) == [("t", 0, 41), ("t", 1, 39)]


# --------------------------------------------------------------- ListPartitionReassignments


def listed(msg: Any) -> dict[TP, tuple[list[int], list[int], list[int]]]:
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in msg.topics for p in t.partitions}


def test_list_not_controller() -> None:
    msg = call(list_partition_reassignments, 0, {"timeout": 1000, "topics": None}, None)
    assert msg.error_code == ErrorCode.NOT_CONTROLLER and msg.topics == []


def test_list_all_and_selected() -> None:
    c = FakeController()
    c.ongoing = {("b", 0): ([3, 1], [3], [1]), ("a", 1): ([2, 3, 1], [2, 3], [1])}
    msg = call(list_partition_reassignments, 0, {"timeout": 1000, "topics": None}, c)
    assert msg.error_code == 0 and listed(msg) == c.ongoing
    assert [t.name for t in msg.topics] == ["a", "b"]
    msg = call(list_partition_reassignments, 0, {"timeout": 1000, "topics": [
        {"name": "a", "partition_indexes": [0, 1, 1]}, {"name": "zz", "partition_indexes": [0]}]}, c)
    assert listed(msg) == {("a", 1): ([2, 3, 1], [2, 3], [1])}
    assert ("list", [("a", 0), ("a", 1), ("zz", 0)]) in c.calls


def test_list_empty_request() -> None:
    c = FakeController()
    msg = call(list_partition_reassignments, 0, {"timeout": 1000, "topics": []}, c)
    assert msg.error_code == 0 and msg.topics == [] and c.calls == []


def test_list_controller_error() -> None:
    c = FakeController()
    c.raise_error = KafkaError(ErrorCode.NOT_CONTROLLER, "moved")
    msg = call(list_partition_reassignments, 0, {"timeout": 1000, "topics": None}, c)
    assert (msg.error_code, msg.error_message) == (41, "moved")
