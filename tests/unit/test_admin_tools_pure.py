"""Pure parts of `samsa leader-election` and the `samsa topics --describe` filters."""

from __future__ import annotations

import argparse

import pytest

from samsa.cli import leader_election as le
from samsa.cli import topics
from samsa.cli.common import CliError
from samsa.protocol.errors import ErrorCode

# --------------------------------------------------------------------------- leader election


def test_election_json() -> None:
    text = '{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "bar", "partition": 0}]}'
    assert le.parse_election_json(text) == [("foo", 1), ("bar", 0)]
    assert le.parse_election_json('{"partitions": []}') == []


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("nope", "not valid JSON"),
        ("[1]", '"partitions" list'),
        ('{"topics": []}', '"partitions" list'),
        ('{"partitions": {}}', "must be a list"),
        ('{"partitions": [{"partition": 0}]}', 'partitions[0] needs a non-empty "topic"'),
        ('{"partitions": [{"topic": "a", "partition": "0"}]}', "non-negative integer"),
        ('{"partitions": [{"topic": "a", "partition": -3}]}', "non-negative integer"),
        ('{"partitions": [{"topic": "a", "partition": 0}, {"topic": "a", "partition": 0}]}',
         "duplicate partitions: a-0"),
    ],
)
def test_election_json_errors(text: str, fragment: str) -> None:
    with pytest.raises(CliError) as e:
        le.parse_election_json(text, "f.json")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_format_results() -> None:
    results = {
        ("t", 1): (0, None),
        ("t", 0): (0, None),
        ("t", 2): (int(ErrorCode.ELECTION_NOT_NEEDED), None),
        ("a", 0): (int(ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE), "preferred replica 3 is not in the ISR"),
        ("b", 4): (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None),
    }
    lines, failed = le.format_results("PREFERRED", results)
    assert failed == 2
    assert lines == [
        "Successfully completed leader election (PREFERRED) for partitions t-0, t-1",
        "Valid replica already elected for partitions t-2",
        "Error completing leader election (PREFERRED) for partition: a-0: PREFERRED_LEADER_NOT_AVAILABLE: "
        "preferred replica 3 is not in the ISR",
        "Error completing leader election (PREFERRED) for partition: b-4: UNKNOWN_TOPIC_OR_PARTITION",
    ]


def test_format_results_nothing_failed() -> None:
    lines, failed = le.format_results("UNCLEAN", {("t", 0): (int(ErrorCode.ELECTION_NOT_NEEDED), "x")})
    assert failed == 0 and lines == ["Valid replica already elected for partitions t-0"]
    assert le.format_results("UNCLEAN", {}) == ([], 0)


def parse(*argv: str) -> str:
    p = le.build_parser()
    return le.check_args(p, p.parse_args(list(argv)))


@pytest.mark.parametrize("spelling", ["preferred", "PREFERRED", "Preferred"])
def test_election_type_is_case_insensitive(spelling: str) -> None:
    assert parse("--bootstrap-server", "x:1", "--election-type", spelling, "--all-topic-partitions") == "PREFERRED"
    assert parse("--bootstrap-server", "x:1", "--election-type", "unclean", "--topic", "t", "--partition", "0",
                 "--admin.config", "f") == "UNCLEAN"


# ---------------------------------------------------------------------- topics --describe


def flags(**on: bool) -> argparse.Namespace:
    names = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
             "at_min_isr_partitions")
    return argparse.Namespace(**{n: on.get(n, False) for n in names})


def test_describe_filters() -> None:
    live = {1, 2, 3}
    healthy = (1, [1, 2, 3], [1, 2, 3])
    lagging = (1, [1, 2, 3], [1, 2])
    leaderless = (None, [1, 2, 3], [])
    dead_leader = (4, [4, 1], [4])
    ur, un = flags(under_replicated_partitions=True), flags(unavailable_partitions=True)
    umi, ami = flags(under_min_isr_partitions=True), flags(at_min_isr_partitions=True)
    assert not topics._selected(ur, *healthy, live, 2)
    assert topics._selected(ur, *lagging, live, 2)
    assert not topics._selected(un, *lagging, live, 2)
    assert topics._selected(un, *leaderless, live, 2)
    assert topics._selected(un, *dead_leader, live, 2)
    assert topics._selected(umi, *leaderless, live, 1)
    assert topics._selected(umi, *dead_leader, live, 2)
    assert not topics._selected(umi, *lagging, live, 2)
    assert topics._selected(ami, *lagging, live, 2)
    assert not topics._selected(ami, *healthy, live, 2)
    # Any matching filter selects.
    assert topics._selected(flags(under_replicated_partitions=True, unavailable_partitions=True),
                            *leaderless, live, 1)


def test_reassigning_partition_counts_target_replicas_only() -> None:
    # Moving [1,2] -> [3,4]: replicas [3,4,1,2], adding [3,4]; ISR [1,2] is the full old set.
    moving = ([3, 4, 1, 2], [3, 4], [1, 2])
    assert topics.replication_factor([3, 4, 1, 2], moving) == 2
    assert topics.replication_factor([1, 2], None) == 2
    ur = flags(under_replicated_partitions=True)
    assert not topics._selected(ur, 1, [3, 4, 1, 2], [1, 2], {1, 2, 3, 4}, 1, moving)
    assert topics._selected(ur, 1, [3, 4, 1, 2], [1, 2], {1, 2, 3, 4}, 1, None)


def test_partition_line() -> None:
    assert topics.partition_line("t", 0, 1, [1, 2], [1]) == "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1"
    assert topics.partition_line("t", 0, None, [1, 2], []) == "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: "
    assert topics.partition_line("t", 3, 1, [3, 1], [1], ([3, 1], [3], [1])) == (
        "\tTopic: t\tPartition: 3\tLeader: 1\tReplicas: 3,1\tIsr: 1\tAdding Replicas: 3\tRemoving Replicas: 1"
    )


def test_metadata_leader() -> None:
    from confluent_kafka import KafkaError

    assert topics.metadata_leader(2, None) == 2
    assert topics.metadata_leader(-1, None) is None
    assert topics.metadata_leader(2, KafkaError(KafkaError.LEADER_NOT_AVAILABLE)) is None
    assert topics.metadata_leader(2, KafkaError(KafkaError.REPLICA_NOT_AVAILABLE)) == 2
