"""`samsa get-offsets` and `samsa delete-records` beside Kafka 4.4's own GetOffsetShell and
DeleteRecordsCommand, the same arguments against the same Samsa broker: the same output.

Where the two differ by design the test says so: Kafka's DeleteRecordsCommand lists the
partitions in no fixed order (an immutable Java map's), so its lines are compared as a set;
a topic that does not exist fails at once here, where Kafka's Admin client retries its
metadata for a minute before it gives up; bad input is one line here, Kafka's message plus
the parser's reason, where Kafka's tool adds a stack trace.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.brokerproc import BrokerProcess
from tests.compat.helpers import ck_create_topic, ck_produce, ck_producer, make_records
from tests.compat.kafkatools import KafkaTools, ToolRun

TS = 1_700_000_000_000


def samsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True, text=True, timeout=120)


def _without_logging(stderr: str) -> list[str]:
    """A tool's stderr without its client's log lines ("[2026-...] WARN ...")."""
    return [line for line in stderr.splitlines() if not re.match(r"\[\d{4}-\d\d-\d\d ", line)]


def test_get_offsets_as_kafka(broker: BrokerProcess, kafka_tools: KafkaTools, topic_name: str) -> None:
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    ck_create_topic(broker.bootstrap, a, partitions=12)  # (sorted as text: a-10 before a-2, as Kafka does)
    ck_create_topic(broker.bootstrap, b, partitions=2)
    recs = make_records("go", 10, TS)
    for p in (0, 2, 11):
        ck_produce(ck_producer(broker.bootstrap), a, recs[: 4 + p // 2], partition=p)
    ck_produce(ck_producer(broker.bootstrap), b, recs, partition=1)
    cases = [
        ["--topic", f"{topic_name}.*"],
        ["--topic", a, "--time", "-2"],
        ["--topic", a, "--time", "earliest-local"],  # (-4: the log start, no tiered storage)
        ["--topic", a, "--time", "-3"],
        ["--topic", f"{topic_name}.*", "--time", str(TS + 35)],  # the first record at or after it
        ["--topic", f"{topic_name}.*", "--time", "-5"],  # latest tiered: none, so no line
        ["--topic", a, "--time", "-6"],  # earliest pending upload (ListOffsets v11): none
        ["--topic-partitions", f"{a}:1-3,{b}:1,{topic_name}-.:11", "--time", "latest"],
        ["--topic", a, "--partitions", "0,11"],
        ["--time", "soon"],  # errors: Kafka's words
        ["--topic", a, "--topic-partitions", f"{b}:0"],
        ["--topic", f"{topic_name}-none"],
        ["--topic", a, "--partitions", "1,x"],
    ]
    for case in cases:
        args = ["--bootstrap-server", broker.bootstrap, *case]
        ours, theirs = samsa("get-offsets", *args), kafka_tools.run("kafka-get-offsets", *args)
        assert (ours.returncode, ours.stdout) == (theirs.rc, theirs.stdout), f"{case}\n{ours}\n{theirs}"
        assert ours.stderr.splitlines() == _without_logging(theirs.stderr), f"{case}\n{ours.stderr}\n{theirs}"
    ours = samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", f"{topic_name}.*")
    assert ours.stdout.splitlines()[:5] == [f"{a}:0:4", f"{a}:1:0", f"{a}:10:0", f"{a}:11:9", f"{a}:2:5"]


def _lines(r: subprocess.CompletedProcess[str] | ToolRun) -> list[str]:
    return r.stdout.splitlines()


def test_delete_records_as_kafka(broker: BrokerProcess, kafka_tools: KafkaTools, topic_name: str,
                                 tmp_path: Path) -> None:
    ck_create_topic(broker.bootstrap, topic_name, partitions=4)
    for p in range(3):
        ck_produce(ck_producer(broker.bootstrap), topic_name, make_records("del", 10, TS), partition=p)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic_name, "partition": 0, "offset": 3},
        {"topic": topic_name, "partition": 1, "offset": -1},  # everything: up to the high watermark
        {"topic": topic_name, "partition": 2, "offset": 50},  # past the end
        {"topic": topic_name, "partition": 3, "offset": 0},
    ]}))
    args = ["--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec)]
    ours = samsa("delete-records", *args)
    assert ours.returncode == 0, ours.stderr
    out_of_range = ("error: org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is not "
                    "within the range of offsets maintained by the server.")
    assert _lines(ours) == ["Executing records delete operation", "Records delete operation completed:",
                            f"partition: {topic_name}-0\tlow_watermark: 3", f"partition: {topic_name}-1\tlow_watermark: 10",
                            f"partition: {topic_name}-2\t{out_of_range}", f"partition: {topic_name}-3\tlow_watermark: 0"]
    # Kafka's tool on the same file: deleting again changes nothing, and it says the same
    theirs = kafka_tools.ok("kafka-delete-records", *args)
    assert _lines(theirs)[:2] == _lines(ours)[:2] and sorted(_lines(theirs)[2:]) == sorted(_lines(ours)[2:])

    # refusals, before anything is deleted: Kafka's sentence, one line, exit 1
    refusals = [
        ("{not json", "The input string is not a valid JSON"),
        (json.dumps({"version": 2, "partitions": []}), "Not supported version field value 2"),
        (json.dumps({"topics": []}), "Missing partitions field"),
        (json.dumps({"partitions": [{"topic": topic_name, "partition": 0, "offset": 1},
                                    {"topic": topic_name, "partition": 0, "offset": 2}]}),
         f"Offset json file contains duplicate topic partitions: {topic_name}-0"),
    ]
    for text, first_line in refusals:
        spec.write_text(text)
        ours, theirs = samsa("delete-records", *args), kafka_tools.run("kafka-delete-records", *args)
        assert ours.returncode == theirs.rc == 1, f"{text}\n{ours}\n{theirs}"
        assert theirs.stderr.splitlines()[0] == first_line, theirs
        assert len(ours.stderr.splitlines()) == 1 and ours.stderr.startswith(first_line), ours.stderr
        assert ours.stdout == theirs.stdout == ""
    r = samsa("delete-records", "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(tmp_path / "none"))
    assert r.returncode == 1 and r.stderr.strip() == f"cannot read {tmp_path / 'none'}: No such file or directory"
