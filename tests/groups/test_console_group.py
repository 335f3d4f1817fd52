"""`samsa console-consumer --group` commits as it reads, so the next run resumes."""

from __future__ import annotations

import subprocess
import sys

from confluent_kafka import Consumer, TopicPartition

from tests.brokerproc import BrokerProcess
from tests.groups.test_groups_clients import create, produce


def console(b: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa", "console-consumer", "--bootstrap-server", b.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)


def test_console_consumer_group_resumes(broker: BrokerProcess, topic_name: str) -> None:
    create(broker, topic_name, 1)
    produce(broker, topic_name, range(10), 1)
    first = console(broker, "--topic", topic_name, "--group", topic_name, "--from-beginning", "--max-messages", "4")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["0", "1", "2", "3"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name})
    committed = c.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset
    c.close()
    assert committed == 4
    second = console(broker, "--topic", topic_name, "--group", topic_name, "--max-messages", "6")
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["4", "5", "6", "7", "8", "9"]
