"""Apache Kafka's own command-line tools (Kafka 4.4, the `tools` jar set) as the tests run them.

Kafka's `bin/kafka-*.sh` scripts are thin wrappers around `kafka-run-class.sh <MainClass>`;
here the same main classes run as `java -cp <build/jars/tools> <MainClass> args...`, with
Kafka's tools logging configured as the scripts do (scripts/jars/tools/log4j2.xml: WARN, to
stderr), so that stdout is the tool's own output. The jars come from
`scripts/kafka-jars.sh tools` (Maven, once; then cached in build/jars/tools).

The `kafka_tools` fixture (imported by tests/compat/conftest.py and by the cluster tests) skips
when there is no JDK or the jars cannot be fetched, unless SAMSA_REQUIRE_JAVA is set (./test.sh
sets it), where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOG_CONFIG = REPO / "scripts" / "jars" / "tools" / "log4j2.xml"

# bin/kafka-<name>.sh → its main class (Kafka 4.4: the tools moved from core's kafka.admin /
# kafka.tools to the kafka-tools jar)
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
}

# C1 only, the serial collector and the CDS archive: these short runs start faster on 2 loaded
# cores (about 1.5 s of JVM and class loading per run)
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto", "-Xmx512m",
             f"-Dlog4j2.configurationFile={LOG_CONFIG}"]


@dataclass
class ToolRun:
    """One run of a tool: its exit code and output, and how long it took."""

    args: list[str]
    rc: int
    stdout: str
    stderr: str
    seconds: float

    def __str__(self) -> str:
        return (f"`{' '.join(self.args)}` exited {self.rc} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}")

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class KafkaTools:
    """Runs Kafka's tools: `tools.run("kafka-topics", "--bootstrap-server", b, "--list")`."""

    def __init__(self, java: str, classpath: str) -> None:
        self.java = java
        self.classpath = classpath

    def command(self, tool: str, *args: str) -> list[str]:
        main = MAIN_CLASSES.get(tool, tool)  # a short name, or a main class itself
        return [self.java, *JVM_FLAGS, "-cp", self.classpath, main, *args]

    def run(self, tool: str, *args: str, input: str | None = None, timeout: float = 120) -> ToolRun:
        """Run a tool to its end (stdin is `input`, or empty); fails the test if it outlives
        `timeout` (a tool that hangs on an answer it does not expect is a finding too)."""
        cmd = self.command(tool, *args)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, input=input or "", capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            pytest.fail(f"{tool} {' '.join(args)} did not finish within {timeout} s\n--- stdout ---\n{out[-4000:]}"
                        f"\n--- stderr ---\n{err[-4000:]}")
        return ToolRun([tool, *args], proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)

    def ok(self, tool: str, *args: str, input: str | None = None, timeout: float = 120) -> ToolRun:
        """run(), asserting exit code 0."""
        r = self.run(tool, *args, input=input, timeout=timeout)
        assert r.rc == 0, str(r)
        return r


def required() -> bool:
    return os.environ.get("SAMSA_REQUIRE_JAVA", "") not in ("", "0")


@pytest.fixture(scope="session")
def kafka_tools() -> KafkaTools:
    """Kafka 4.4's tools: the jars from scripts/kafka-jars.sh (Maven, cached in build/jars/tools).
    Skips without a JDK or the jars, unless SAMSA_REQUIRE_JAVA is set (then fails)."""

    def unavailable(why: str) -> None:
        if required():
            pytest.fail(f"{why} (and SAMSA_REQUIRE_JAVA is set)")
        pytest.skip(f"{why}: run scripts/install-deps.sh (SAMSA_REQUIRE_JAVA=1 makes this a failure)")

    java = shutil.which("java")
    if java is None:
        unavailable("no java: Kafka's tools need a JRE")
    assert java is not None
    jars = subprocess.run(["bash", str(REPO / "scripts" / "kafka-jars.sh"), "--print-classpath", "tools"],
                          capture_output=True, text=True, timeout=900)
    if jars.returncode != 0:
        unavailable("Kafka's tools jars could not be fetched: "
                    + (jars.stderr.strip().splitlines() or ["(no message)"])[-1])
    return KafkaTools(java, jars.stdout.strip())
