"""`samsa consumer-groups`: Kafka's flags, messages and tables; groups made by real confluent-kafka consumers.

The first half needs no broker (argument checks, parsers, table layout). The second half uses the
session broker: a group is made by a consumer that subscribes, is assigned every partition and
commits chosen offsets; closing it leaves the group Empty.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.cli.common import CliError
from samsa.cli.group_tables import (
    MemberRow,
    OffsetRow,
    assignment_text,
    clamp,
    format_delete_offsets,
    format_export,
    format_listing,
    format_members,
    format_offsets,
    format_reset,
    format_state,
    parse_datetime,
    parse_duration,
    parse_reset_plan,
    parse_topic_arg,
)
from tests.brokerproc import free_port
from tests.cli.helpers import ok, one_line_error, samsa


def cg(*args: str) -> subprocess.CompletedProcess[str]:
    return samsa("consumer-groups", *args)


# --- arguments (no broker) --------------------------------------------------------------------
B = ["--bootstrap-server", "x:1"]
BAD_ARGS = [
    (["--list"], 'Missing required argument "[bootstrap-server]"'),
    (B, "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"),
    ([*B, "--list", "--describe", "--all-groups"], "Command must include exactly one action"),
    ([*B, "--describe"], "Option [describe] takes one of these options: [group], [all-groups]"),
    ([*B, "--delete"], "Option [delete] takes one of these options: [group], [all-groups]"),
    ([*B, "--reset-offsets", "--to-earliest", "--all-topics"], "Option [reset-offsets] takes one of these options"),
    ([*B, "--describe", "--group", "g", "--members", "--state"], "Option [describe] takes at most one of these"),
    ([*B, "--describe", "--group", "g", "--state", "Stable"], "Option [describe] does not take a value for [state]"),
    ([*B, "--describe", "--group", "g", "--all-groups"], 'Option "[group]" can\'t be used with option "[all-groups]"'),
    ([*B, "--list", "--group", "g"], 'Option "[group]" can\'t be used with option "[list]"'),
    ([*B, "--describe", "--group", "g", "--topic", "t"], 'Option "[topic]" can\'t be used with option "[describe]"'),
    ([*B, "--delete", "--group", "g", "--topic", "t"], "The consumer does not support topic-specific offset deletion"),
    ([*B, "--delete-offsets", "--group", "g"], "Option [delete-offsets] takes the following options: [group], [topic]"),
    ([*B, "--list", "--members"], "Option(s) [members] are unavailable given other options on the command line"),
    ([*B, "--describe", "--group", "g", "--type"], "Option(s) [type] are unavailable"),
    ([*B, "--list", "--state", "sleepy"], "Invalid state list 'sleepy'. Valid states are: PreparingRebalance, "),
    ([*B, "--list", "--type", "odd"], "Invalid types list 'odd'. Valid types are: Consumer, Classic, Share"),
    (
        [*B, "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--execute", "--dry-run"],
        "Option [reset-offsets] only accepts one of [execute] and [dry-run]",
    ),
    (
        [*B, "--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--to-offset", "3"],
        'Option "[to-offset]" can\'t be used with option "[to-earliest]"',
    ),
    (
        [*B, "--reset-offsets", "--group", "g", "--all-topics"],
        "Option '[reset-offsets]' requires one of the following scenarios: [[to-offset], [shift-by], ",
    ),
    ([*B, "--reset-offsets", "--group", "g", "--to-latest"], "One of the reset scopes should be defined"),
    (
        [*B, "--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"],
        "Invalid partition 'x' specified in topic arg 't:x''",
    ),
    (
        [*B, "--reset-offsets", "--group", "g", "--topic", "t:1:2", "--to-latest"],
        "Invalid topic arg 't:1:2', expected topic name and partitions",
    ),
    ([*B, "--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "2020-01-01"], "does not contain a 'T'"),
    (
        [*B, "--reset-offsets", "--group", "g", "--all-topics", "--to-datetime", "2020-13-01T00:00:00.000"],
        'Unparseable date: "2020-13-01T00:00:00.000"',
    ),
    ([*B, "--reset-offsets", "--group", "g", "--all-topics", "--by-duration", "1h"], "cannot be parsed to a Duration"),
    ([*B, "--reset-offsets", "--group", "g", "--all-topics", "--shift-by", "x"], "invalid int value: 'x'"),
    ([*B, "--describe", "--group", "g", "--execute"], 'Option "[describe]" can\'t be used with option "[execute]"'),
    ([*B, "--list", "--to-earliest"], 'Option "[list]" can\'t be used with option "[to-earliest]"'),
    ([*B, "--delete-offsets", "--group", "a", "--group", "b", "--topic", "t"], "Found multiple arguments for option"),
    ([*B, "--list", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
]


@pytest.mark.parametrize("argv,message", BAD_ARGS, ids=lambda x: " ".join(x[2:5]) if isinstance(x, list) else "")
def test_bad_arguments_are_one_line_and_exit_2(argv: list[str], message: str) -> None:
    line = one_line_error(cg(*argv), codes=(2,))
    assert line.startswith("samsa consumer-groups: error: ") and message in line, line


def test_help_and_no_arguments() -> None:
    assert "--reset-offsets" in ok(cg("--help"))
    assert cg().returncode == 1


def test_unreachable_broker_fails_fast_with_one_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    for argv in (
        ["--list"],
        ["--describe", "--group", "g"],
        ["--reset-offsets", "--group", "g", "--all-topics", "--to-earliest", "--execute"],
        ["--delete", "--group", "g"],
        ["--delete-offsets", "--group", "g", "--topic", "t"],
    ):
        start = time.monotonic()
        line = one_line_error(cg("--bootstrap-server", bootstrap, *argv))
        assert f"cannot connect to {bootstrap}" in line and "refused" in line, (argv, line)
        assert time.monotonic() - start < 10


def test_missing_command_config_file() -> None:
    line = one_line_error(cg("--bootstrap-server", "x:1", "--list", "--command-config", "/nonexistent/a.properties"))
    assert "/nonexistent/a.properties" in line


# --- parsers and tables (no broker) -----------------------------------------------------------
@pytest.mark.parametrize(
    "text,ms",
    [
        ("PT0.5S", 500),
        ("PT1H", 3_600_000),
        ("P1DT2H3M4.005S", ((24 + 2) * 3600 + 3 * 60 + 4) * 1000 + 5),
        ("pt30m", 1_800_000),
        ("-PT1M", -60_000),
        ("PT-1M", -60_000),
        ("P2D", 172_800_000),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["", "P", "PT", "1H", "PT1", "P1H", "PT1.5H", "P1W"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Text cannot be parsed to a Duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    "text,utc",
    [
        ("2024-03-01T10:20:30.456", "2024-03-01T10:20:30.456+00:00"),
        ("2024-03-01T10:20:30.456Z", "2024-03-01T10:20:30.456+00:00"),
        ("2024-03-01T10:20:30.456+02:00", "2024-03-01T08:20:30.456+00:00"),
        ("2024-03-01T10:20:30.456-0130", "2024-03-01T11:50:30.456+00:00"),
        ("2024-03-01T10:20:30.456+05", "2024-03-01T05:20:30.456+00:00"),
    ],
)
def test_parse_datetime(text: str, utc: str) -> None:
    assert parse_datetime(text) == int(dt.datetime.fromisoformat(utc).timestamp() * 1000)


@pytest.mark.parametrize("text", ["2024-03-01T10:20:30", "2024-02-30T10:20:30.000", "2024-03-01 10:20:30.000"])
def test_parse_datetime_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_datetime(text)


def test_parse_topic_arg() -> None:
    assert parse_topic_arg("t") == ("t", None)
    assert parse_topic_arg("t:0,2") == ("t", [0, 2])
    assert parse_topic_arg("t:3") == ("t", [3])


@pytest.mark.parametrize(
    "offset,earliest,latest,expected",
    [(5, 0, 10, 5), (11, 0, 10, 10), (-3, 2, 10, 2), (0, 0, 0, 0), (7, None, None, 7), (10, 0, 10, 10)],
)
def test_clamp(offset: int, earliest: int | None, latest: int | None, expected: int) -> None:
    value, warning = clamp(offset, earliest, latest)
    assert value == expected
    assert (warning is None) == (value == offset)


def test_clamp_warnings_are_kafkas() -> None:
    _, high = clamp(12, 0, 10)
    assert high == "New offset (12) is higher than latest offset for topic partition {tp}. Value will be set to 10"
    _, low = clamp(-1, 3, 10)
    assert low == "New offset (-1) is lower than earliest offset for topic partition {tp}. Value will be set to 3"


def test_parse_reset_plan() -> None:
    assert parse_reset_plan("t,0,5\nt,1,7\n", ["g"]) == {"g": {("t", 0): 5, ("t", 1): 7}}
    assert parse_reset_plan("a,t,0,5\nb,u,2,1\n", ["a", "b"]) == {"a": {("t", 0): 5}, "b": {("u", 2): 1}}
    with pytest.raises(CliError):
        parse_reset_plan("t,0,five\n", ["g"])


def test_offsets_table_is_laid_out_like_kafkas() -> None:
    rows = [
        OffsetRow("g", "orders", 0, 4, 10, "consumer-1-0a8e3f2b-1111-2222-3333-444455556666", "/127.0.0.1", "c1"),
        OffsetRow("g", "orders", 1, None, 5, "-", "-", "-"),
    ]
    assert rows[0].lag == 6 and rows[1].lag is None
    cid = "consumer-1-0a8e3f2b-1111-2222-3333-444455556666"
    w = len(cid)
    expected = (
        "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
        + "CONSUMER-ID".ljust(w) + " HOST            CLIENT-ID"
        + "\ng               orders          0          4               10              6               "
        + cid + " /127.0.0.1      c1"
        + "\ng               orders          1          -               5               -               "
        + "-".ljust(w) + " -               -"
        + "\n"
    )  # fmt: skip
    assert format_offsets(rows) == expected


def test_members_table() -> None:
    rows = [
        MemberRow("g", "m-1", "", "/10.0.0.1", "c1", [("t", 2), ("t", 0), ("u", 1)]),
        MemberRow("g", "m-2", "", "/10.0.0.2", "c2", []),
    ]
    assert assignment_text(rows[0].assignment) == "t(0,2), u(1)"
    assert format_members(rows, verbose=False) == (
        "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
        "g               m-1             /10.0.0.1       c1              3               \n"
        "g               m-2             /10.0.0.2       c2              0               \n"
    )
    verbose = format_members(rows, verbose=True).splitlines()
    assert verbose[1].endswith("#PARTITIONS     ASSIGNMENT")
    assert verbose[2].endswith("3               t(0,2), u(1)") and verbose[3].endswith("0               -")
    static = format_members([rows[0]._replace(instance_id="i-1")], verbose=False).splitlines()
    assert static[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]


def test_state_list_reset_and_delete_offsets_tables() -> None:
    assert format_state("g", "127.0.0.1:9092  (0)", "range", "Stable", 2) == (
        "\nGROUP                     COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS"
        "\ng                         127.0.0.1:9092  (0)       range                Stable          2\n"
    )
    assert format_listing([("g", "Classic", "Empty")], include_type=False, include_state=True) == (
        "GROUP                     STATE               \ng                         Empty               \n"
    )
    plan = {"g": {("t", 1): 7, ("t", 0): 5}}
    assert format_reset(plan) == (
        "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET     "
        "\ng                              t                              0          5              "
        "\ng                              t                              1          7              \n"
    )
    assert format_export(plan, single_group=True) == "t,0,5\nt,1,7\n\n"
    assert format_export(plan, single_group=False) == "g,t,0,5\ng,t,1,7\n\n"
    assert format_delete_offsets([("t", 0, None), ("u", -1, "This server does not host this topic-partition.")]) == (
        "\nTOPIC                          PARTITION       STATUS         "
        "\nt                              0               Successful     "
        "\nu                              Not Provided    Error: This server does not host this topic-partition.\n"
    )


# --- against the broker -----------------------------------------------------------------------
_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(autouse=True, scope="module")
def _drop_admins() -> Iterator[None]:
    yield
    _ADMINS.clear()  # before the session's broker stops, so they do not log its absence


def admin(broker: Any) -> AdminClient:
    """One AdminClient per broker, kept alive (a dropped client fails its pending futures)."""
    if broker.bootstrap not in _ADMINS:
        _ADMINS[broker.bootstrap] = AdminClient({"bootstrap.servers": broker.bootstrap})
    return _ADMINS[broker.bootstrap]


def create_topic(broker: Any, topic: str, partitions: int = 3) -> None:
    futures = admin(broker).create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    futures[topic].result(timeout=20)


HOUR_MS = 3_600_000


def fill(broker: Any, topic: str, counts: dict[int, int], now_ms: int) -> None:
    """`counts[p]` records into partition p; record i of partition p is timestamped now - (10 - i) hours."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for p, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p, timestamp=now_ms - (10 - i) * HOUR_MS)
    assert producer.flush(20) == 0


@contextmanager
def member(broker: Any, group: str, topic: str, commit: dict[int, int] | None = None) -> Iterator[Consumer]:
    """A consumer in `group`, assigned every partition of `topic`, that commits `commit`; closed on exit."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "client.id": "cg-test",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, f"no assignment for {group} within 30 s"
            consumer.poll(0.2)
        if commit:
            offsets = [TopicPartition(topic, p, o) for p, o in commit.items()]
            consumer.commit(offsets=offsets, asynchronous=False)
        yield consumer
    finally:
        consumer.close()


def group_state(broker: Any, group: str) -> Any:
    return admin(broker).describe_consumer_groups([group])[group].result(timeout=20).state


def wait_empty(broker: Any, group: str) -> None:
    deadline = time.monotonic() + 20
    while group_state(broker, group) != ConsumerGroupState.EMPTY:
        assert time.monotonic() < deadline, f"{group} did not become Empty"
        time.sleep(0.2)


def committed(broker: Any, group: str) -> dict[tuple[str, int], int]:
    fut = admin(broker).list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {(tp.topic, tp.partition): tp.offset for tp in fut.result(timeout=20).topic_partitions if tp.offset >= 0}


def table(out: str) -> list[list[str]]:
    """Rows of a Kafka table (split on whitespace), header first, blank lines dropped."""
    return [line.split() for line in out.splitlines() if line.strip()]


@pytest.fixture
def empty_group(broker: Any, topic_name: str) -> tuple[str, str, int]:
    """(group, topic, now ms): topic with 3 partitions holding 10, 5 and 0 records; the group committed
    p0=4 and p1=5, then its only member left."""
    create_topic(broker, topic_name)
    now = int(time.time() * 1000)
    fill(broker, topic_name, {0: 10, 1: 5}, now)
    group = f"g-{topic_name}"
    with member(broker, group, topic_name, commit={0: 4, 1: 5}):
        pass
    wait_empty(broker, group)
    return group, topic_name, now


def test_list_and_list_with_state(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, _, _ = empty_group
    assert group in ok(cg("--bootstrap-server", broker.bootstrap, "--list")).splitlines()
    rows = table(ok(cg("--bootstrap-server", broker.bootstrap, "--list", "--state")))
    assert rows[0] == ["GROUP", "STATE"] and [group, "Empty"] in rows
    assert [group, "Empty"] in table(ok(cg("--bootstrap-server", broker.bootstrap, "--list", "--state", "empty")))
    stable = table(ok(cg("--bootstrap-server", broker.bootstrap, "--list", "--state", "Stable,PreparingRebalance")))
    assert stable[0] == ["GROUP", "STATE"] and all(r[0] != group for r in stable)


def test_describe_empty_group_offsets_and_lag(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, topic, _ = empty_group
    proc = cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", group)
    out = ok(proc)
    assert proc.stderr == f"Consumer group '{group}' has no active members.\n"
    assert out.startswith("\nGROUP ")
    rows = table(out)
    assert rows[0] == "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID".split()
    # LAG = log end offset - committed offset; the partition never committed to is not listed.
    assert rows[1:] == [
        [group, topic, "0", "4", "10", "6", "-", "-", "-"],
        [group, topic, "1", "5", "5", "0", "-", "-", "-"],
    ]
    # --offsets is the default view; --all-groups covers this group too.
    assert ok(cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", group, "--offsets")) == out
    everything = table(ok(cg("--bootstrap-server", broker.bootstrap, "--describe", "--all-groups")))
    assert [group, topic, "0", "4", "10", "6", "-", "-", "-"] in everything


def test_describe_active_group(broker: Any, topic_name: str) -> None:
    create_topic(broker, topic_name)
    fill(broker, topic_name, {0: 10, 1: 5}, int(time.time() * 1000))
    group = f"g-{topic_name}"
    bs = broker.bootstrap
    with member(broker, group, topic_name, commit={0: 3}):
        proc = cg("--bootstrap-server", bs, "--describe", "--group", group)
        rows = table(ok(proc))
        assert proc.stderr == ""
        assert [r[:6] for r in rows[1:]] == [
            [group, topic_name, "0", "3", "10", "7"],
            [group, topic_name, "1", "-", "5", "-"],
            [group, topic_name, "2", "-", "0", "-"],
        ]
        consumer_ids = {r[6] for r in rows[1:]}
        assert len(consumer_ids) == 1 and "-" not in consumer_ids
        assert all(r[8] == "cg-test" for r in rows[1:])

        members = table(ok(cg("--bootstrap-server", bs, "--describe", "--group", group, "--members")))
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert len(members) == 2 and members[1][0] == group and members[1][1] in consumer_ids
        assert members[1][3:] == ["cg-test", "3"]
        verbose = ok(cg("--bootstrap-server", bs, "--describe", "--group", group, "--members", "--verbose"))
        assert verbose.splitlines()[2].endswith(f"3               {topic_name}(0,1,2)")

        state = ok(cg("--bootstrap-server", bs, "--describe", "--group", group, "--state")).splitlines()
        assert state[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        assert state[2].split() == [group, bs, "(0)", "range", "Stable", "1"]

        # An active group's offsets cannot be reset, nor the group deleted.
        proc = cg("--bootstrap-server", bs, "--reset-offsets", "--group", group, "--all-topics", "--to-earliest",
                  "--execute")  # fmt: skip
        line = one_line_error(proc)
        assert line == (
            f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable."
        )
        assert proc.stdout == ""
        line = one_line_error(cg("--bootstrap-server", bs, "--delete", "--group", group))
        assert line == f"Error: Group '{group}' could not be deleted due to: The group is not empty."
        # Offsets of a topic the group is subscribed to cannot be deleted either.
        proc = cg("--bootstrap-server", bs, "--delete-offsets", "--group", group, "--topic", topic_name)
        assert proc.returncode == 1
        assert "Error: Encounter some partition level error" in proc.stderr
        assert "is forbidden while the consumer group is actively subscribed to it." in proc.stdout
    assert committed(broker, group) == {(topic_name, 0): 3}


def test_describe_missing_group(broker: Any) -> None:
    line = one_line_error(cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", "no-such-group-x1"))
    assert line == "Error: Consumer group 'no-such-group-x1' does not exist."
    for view in ("--members", "--state"):
        proc = cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", "no-such-group-x1", view)
        assert one_line_error(proc) == "Error: Consumer group 'no-such-group-x1' does not exist."


def reset(broker: Any, group: str, *args: str) -> subprocess.CompletedProcess[str]:
    return cg("--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", group, *args)


def plan(out: str) -> dict[tuple[str, int], int]:
    rows = [r for r in table(out) if r[0] != "Warn:"]
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], out
    return {(r[1], int(r[2])): int(r[3]) for r in rows[1:]}


def test_reset_offsets_dry_run_for_each_spec(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, t, now = empty_group
    before = committed(broker, group)
    assert before == {(t, 0): 4, (t, 1): 5}
    cases: list[tuple[list[str], dict[tuple[str, int], int]]] = [
        (["--topic", t, "--to-earliest"], {(t, 0): 0, (t, 1): 0, (t, 2): 0}),
        (["--topic", t, "--to-latest"], {(t, 0): 10, (t, 1): 5, (t, 2): 0}),
        (["--topic", t, "--to-current"], {(t, 0): 4, (t, 1): 5, (t, 2): 0}),
        (["--topic", t, "--to-offset", "7"], {(t, 0): 7, (t, 1): 5, (t, 2): 0}),  # clamped to the log end
        (["--topic", f"{t}:0,1", "--shift-by", "-2"], {(t, 0): 2, (t, 1): 3}),
        (["--topic", f"{t}:0", "--shift-by", "-9"], {(t, 0): 0}),  # clamped to the log start
        (["--topic", f"{t}:1", "--shift-by", "100"], {(t, 1): 5}),
        (["--all-topics", "--to-earliest"], {(t, 0): 0, (t, 1): 0}),  # only partitions with committed offsets
        (["--topic", f"{t}:1", "--topic", f"{t}:0", "--to-latest"], {(t, 0): 10, (t, 1): 5}),
        # record i is timestamped now - (10 - i) h: the first one at or after now - 5.5 h is offset 5
        (["--topic", f"{t}:0", "--by-duration", "PT5H30M"], {(t, 0): 5}),
        (["--topic", f"{t}:0", "--to-datetime", iso(now - 7 * HOUR_MS)], {(t, 0): 3}),
        (["--topic", f"{t}:0", "--to-datetime", iso(now - 7 * HOUR_MS + 1)], {(t, 0): 4}),
    ]
    for args, expected in cases:
        proc = reset(broker, group, *args, "--dry-run")
        assert plan(ok(proc)) == expected, args
        assert all(line.startswith("WARN New offset") for line in proc.stderr.splitlines()), proc.stderr
    # Without --execute or --dry-run, Kafka's warning and a dry run.
    proc = reset(broker, group, "--topic", t, "--to-earliest")
    assert proc.stderr.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert plan(ok(proc)) == {(t, 0): 0, (t, 1): 0, (t, 2): 0}
    assert committed(broker, group) == before


def test_reset_by_time_falls_back_to_latest(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, t, now = empty_group
    proc = reset(broker, group, "--topic", t, "--to-datetime", iso(now + HOUR_MS), "--dry-run")
    out = ok(proc)
    assert plan(out) == {(t, 0): 10, (t, 1): 5, (t, 2): 0}
    assert f"Warn: Partition 0 from topic {t} is empty. Falling back to latest known offset." in out


def test_reset_clamp_warns_and_shift_needs_committed_offset(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, t, _ = empty_group
    proc = reset(broker, group, "--topic", f"{t}:0", "--to-offset", "99", "--dry-run")
    assert plan(ok(proc)) == {(t, 0): 10}
    assert proc.stderr == (
        f"WARN New offset (99) is higher than latest offset for topic partition {t}-0. Value will be set to 10\n"
    )
    line = one_line_error(reset(broker, group, "--topic", t, "--shift-by", "1", "--dry-run"))
    assert line.endswith(f"Cannot shift offset for partition {t}-2 since there is no current committed offset")
    line = one_line_error(reset(broker, group, "--topic", "no-such-topic-q", "--to-earliest", "--dry-run"))
    assert "This server does not host this topic-partition." in line and "no-such-topic-q" in line


def test_reset_offsets_execute(broker: Any, empty_group: tuple[str, str, int], tmp_path: Path) -> None:
    group, t, _ = empty_group
    proc = reset(broker, group, "--topic", f"{t}:0", "--to-offset", "8", "--execute")
    assert plan(ok(proc)) == {(t, 0): 8} and proc.stderr == ""
    assert committed(broker, group) == {(t, 0): 8, (t, 1): 5}
    rows = table(ok(cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", group)))
    assert rows[1][2:6] == ["0", "8", "10", "2"]  # the lag follows the new committed offset

    assert plan(ok(reset(broker, group, "--all-topics", "--shift-by", "-3", "--execute"))) == {(t, 0): 5, (t, 1): 2}
    assert committed(broker, group) == {(t, 0): 5, (t, 1): 2}
    latest = {(t, 0): 10, (t, 1): 5, (t, 2): 0}
    assert plan(ok(reset(broker, group, "--topic", t, "--to-latest", "--execute"))) == latest
    assert committed(broker, group) == {(t, 0): 10, (t, 1): 5, (t, 2): 0}

    # --export writes the plan as CSV; --from-file reads it back.
    exported = ok(reset(broker, group, "--topic", t, "--to-earliest", "--dry-run", "--export"))
    assert exported == f"{t},0,0\n{t},1,0\n{t},2,0\n\n"
    csv = tmp_path / "plan.csv"
    csv.write_text(f"{t},0,6\n{t},1,1\n")
    assert plan(ok(reset(broker, group, "--from-file", str(csv), "--execute"))) == {(t, 0): 6, (t, 1): 1}
    assert committed(broker, group) == {(t, 0): 6, (t, 1): 1, (t, 2): 0}


def test_reset_offsets_of_a_new_group(broker: Any, empty_group: tuple[str, str, int]) -> None:
    """Like Kafka, a group that does not exist yet may be given offsets (it is then Empty)."""
    _, t, _ = empty_group
    group = f"fresh-{t}"
    latest = {(t, 0): 10, (t, 1): 5, (t, 2): 0}
    assert plan(ok(reset(broker, group, "--topic", t, "--to-latest", "--execute"))) == latest
    assert committed(broker, group) == {(t, 0): 10, (t, 1): 5, (t, 2): 0}
    rows = table(ok(cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", group)))
    assert [r[5] for r in rows[1:]] == ["0", "0", "0"]


def test_delete_offsets(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, t, _ = empty_group
    proc = cg("--bootstrap-server", broker.bootstrap, "--delete-offsets", "--group", group, "--topic", f"{t}:1")
    out = ok(proc)
    assert out.startswith(f"Request succeed for deleting offsets with topic {t}:1 group {group}\n")
    assert table(out)[-2:] == [["TOPIC", "PARTITION", "STATUS"], [t, "1", "Successful"]]
    assert committed(broker, group) == {(t, 0): 4}

    proc = cg("--bootstrap-server", broker.bootstrap, "--delete-offsets", "--group", group, "--topic", "no-such-topic")
    assert proc.returncode == 1
    assert ["no-such-topic", "Not", "Provided", "Error:", "This"] == table(proc.stdout)[-1][:5]

    proc = cg("--bootstrap-server", broker.bootstrap, "--delete-offsets", "--group", "no-such-group-d", "--topic", t)
    assert proc.returncode == 1 and proc.stderr == "Error: 'no-such-group-d' does not exist.\n"


def test_delete_groups(broker: Any, empty_group: tuple[str, str, int]) -> None:
    group, _, _ = empty_group
    out = ok(cg("--bootstrap-server", broker.bootstrap, "--delete", "--group", group))
    assert out == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in ok(cg("--bootstrap-server", broker.bootstrap, "--list")).splitlines()
    line = one_line_error(cg("--bootstrap-server", broker.bootstrap, "--describe", "--group", group))
    assert line == f"Error: Consumer group '{group}' does not exist."
    line = one_line_error(cg("--bootstrap-server", broker.bootstrap, "--delete", "--group", group))
    assert line == f"Error: Group '{group}' could not be deleted due to: The group id does not exist."


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
