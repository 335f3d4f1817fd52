"""`samsa configs` against a real broker: topic and broker dynamic configs."""

from __future__ import annotations

import re
from typing import Any

from tests.cli.helpers import ok, one_line_error, samsa


def configs(broker: Any, *args: str) -> Any:
    return samsa("configs", "--bootstrap-server", broker.bootstrap, *args)


LINE = re.compile(r"  (\S+?)=(.*) sensitive=(true|false) synonyms=\{(.*)\}")


def entries(out: str) -> dict[str, tuple[str, str]]:
    """name → (value, synonyms) from Kafka's describe lines (the header is checked by callers)."""
    found: dict[str, tuple[str, str]] = {}
    for line in out.splitlines()[1:]:
        m = LINE.fullmatch(line)
        assert m, line
        found[m.group(1)] = (m.group(2), m.group(4))
    return found


def test_topic_configs(broker: Any, topic_name: str) -> None:
    t = topic_name
    ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", t))
    assert ok(configs(broker, "--entity-type", "topics", "--entity-name", t, "--describe")) == (
        f"Dynamic configs for topic {t} are:\n"
    )

    out = ok(
        configs(
            broker,
            "--entity-type",
            "topics",
            "--entity-name",
            t,
            "--alter",
            "--add-config",
            "retention.ms=1000,cleanup.policy=[compact,delete]",
        )
    )
    assert out == f"Completed updating config for topic {t}.\n"

    out = ok(configs(broker, "--topic", t, "--describe"))
    assert out.splitlines()[0] == f"Dynamic configs for topic {t} are:"
    found = entries(out)
    assert set(found) == {"retention.ms", "cleanup.policy"}
    assert found["retention.ms"][0] == "1000"
    assert found["retention.ms"][1].startswith("DYNAMIC_TOPIC_CONFIG:retention.ms=1000")
    assert found["cleanup.policy"][0] == "compact,delete"
    assert sorted(found) == list(found)  # Kafka sorts by name

    out = ok(configs(broker, "--topic", t, "--alter", "--delete-config", "retention.ms"))
    assert out == f"Completed updating config for topic {t}.\n"
    assert set(entries(ok(configs(broker, "--topic", t, "--describe")))) == {"cleanup.policy"}

    line = one_line_error(configs(broker, "--topic", t, "--alter", "--delete-config", "retention.ms"))
    assert line.endswith("Invalid config(s): retention.ms")

    out = ok(configs(broker, "--topic", t, "--describe", "--all"))
    assert out.splitlines()[0] == f"All configs for topic {t} are:"
    everything = entries(out)
    assert everything["cleanup.policy"][0] == "compact,delete" and "segment.bytes" in everything


def test_topic_config_of_missing_topic(broker: Any, topic_name: str) -> None:
    out = ok(configs(broker, "--topic", topic_name, "--describe"))
    assert out == f"The topic '{topic_name}' doesn't exist and doesn't have dynamic config.\n"
    one_line_error(configs(broker, "--topic", topic_name, "--alter", "--add-config", "retention.ms=1"))


def test_invalid_topic_config_value(broker: Any, topic_name: str) -> None:
    ok(samsa("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic_name))
    one_line_error(configs(broker, "--topic", topic_name, "--alter", "--add-config", "retention.ms=soon"))


def test_broker_configs(broker: Any) -> None:
    out = ok(
        configs(
            broker, "--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "log.cleaner.threads=2"
        )
    )
    assert out == "Completed updating config for broker 0.\n"
    out = ok(configs(broker, "--broker", "0", "--describe"))
    assert out.splitlines()[0] == "Dynamic configs for broker 0 are:"
    found = entries(out)
    assert found["log.cleaner.threads"][0] == "2"
    assert found["log.cleaner.threads"][1].startswith("DYNAMIC_BROKER_CONFIG:log.cleaner.threads=2")

    out = ok(
        configs(
            broker,
            "--entity-type",
            "brokers",
            "--entity-default",
            "--alter",
            "--add-config",
            "log.retention.bytes=1000000",
        )
    )
    assert out == "Completed updating default config for brokers in the cluster.\n"
    out = ok(configs(broker, "--entity-type", "brokers", "--entity-default", "--describe"))
    assert out.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert entries(out)["log.retention.bytes"][0] == "1000000"

    out = ok(configs(broker, "--entity-type", "brokers", "--describe"))
    assert "Dynamic configs for broker 0 are:" in out.splitlines()
    assert "Default configs for brokers in the cluster are:" in out.splitlines()

    for args in (["--broker", "0"], ["--entity-type", "brokers", "--entity-default"]):
        key = "log.cleaner.threads" if args[0] == "--broker" else "log.retention.bytes"
        ok(configs(broker, *args, "--alter", "--delete-config", key))
    assert "log.cleaner.threads" not in ok(configs(broker, "--broker", "0", "--describe"))

    out = ok(configs(broker, "--broker", "0", "--describe", "--all"))
    assert out.splitlines()[0] == "All configs for broker 0 are:" and "log.dirs" in entries(out)


def test_unknown_broker(broker: Any) -> None:
    out = ok(configs(broker, "--broker", "7", "--describe"))
    assert out == "The broker '7' doesn't exist and doesn't have dynamic config.\n"
