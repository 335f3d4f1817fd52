"""`samsa delete-records`: kafka-delete-records.sh — delete a partition's records below an offset.

    samsa delete-records --bootstrap-server S --offset-json-file FILE [--command-config FILE]

The file is Kafka's:

    {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}

(`version` may be left out; an offset of -1 means the high watermark: everything). The output
is Kafka's (its tool lists the partitions in no fixed order, an immutable Java map's; here they
come in the file's order):

    Executing records delete operation
    Records delete operation completed:
    partition: foo-1	low_watermark: 1
    partition: foo-2	error: org.apache.kafka.common.errors.OffsetOutOfRangeException: ...

A file that cannot be read or is not such a document ends the tool with one line saying why
(exit 1) before anything is deleted, as does a partition named twice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.java_order import hashmap_order, topic_partition_hash

_UNKNOWN = ("UnknownTopicOrPartitionException", "This server does not host this topic-partition.")
# librdkafka's error -> the exception Kafka's Admin client fails the partition's future with
# (its class and message, as the tool prints them)
_JAVA_ERRORS = {
    KafkaError.OFFSET_OUT_OF_RANGE: (
        "OffsetOutOfRangeException",
        "The requested offset is not within the range of offsets maintained by the server."),
    KafkaError.UNKNOWN_TOPIC_OR_PART: _UNKNOWN,
    KafkaError._UNKNOWN_TOPIC: _UNKNOWN,
    KafkaError._UNKNOWN_PARTITION: _UNKNOWN,
    KafkaError.TOPIC_AUTHORIZATION_FAILED: ("TopicAuthorizationException", "Topic authorization failed."),
    KafkaError.POLICY_VIOLATION: ("PolicyViolationException",
                                  "Request parameters do not satisfy the configured policy."),
    KafkaError.KAFKA_STORAGE_ERROR: (
        "KafkaStorageException", "Disk error when trying to access log file on the disk."),
}


class ToolError(CliError):
    """Printed bare, as Kafka's tool prints its exception's message."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa delete-records", description="Delete records of the given partitions down to "
                       "the specified offset (like kafka-delete-records.sh).")
    p.add_argument("--bootstrap-server", metavar="SERVER", required=True, help="REQUIRED: the server to connect to")
    p.add_argument("--offset-json-file", metavar="FILE", required=True,
                   help='REQUIRED: the JSON file with the offset per partition: {"partitions": [{"topic": "foo", '
                        '"partition": 1, "offset": 1}], "version": 1}')
    p.add_argument("--command-config", metavar="FILE", help="a properties file of admin client settings")
    return p


def _field(obj: dict[str, Any], name: str) -> Any:
    if name not in obj:
        raise ToolError(f"No such field exists: `{name}`")
    return obj[name]


def _int(value: Any, what: str, bits: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ToolError(f"Expected `{what}` value, received {json.dumps(value)}")
    return value


def parse_offsets(text: str) -> dict[tuple[str, int], list[int]]:
    """The file's offsets per partition, in the order first named (duplicates kept, to report)."""
    try:
        doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not JSON")))
    except ValueError as e:
        raise ToolError(f"The input string is not a valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ToolError(f"Expected JSON object, received {json.dumps(doc)}")
    version = _int(doc["version"], "Int", 32) if "version" in doc else 1
    if version != 1:
        raise ToolError(f"Not supported version field value {version}")
    if "partitions" not in doc:
        raise ToolError("Missing partitions field")
    partitions = doc["partitions"]
    if not isinstance(partitions, list):
        raise ToolError(f"Expected JSON array, received {json.dumps(partitions)}")
    out: dict[tuple[str, int], list[int]] = {}
    for p in partitions:
        if not isinstance(p, dict):
            raise ToolError(f"Expected JSON object, received {json.dumps(p)}")
        topic = _field(p, "topic")
        if not isinstance(topic, str):
            raise ToolError(f"Expected `String` value, received {json.dumps(topic)}")
        partition = _int(_field(p, "partition"), "Int", 32)
        offset = _int(_field(p, "offset"), "Long", 64)
        out.setdefault((topic, partition), []).append(offset)
    return out


def _java_error(err: KafkaError) -> str:
    name, message = _JAVA_ERRORS.get(err.code(), (None, None))
    if name is None:
        return cl.error_message(err)
    return f"org.apache.kafka.common.errors.{name}: {message}"


def _run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    try:
        text = Path(a.offset_json_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ToolError(f"cannot read {a.offset_json_file}: {getattr(e, 'strerror', None) or e}") from None
    offsets = parse_offsets(text)
    order = list(offsets)
    # (listed as Kafka does: in its HashMap's order, java_order.py)
    duplicates = [tp for tp in hashmap_order(order, topic_partition_hash, computed=True) if len(offsets[tp]) > 1]
    if duplicates:
        raise ToolError("Offset json file contains duplicate topic partitions: "
                        + ",".join(f"{t}-{p}" for t, p in duplicates))
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    print("Executing records delete operation")
    futures = admin.delete_records([TopicPartition(t, p, offsets[(t, p)][0]) for t, p in order],
                                   request_timeout=errors.timeout, operation_timeout=errors.timeout)
    by_tp = {(tp.topic, tp.partition): f for tp, f in futures.items()}
    print("Records delete operation completed:")
    for topic, partition in order:
        try:
            deleted = by_tp[(topic, partition)].result(timeout=errors.timeout + 2.0)
        except Exception as e:  # noqa: BLE001 - each partition's failure is a line of the report
            err = cl.kafka_error(e)
            why = _java_error(err) if err is not None else (str(e) or type(e).__name__)
            print(f"partition: {topic}-{partition}\terror: {why}")
            continue
        print(f"partition: {topic}-{partition}\tlow_watermark: {deleted.low_watermark}")
    sys.stdout.flush()
    return 0


@cl.one_line_errors
def run(argv: list[str]) -> int:
    try:
        return _run(argv)
    except ToolError as e:
        print(e, file=sys.stderr)
        return 1
