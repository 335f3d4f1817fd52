"""The pure parts of `samsa reassign-partitions`: file parsing, proposals, throttles, output."""

from __future__ import annotations

import json
import random

import pytest

from samsa.cli import reassign_plan as plan
from samsa.cli.common import CliError


def doc(*parts: dict, version: int | None = 1) -> str:
    d: dict = {"partitions": list(parts)}
    if version is not None:
        d["version"] = version
    return json.dumps(d)


# ------------------------------------------------------------------------- topics to move


def test_topics_to_move() -> None:
    text = '{"topics": [{"topic": "foo"}, {"topic": "bar"}], "version": 1}'
    assert plan.parse_topics_to_move(text) == ["foo", "bar"]
    assert plan.parse_topics_to_move('{"topics": [{"topic": "foo"}]}') == ["foo"]


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("{not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"version": 1}', '"topics" list'),
        ('{"topics": {"topic": "a"}}', '"topics" list'),
        ('{"topics": ["a"]}', "topics[0]"),
        ('{"topics": [{"topic": ""}]}', "topics[0]"),
        ('{"topics": [{"name": "a"}]}', "topics[0]"),
        ('{"topics": []}', "empty"),
        ('{"topics": [{"topic": "a"}], "version": 2}', 'unsupported "version" 2'),
        ('{"topics": [{"topic": "a"}, {"topic": "b"}, {"topic": "a"}]}', "duplicate entries: a"),
    ],
)
def test_topics_to_move_errors(text: str, fragment: str) -> None:
    with pytest.raises(CliError, match=None) as e:
        plan.parse_topics_to_move(text, "move.json")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_broker_list() -> None:
    assert plan.parse_broker_list("0,1, 2") == [0, 1, 2]
    for bad in ("0,x", "", "1,,2", "-1"):
        with pytest.raises(CliError) as e:
            plan.parse_broker_list(bad)
        assert e.value.exit_code == 2
    with pytest.raises(CliError, match="duplicate entries: 1"):
        plan.parse_broker_list("1,2,1")


# --------------------------------------------------------------------------- reassignment


def test_reassignment_parses_in_order() -> None:
    text = doc({"topic": "b", "partition": 1, "replicas": [3, 1]},
               {"topic": "a", "partition": 0, "replicas": [2], "log_dirs": ["any"]})
    r = plan.parse_reassignment(text)
    assert list(r.targets.items()) == [(("b", 1), [3, 1]), (("a", 0), [2])]
    assert r.log_dirs == {("a", 0): ["any"]}
    assert r.topics == ["a", "b"]
    assert plan.parse_reassignment(doc({"topic": "a", "partition": 0, "replicas": [1]}, version=None)).targets


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("", "not valid JSON"),
        ('{"version": 1}', '"partitions" list'),
        (doc(), "Partition reassignment list cannot be empty"),
        (doc({"topic": "a", "partition": 0, "replicas": [1]}, version=3), 'unsupported "version" 3'),
        (doc("x"), "partitions[0] must be an object"),
        (doc({"partition": 0, "replicas": [1]}), 'partitions[0] needs a non-empty "topic"'),
        (doc({"topic": "a", "replicas": [1]}), '"partition"'),
        (doc({"topic": "a", "partition": -1, "replicas": [1]}), '"partition"'),
        (doc({"topic": "a", "partition": True, "replicas": [1]}), '"partition"'),
        (doc({"topic": "a", "partition": 0}), 'partition a-0 needs a "replicas" list'),
        (doc({"topic": "a", "partition": 0, "replicas": ["1"]}), '"replicas" list of broker ids'),
        (doc({"topic": "a", "partition": 0, "replicas": []}), 'empty "replicas"'),
        (doc({"topic": "a", "partition": 0, "replicas": [1, -1]}), "negative broker id"),
        (doc({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}), "one entry per replica"),
        (doc({"topic": "a", "partition": 0, "replicas": [1], "log_dirs": "any"}), "not a list of strings"),
        (doc({"topic": "a", "partition": 0, "replicas": [1]}, {"topic": "a", "partition": 0, "replicas": [2]}),
         "duplicate topic partitions: a-0"),
        (doc({"topic": "a", "partition": 0, "replicas": [1, 2, 1]}, {"topic": "b", "partition": 3, "replicas": [4, 4]}),
         "may not contain duplicate entries: a-0 contains 1,2,1; b-3 contains 4,4"),
    ],
)
def test_reassignment_errors(text: str, fragment: str) -> None:
    with pytest.raises(CliError) as e:
        plan.parse_reassignment(text, "r.json")
    assert fragment in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------- output


def test_reassignment_json_is_kafkas_format() -> None:
    out = plan.format_reassignment_json({("b", 0): [2, 1], ("a", 10): [1], ("a", 2): [3, 1, 2]})
    assert out == (
        '{"version":1,"partitions":['
        '{"topic":"a","partition":2,"replicas":[3,1,2],"log_dirs":["any","any","any"]},'
        '{"topic":"a","partition":10,"replicas":[1],"log_dirs":["any"]},'
        '{"topic":"b","partition":0,"replicas":[2,1],"log_dirs":["any","any"]}]}'
    )
    # What --generate prints can be fed back to --execute.
    assert plan.parse_reassignment(out).targets == {("a", 2): [3, 1, 2], ("a", 10): [1], ("b", 0): [2, 1]}


def test_generate_and_rollback_output() -> None:
    cur = {("t", 0): [0]}
    new = {("t", 0): [1]}
    assert plan.generate_output(cur, new).splitlines() == [
        "Current partition replica assignment",
        plan.format_reassignment_json(cur),
        "",
        "Proposed partition reassignment configuration",
        plan.format_reassignment_json(new),
    ]
    assert plan.rollback_output(cur).splitlines() == [
        "Current partition replica assignment",
        "",
        plan.format_reassignment_json(cur),
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
    ]
    assert plan.partition_list([("b", 0), ("a", 10), ("a", 2)]) == "a-2,a-10,b-0"


# ------------------------------------------------------------------------------ generate


def test_usable_brokers() -> None:
    cluster = [plan.Broker(0, "r1"), plan.Broker(1, "r2"), plan.Broker(2, None), plan.Broker(3, "r1")]
    assert plan.usable_brokers(cluster, [3, 0, 7], rack_aware=True) == {0: "r1", 3: "r1"}
    assert plan.usable_brokers(cluster, [0, 1, 2], rack_aware=False) == {0: None, 1: None, 2: None}
    with pytest.raises(CliError, match="--disable-rack-aware"):
        plan.usable_brokers(cluster, [0, 1, 2], rack_aware=True)


def test_propose_keeps_partition_count_and_replication_factor() -> None:
    current = {("a", 0): [0, 1], ("a", 1): [1, 0], ("a", 2): [0, 1], ("b", 0): [0], ("b", 1): [0]}
    brokers = {3: None, 4: None, 5: None}
    proposed = plan.propose(current, brokers, rng=random.Random(1))
    assert set(proposed) == set(current)
    for tp, replicas in proposed.items():
        assert len(replicas) == len(current[tp]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= {3, 4, 5}
    # Leaders spread round robin over the brokers.
    assert sorted(proposed[("a", p)][0] for p in range(3)) == [3, 4, 5]


def test_propose_matches_assign_replicas() -> None:
    from samsa.controller.decisions import assign_replicas

    current = {("t", p): [0, 1] for p in range(4)}
    brokers = {0: None, 1: None, 2: None}
    got = plan.propose(current, brokers, rng=random.Random(7))
    expected = assign_replicas(brokers, 4, 2, rng=random.Random(7))
    assert got == {("t", p): expected[p] for p in range(4)}


def test_propose_rack_aware() -> None:
    current = {("t", p): [0, 1] for p in range(6)}
    brokers = {0: "r1", 1: "r1", 2: "r2", 3: "r2"}
    racks = brokers
    for replicas in plan.propose(current, brokers, rng=random.Random(3)).values():
        assert {racks[r] for r in replicas} == {"r1", "r2"}


def test_propose_too_few_brokers() -> None:
    with pytest.raises(CliError, match="topic t: replication factor: 3 larger than available brokers: 2"):
        plan.propose({("t", 0): [0, 1, 2]}, {0: None, 1: None})


# ----------------------------------------------------------------------------- throttles


def test_move_map_and_throttles() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("u", 0): [1]}
    targets = {("t", 0): [3, 4], ("t", 1): [2, 3], ("u", 0): [1, 2]}
    moves = plan.move_map({}, targets, current)
    assert moves[("t", 0)] == plan.PartitionMove(frozenset({1, 2}), frozenset({3, 4}))
    assert moves[("t", 1)] == plan.PartitionMove(frozenset({2, 3}), frozenset())
    assert plan.leader_throttles(moves) == {"t": "0:1,0:2,1:2,1:3", "u": "0:1"}
    assert plan.follower_throttles(moves) == {"t": "0:3,0:4", "u": "0:2"}
    assert plan.reassigning_brokers(moves) == [1, 2, 3, 4]


def test_move_map_includes_ongoing_reassignments() -> None:
    # t-0 is moving from [1,2] to [3,4] (replicas RS = [3,4,1,2]); v-0 is moving elsewhere.
    ongoing = {("t", 0): ([3, 4, 1, 2], [3, 4], [1, 2]), ("v", 0): ([5, 1], [5], [1])}
    targets = {("t", 0): [2, 5]}
    current = {("t", 0): [3, 4, 1, 2]}
    moves = plan.move_map(ongoing, targets, current)
    assert moves[("t", 0)] == plan.PartitionMove(frozenset({1, 2}), frozenset({5}))
    assert moves[("v", 0)] == plan.PartitionMove(frozenset({1}), frozenset({5}))
    assert plan.leader_throttles(moves) == {"t": "0:1,0:2", "v": "0:1"}


def test_move_map_unknown_partition() -> None:
    with pytest.raises(CliError, match="Unable to find partition: t-7"):
        plan.move_map({}, {("t", 7): [1]}, {})


# -------------------------------------------------------------------------------- verify


def test_verify_states_and_lines() -> None:
    targets = {("t", 0): [2, 3], ("t", 1): [1], ("t", 2): [4], ("a", 0): [1]}
    ongoing = {("t", 0): ([2, 3, 1], [2, 3], [1])}
    current = {("t", 1): [1], ("t", 2): [1, 2], ("a", 0): [1]}
    states = plan.verify_states(targets, ongoing, current)
    assert states[("t", 0)] == plan.PartitionState([2, 3, 1], [2, 3], False)
    assert states[("t", 2)].done
    assert plan.format_states(states) == [
        "Reassignment of partition a-0 is completed.",
        "Reassignment of partition t-0 is still in progress.",
        "Reassignment of partition t-1 is completed.",
        "There is no active reassignment of partition t-2, but replica set is [1,2] rather than [4].",
    ]
    with pytest.raises(CliError, match="Unable to find partition: x-0"):
        plan.verify_states({("x", 0): [1]}, {}, {})


def test_format_ongoing() -> None:
    assert plan.format_ongoing({}) == ["No partition reassignments found."]
    assert plan.format_ongoing({("t", 1): ([3, 1], [3], [1]), ("a", 0): ([2, 1], [2], [])}) == [
        "Current partition reassignments:",
        "a-0: replicas: 2,1. adding: 2. removing: .",
        "t-1: replicas: 3,1. adding: 3. removing: 1.",
    ]


# --------------------------------------------------------------------------- log dir moves


class _Msg:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def _described(*dirs: tuple[str, int, list[tuple[str, int, bool]]]) -> _Msg:
    """A DescribeLogDirs answer: (log dir, error code, [(topic, partition, is future)])."""
    return _Msg(results=[_Msg(log_dir=d, error_code=code, topics=[
        _Msg(name=t, partitions=[_Msg(partition_index=p, is_future_key=f)]) for t, p, f in parts])
        for d, code, parts in dirs])


def test_log_dir_moves_and_their_requests() -> None:
    r = plan.parse_reassignment(doc({"topic": "b", "partition": 1, "replicas": [3, 1], "log_dirs": ["/d2", "any"]},
                                    {"topic": "a", "partition": 0, "replicas": [1, 3], "log_dirs": ["/d1", "/d2"]},
                                    {"topic": "a", "partition": 2, "replicas": [3]}))
    moves = plan.replica_log_dirs(r)
    assert moves == {("b", 1, 3): "/d2", ("a", 0, 1): "/d1", ("a", 0, 3): "/d2"}
    assert plan.sort_replicas(moves) == [("a", 0, 1), ("a", 0, 3), ("b", 1, 3)]
    assert plan.replica_str(("a", 0, 3)) == "a-0-3"
    assert plan.alter_log_dirs_requests(moves) == {
        1: {"dirs": [{"path": "/d1", "topics": [{"name": "a", "partitions": [0]}]}]},
        3: {"dirs": [{"path": "/d2", "topics": [{"name": "a", "partitions": [0]}, {"name": "b", "partitions": [1]}]}]},
    }


def test_log_dir_move_states_and_lines() -> None:
    moves = {("t", 0, 0): "/b", ("t", 1, 0): "/b", ("t", 2, 0): "/c", ("t", 3, 0): "/b", ("t", 4, 0): "/b",
             ("t", 5, 0): "/b", ("t", 0, 9): "/b"}
    described = {0: _described(("/a", 0, [("t", 1, False), ("t", 2, False), ("t", 3, False), ("u", 5, False)]),
                               ("/b", 0, [("t", 0, False), ("t", 1, True), ("t", 2, True)]),
                               ("/c", 56, [("t", 5, False)]))}  # (an offline dir is skipped)
    states = plan.move_states(moves, described)
    assert [states[("t", i, 0)].done for i in range(6)] == [True, False, False, True, False, False]
    assert not states[("t", 0, 9)].done
    assert plan.format_move_states(states) == [
        "Reassignment of replica t-0-0 completed successfully.",
        "Reassignment of replica t-1-0 is still in progress.",
        "Partition t-2 on broker 0 is being moved to log dir /b instead of /c.",
        "Partition t-3 on broker 0 is not being moved from log dir /a to /b.",
        "Partition t-4 is not found in any live log dir on broker 0. There is likely an offline log directory on "
        "the broker.",
        "Partition t-5 is not found in any live log dir on broker 0. There is likely an offline log directory on "
        "the broker.",
        "Partition t-0 cannot be found in any live log directory on broker 9.",
    ]
