"""`samsa leader-election`, `samsa reassign-partitions` and the `samsa topics --describe` filters:
argument and file errors (no broker), then flows against the single shared broker.

Multi-broker behaviour (real elections and moves) is tested with the cluster fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.brokerproc import free_port
from tests.cli.helpers import ok, one_line_error, samsa

LE = "leader-election"
RP = "reassign-partitions"

BAD_ARGS = [
    [LE, "--bootstrap-server", "x:1", "--all-topic-partitions"],
    [LE, "--election-type", "preferred", "--all-topic-partitions"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "sideways", "--all-topic-partitions"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "preferred"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "t"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "preferred", "--partition", "0", "--all-topic-partitions"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "preferred", "--topic", "t", "--partition", "zero"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "unclean", "--topic", "t", "--partition", "0",
     "--all-topic-partitions"],
    [LE, "--bootstrap-server", "x:1", "--election-type", "unclean", "--no-such-flag"],
    [RP, "--bootstrap-server", "x:1"],
    [RP, "--bootstrap-server", "x:1", "--verify", "--list"],
    [RP, "--list"],
    [RP, "--bootstrap-server", "x:1", "--generate", "--topics-to-move-json-file", "f.json"],
    [RP, "--bootstrap-server", "x:1", "--execute"],
    [RP, "--bootstrap-server", "x:1", "--verify", "--reassignment-json-file", "r.json", "--throttle", "10"],
    [RP, "--bootstrap-server", "x:1", "--cancel", "--reassignment-json-file", "r.json", "--throttle", "0"],
    [RP, "--bootstrap-server", "x:1", "--list", "--additional"],
    [RP, "--bootstrap-server", "x:1", "--generate", "--topics-to-move-json-file", "f", "--broker-list", "0",
     "--reassignment-json-file", "r"],
    [RP, "--bootstrap-server", "x:1", "--execute", "--reassignment-json-file", "r.json", "--throttle", "-5"],
    [RP, "--bootstrap-server", "x:1", "--execute", "--reassignment-json-file", "r.json", "--throttle", "fast"],
    [RP, "--bootstrap-server", "x:1", "--execute", "--reassignment-json-file", "r.json",
     "--replica-alter-log-dirs-throttle", "-5"],
]


@pytest.mark.parametrize("argv", BAD_ARGS, ids=lambda a: " ".join(a))
def test_bad_argument_is_one_line_and_exit_2(argv: list[str]) -> None:
    line = one_line_error(samsa(*argv), codes=(2,))
    assert line.startswith("samsa "), line


@pytest.mark.parametrize("tool", [LE, RP])
def test_help(tool: str) -> None:
    proc = samsa(tool, "--help")
    assert proc.returncode == 0 and "--bootstrap-server" in proc.stdout, proc.stderr


def test_tools_are_listed() -> None:
    out = ok(samsa("--help"))
    assert "leader-election" in out and "reassign-partitions" in out


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def test_file_errors_are_reported_before_connecting(tmp_path: Path) -> None:
    """Mistakes in the files are found without a broker (x:1 would not answer)."""
    cases = [
        ([RP, "--execute", "--reassignment-json-file", write(tmp_path, "a.json", "{oops")], "not valid JSON"),
        ([RP, "--execute", "--reassignment-json-file", str(tmp_path / "missing.json")], "cannot read"),
        ([RP, "--verify", "--reassignment-json-file", write(tmp_path, "b.json", {"version": 1, "partitions": []})],
         "Partition reassignment list cannot be empty"),
        ([RP, "--cancel", "--reassignment-json-file",
          write(tmp_path, "c.json", {"partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]})],
         "may not contain duplicate entries: t-0 contains 1,1"),
        ([RP, "--generate", "--broker-list", "0,1", "--topics-to-move-json-file",
          write(tmp_path, "d.json", {"topics": [{"topic": "a"}, {"topic": "a"}]})], "duplicate entries: a"),
        ([LE, "--election-type", "preferred", "--path-to-json-file",
          write(tmp_path, "e.json", {"partitions": [{"topic": "a", "partition": 0}] * 2})], "duplicate partitions: a-0"),
    ]
    for argv, fragment in cases:
        line = one_line_error(samsa(argv[0], "--bootstrap-server", "x:1", *argv[1:]))
        assert fragment in line, (argv, line)
    line = one_line_error(samsa(RP, "--bootstrap-server", "x:1", "--generate", "--broker-list", "0,b",
                                "--topics-to-move-json-file", write(tmp_path, "f.json", {"topics": [{"topic": "a"}]})),
                          codes=(2,))
    assert "--broker-list" in line


def test_unreachable_broker_is_one_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    for argv in ([LE, "--election-type", "preferred", "--all-topic-partitions"], [RP, "--list"]):
        line = one_line_error(samsa(argv[0], "--bootstrap-server", bootstrap, *argv[1:]))
        assert f"cannot connect to {bootstrap}" in line, line


# --------------------------------------------------------------------- against a broker


def create(broker: Any, topic: str, partitions: int = 1, *configs: str) -> None:
    args = ["topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic,
            "--partitions", str(partitions)]
    for c in configs:
        args += ["--config", c]
    ok(samsa(*args))


def test_leader_election_single_broker_not_needed(broker: Any, topic_name: str, tmp_path: Path) -> None:
    """One broker: every partition already has its preferred leader (ELECTION_NOT_NEEDED)."""
    create(broker, topic_name, 2)
    out = ok(samsa(LE, "--bootstrap-server", broker.bootstrap, "--election-type", "PREFERRED",
                   "--topic", topic_name, "--partition", "0"))
    assert out == f"Valid replica already elected for partitions {topic_name}-0\n"
    path = write(tmp_path, "e.json", {"partitions": [{"topic": topic_name, "partition": 1},
                                                     {"topic": topic_name, "partition": 0}]})
    out = ok(samsa(LE, "--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                   "--path-to-json-file", path))
    assert out == f"Valid replica already elected for partitions {topic_name}-0, {topic_name}-1\n"
    out = ok(samsa(LE, "--bootstrap-server", broker.bootstrap, "--election-type", "unclean",
                   "--topic", topic_name, "--partition", "1"))
    assert out == f"Valid replica already elected for partitions {topic_name}-1\n"
    # Every partition: the ones needing no election are left out of the answer (Kafka's rule).
    proc = samsa(LE, "--bootstrap-server", broker.bootstrap, "--election-type", "preferred", "--all-topic-partitions")
    assert proc.returncode == 0 and "Error" not in proc.stdout and "Traceback" not in proc.stderr, proc


def test_leader_election_unknown_partition_fails(broker: Any, topic_name: str) -> None:
    proc = samsa(LE, "--bootstrap-server", broker.bootstrap, "--election-type", "preferred",
                 "--topic", topic_name + "-missing", "--partition", "3")
    line = one_line_error(proc)
    assert line == "samsa leader-election: error: 1 replica(s) could not be elected", line
    assert proc.stdout.startswith(
        f"Error completing leader election (PREFERRED) for partition: {topic_name}-missing-3: UNKNOWN_TOPIC_OR_PARTITION"
    ), proc.stdout


def test_reassign_generate(broker: Any, topic_name: str, tmp_path: Path) -> None:
    create(broker, topic_name, 3)
    path = write(tmp_path, "move.json", {"topics": [{"topic": topic_name}], "version": 1})
    out = ok(samsa(RP, "--bootstrap-server", broker.bootstrap, "--generate", "--topics-to-move-json-file", path,
                   "--broker-list", "0"))
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment configuration"
    expected = {"version": 1, "partitions": [
        {"topic": topic_name, "partition": p, "replicas": [0], "log_dirs": ["any"]} for p in range(3)]}
    assert json.loads(lines[1]) == expected and json.loads(lines[4]) == expected and lines[2] == ""
    # A topic that does not exist, or brokers that cannot hold the replicas.
    missing = write(tmp_path, "missing.json", {"topics": [{"topic": topic_name + "-nope"}]})
    line = one_line_error(samsa(RP, "--bootstrap-server", broker.bootstrap, "--generate",
                                "--topics-to-move-json-file", missing, "--broker-list", "0"))
    assert f"Topic '{topic_name}-nope' does not exist" in line
    line = one_line_error(samsa(RP, "--bootstrap-server", broker.bootstrap, "--generate",
                                "--topics-to-move-json-file", path, "--broker-list", "7"))
    assert "larger than available brokers: 0" in line


def test_reassign_execute_verify_cancel_list(broker: Any, topic_name: str, tmp_path: Path) -> None:
    """On one broker the only assignment is the current one: it completes at once."""
    create(broker, topic_name, 2)
    bs = ["--bootstrap-server", broker.bootstrap]
    target = {"version": 1, "partitions": [
        {"topic": topic_name, "partition": 1, "replicas": [0], "log_dirs": ["any"]},
        {"topic": topic_name, "partition": 0, "replicas": [0]}]}
    path = write(tmp_path, "r.json", target)
    out = ok(samsa(RP, *bs, "--execute", "--reassignment-json-file", path))
    current = {"version": 1, "partitions": [
        {"topic": topic_name, "partition": p, "replicas": [0], "log_dirs": ["any"]} for p in (0, 1)]}
    assert out.splitlines() == [
        "Current partition replica assignment",
        "",
        json.dumps(current, separators=(",", ":")),
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignments for {topic_name}-0,{topic_name}-1",
    ]
    out = ok(samsa(RP, *bs, "--verify", "--reassignment-json-file", path))
    assert out.splitlines()[:3] == [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic_name}-0 is completed.",
        f"Reassignment of partition {topic_name}-1 is completed.",
    ]
    assert "Clearing broker-level throttles on broker 0" in out
    assert f"Clearing topic-level throttles on topic {topic_name}" in out
    out = ok(samsa(RP, *bs, "--verify", "--reassignment-json-file", path, "--preserve-throttles"))
    assert "Clearing" not in out
    assert ok(samsa(RP, *bs, "--list")) == "No partition reassignments found.\n"
    out = ok(samsa(RP, *bs, "--cancel", "--reassignment-json-file", path, "--preserve-throttles"))
    assert out == "None of the specified partition reassignments are active.\n"


def test_reassign_execute_errors(broker: Any, topic_name: str, tmp_path: Path) -> None:
    create(broker, topic_name, 1)
    bs = ["--bootstrap-server", broker.bootstrap]
    path = write(tmp_path, "r.json", {"partitions": [{"topic": topic_name, "partition": 0, "replicas": [0, 5, 6]}]})
    line = one_line_error(samsa(RP, *bs, "--execute", "--reassignment-json-file", path))
    assert line.endswith("Unknown broker id(s): 5, 6"), line
    path = write(tmp_path, "s.json", {"partitions": [{"topic": topic_name, "partition": 4, "replicas": [0]}]})
    line = one_line_error(samsa(RP, *bs, "--execute", "--reassignment-json-file", path))
    assert line.endswith(f"Unable to find partition: {topic_name}-4"), line
    line = one_line_error(samsa(RP, *bs, "--verify", "--reassignment-json-file", path))
    assert line.endswith(f"Unable to find partition: {topic_name}-4"), line


def test_reassign_throttle_is_set_and_cleared(broker: Any, topic_name: str, tmp_path: Path) -> None:
    create(broker, topic_name, 1)
    bs = ["--bootstrap-server", broker.bootstrap]
    path = write(tmp_path, "r.json", {"partitions": [{"topic": topic_name, "partition": 0, "replicas": [0]}]})
    out = ok(samsa(RP, *bs, "--execute", "--reassignment-json-file", path, "--throttle", "50000"))
    assert "The inter-broker throttle limit was set to 50000 B/s" in out
    configs = ok(samsa("configs", *bs, "--entity-type", "topics", "--entity-name", topic_name, "--describe"))
    assert "leader.replication.throttled.replicas=0:0" in configs
    configs = ok(samsa("configs", *bs, "--entity-type", "brokers", "--entity-name", "0", "--describe"))
    assert "leader.replication.throttled.rate=50000" in configs
    ok(samsa(RP, *bs, "--verify", "--reassignment-json-file", path))
    configs = ok(samsa("configs", *bs, "--entity-type", "topics", "--entity-name", topic_name, "--describe"))
    assert "throttled" not in configs
    configs = ok(samsa("configs", *bs, "--entity-type", "brokers", "--entity-name", "0", "--describe"))
    assert "throttled" not in configs


def test_reassign_moves_a_replica_between_log_dirs(broker_factory: Any, topic_name: str, tmp_path: Path) -> None:
    """log_dirs in the file: --execute asks the broker to move the replica (AlterReplicaLogDirs)
    with the log dir throttle, --verify follows it (DescribeLogDirs) and clears the throttle."""
    a_dir, b_dir = tmp_path / "dir-a", tmp_path / "dir-b"
    broker = broker_factory(log_dirs=f"{a_dir},{b_dir}")
    create(broker, topic_name, 1)
    ok(samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic_name,
             input="".join(f"record-{i}\n" for i in range(100))))
    src, dest = (a_dir, b_dir) if (a_dir / f"{topic_name}-0").is_dir() else (b_dir, a_dir)
    bs = ["--bootstrap-server", broker.bootstrap]
    path = write(tmp_path, "r.json", {"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [0], "log_dirs": [str(dest)]}]})
    out = ok(samsa(RP, *bs, "--execute", "--reassignment-json-file", path, "--replica-alter-log-dirs-throttle",
                   "50000000"))
    assert out.splitlines()[5:] == [
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed.",
        "The replica-alter-dir throttle limit was set to 50000000 B/s",
        f"Successfully started partition reassignment for {topic_name}-0",
        f"Successfully started moving log directory to {dest} for replica {topic_name}-0 with broker 0 ",
    ]
    for _ in range(50):  # (100 records: done at once, or nearly)
        out = ok(samsa(RP, *bs, "--verify", "--reassignment-json-file", path))
        if "completed successfully" in out:
            break
    assert out.splitlines()[:3] == ["Status of partition reassignment:",
                                    f"Reassignment of partition {topic_name}-0 is completed.",
                                    f"Reassignment of replica {topic_name}-0-0 completed successfully."], out
    assert "Clearing broker-level throttles on broker 0" in out
    assert [p.name for p in dest.iterdir() if p.name.startswith(topic_name)] == [f"{topic_name}-0"]
    assert [p.name for p in src.iterdir() if p.name.startswith(topic_name)] == []
    configs = ok(samsa("configs", *bs, "--entity-type", "brokers", "--entity-name", "0", "--describe"))
    assert "replica.alter.log.dirs" not in configs
    # a dir that is not one of the broker's: Kafka's error, named
    bad = write(tmp_path, "bad.json", {"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "replicas": [0], "log_dirs": [str(tmp_path / "elsewhere")]}]})
    line = one_line_error(samsa(RP, *bs, "--execute", "--reassignment-json-file", bad))
    assert line.endswith(f"Failed to alter dir for {topic_name}-0-0: LOG_DIR_NOT_FOUND"), line
    out = ok(samsa(RP, *bs, "--verify", "--reassignment-json-file", bad))
    assert (f"Partition {topic_name}-0 on broker 0 is not being moved from log dir {dest} to {tmp_path / 'elsewhere'}."
            in out), out


# ------------------------------------------------------------- topics --describe filters


def describe(broker: Any, topic: str, *flags: str) -> str:
    return ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic", topic, *flags))


def test_describe_filters_on_a_healthy_topic(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 2)
    assert describe(broker, topic_name, "--under-replicated-partitions") == ""
    assert describe(broker, topic_name, "--unavailable-partitions") == ""
    assert describe(broker, topic_name, "--under-min-isr-partitions") == ""
    # min.insync.replicas=1 and one in-sync replica: at the minimum. Only partition lines print.
    assert describe(broker, topic_name, "--at-min-isr-partitions").splitlines() == [
        f"\tTopic: {topic_name}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)
    ]


def test_describe_under_min_isr(broker: Any, topic_name: str) -> None:
    create(broker, topic_name, 1, "min.insync.replicas=2")
    line = f"\tTopic: {topic_name}\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"
    assert describe(broker, topic_name, "--under-min-isr-partitions") == line + "\n"
    assert describe(broker, topic_name, "--at-min-isr-partitions") == ""
    assert describe(broker, topic_name, "--under-replicated-partitions", "--under-min-isr-partitions") == line + "\n"


def test_create_with_replica_assignment(broker: Any, topic_name: str) -> None:
    out = ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name,
                   "--replica-assignment", "0,0"))
    assert out == f"Created topic {topic_name}.\n"
    assert describe(broker, topic_name).splitlines()[1:] == [
        f"\tTopic: {topic_name}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)
    ]
