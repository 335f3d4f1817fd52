"""`samsa topics` against a real broker: Kafka's flows and output layout."""

from __future__ import annotations

import re
from typing import Any

from tests.cli.helpers import ok, one_line_error, samsa


def topics(broker: Any, *args: str) -> Any:
    return samsa("topics", "--bootstrap-server", broker.bootstrap, *args)


def describe_lines(broker: Any, topic: str) -> list[str]:
    return ok(topics(broker, "--describe", "--topic", topic)).splitlines()


def test_create_list_describe_alter_delete(broker: Any, topic_name: str) -> None:
    t = topic_name
    out = ok(
        topics(
            broker,
            "--create",
            "--topic",
            t,
            "--partitions",
            "3",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=123456",
            "--config",
            "cleanup.policy=compact",
        )
    )
    assert out == f"Created topic {t}.\n"

    assert t in ok(topics(broker, "--list")).splitlines()

    lines = describe_lines(broker, t)
    assert len(lines) == 4, lines
    head = re.fullmatch(
        rf"Topic: {t}\tTopicId: (\S+)\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: (.*)", lines[0]
    )
    assert head, lines[0]
    configs = dict(kv.split("=", 1) for kv in head.group(2).split(","))
    assert configs["retention.ms"] == "123456" and configs["cleanup.policy"] == "compact"
    for p, line in enumerate(lines[1:]):
        assert line == f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0"

    assert ok(topics(broker, "--alter", "--topic", t, "--partitions", "5")) == ""
    lines = describe_lines(broker, t)
    assert "\tPartitionCount: 5\t" in lines[0] and len(lines) == 6

    line = one_line_error(topics(broker, "--alter", "--topic", t, "--partitions", "2"))
    assert "partition" in line.lower()

    assert ok(topics(broker, "--delete", "--topic", t)) == ""
    assert t not in ok(topics(broker, "--list")).splitlines()
    line = one_line_error(topics(broker, "--describe", "--topic", t))
    assert line.endswith(f"Topic '{t}' does not exist as expected")


def test_create_existing_topic(broker: Any, topic_name: str) -> None:
    ok(topics(broker, "--create", "--topic", topic_name))
    line = one_line_error(topics(broker, "--create", "--topic", topic_name))
    assert line.endswith(f"Topic '{topic_name}' already exists."), line
    assert ok(topics(broker, "--create", "--topic", topic_name, "--if-not-exists")) == ""
    # The broker default (num.partitions=1) applies when --partitions is absent.
    assert "\tPartitionCount: 1\tReplicationFactor: 1\t" in describe_lines(broker, topic_name)[0]


def test_default_configs_are_not_listed(broker: Any, topic_name: str) -> None:
    ok(topics(broker, "--create", "--topic", topic_name, "--partitions", "1"))
    assert describe_lines(broker, topic_name)[0].endswith("\tConfigs: ")


def test_regex_topic_selection(broker: Any, topic_name: str) -> None:
    names = [f"{topic_name}-a", f"{topic_name}-b"]
    for n in names:
        ok(topics(broker, "--create", "--topic", n, "--partitions", "1"))
    assert ok(topics(broker, "--list", "--topic", f"{topic_name}-.*")).splitlines() == names
    heads = [line for line in describe_lines(broker, f"{topic_name}-.*") if line.startswith("Topic: ")]
    assert [h.split("\t")[0] for h in heads] == [f"Topic: {n}" for n in names]
    assert ok(topics(broker, "--delete", "--topic", f"{topic_name}-.*")) == ""
    assert ok(topics(broker, "--list", "--topic", f"{topic_name}-.*")) == "\n"  # Kafka prints an empty line


def test_if_exists_on_missing_topic(broker: Any, topic_name: str) -> None:
    assert ok(topics(broker, "--delete", "--topic", topic_name, "--if-exists")) == ""
    assert ok(topics(broker, "--describe", "--topic", topic_name, "--if-exists")) == ""
    assert ok(topics(broker, "--alter", "--topic", topic_name, "--partitions", "3", "--if-exists")) == ""
    line = one_line_error(topics(broker, "--delete", "--topic", topic_name))
    assert line.endswith(f"Topic '{topic_name}' does not exist as expected")


def test_invalid_replication_factor(broker: Any, topic_name: str) -> None:
    line = one_line_error(topics(broker, "--create", "--topic", topic_name, "--replication-factor", "3"))
    assert "replication factor" in line.lower(), line
    line = one_line_error(topics(broker, "--create", "--topic", topic_name, "--replication-factor", "0"))
    assert line.endswith("The replication factor must be between 1 and 32767 inclusive")
    line = one_line_error(topics(broker, "--create", "--topic", topic_name, "--partitions", "0"))
    assert line.endswith("The partitions must be greater than 0")


def test_invalid_topic_config_is_rejected(broker: Any, topic_name: str) -> None:
    line = one_line_error(topics(broker, "--create", "--topic", topic_name, "--config", "no.such.config=1"))
    assert "no.such.config" in line or "config" in line.lower(), line


def test_collision_warning(broker: Any, topic_name: str) -> None:
    out = ok(topics(broker, "--create", "--topic", topic_name + "_x"))
    assert out.startswith("WARNING: Due to limitations in metric names") and out.endswith(
        f"Created topic {topic_name}_x.\n"
    )
