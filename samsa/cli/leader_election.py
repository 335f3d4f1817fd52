"""`samsa leader-election`: kafka-leader-election.sh — preferred or unclean leader election.

Partitions come from exactly one of `--topic T --partition P`, `--all-topic-partitions` or
`--path-to-json-file F` (``{"partitions": [{"topic": "t", "partition": 0}, ...]}``). The
request goes to the controller through librdkafka's ElectLeaders. Output is Kafka's:

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: <error>

and the exit code is non-zero when any partition failed (ELECTION_NOT_NEEDED is no failure).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.protocol.errors import ErrorCode

# How long the election may take when default.api.timeout.ms does not say (Kafka's tool: 30 s).
DEFAULT_ELECTION_TIMEOUT_S = 30.0

ELECTION_TYPES = ("PREFERRED", "UNCLEAN")

Partition = tuple[str, int]


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa leader-election",
        description="Run a preferred or unclean leader election for partitions (like kafka-leader-election.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument(
        "--admin.config",
        "--command-config",
        dest="admin_config",
        metavar="FILE",
        help="Property file with configs for the admin client.",
    )
    p.add_argument(
        "--election-type",
        metavar="TYPE",
        help="REQUIRED: PREFERRED (elect the preferred replica when it is in sync) or UNCLEAN "
        "(elect any live replica when no in-sync replica is alive). Case-insensitive.",
    )
    p.add_argument("--topic", metavar="TOPIC",
                   help="The topic of the partition to elect a leader for; needs --partition.")
    p.add_argument("--partition", metavar="N", help="The partition to elect a leader for; needs --topic.")
    p.add_argument(
        "--all-topic-partitions", action="store_true", help="Elect leaders for every partition of every topic."
    )
    p.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='JSON file naming the partitions: {"partitions": [{"topic": "foo", "partition": 1}, ...]}',
    )
    return p


def check_args(p: ArgumentParser, a: Any) -> str:
    """Validate the options; returns the election type in upper case."""
    missing = [flag for flag, v in (("--bootstrap-server", a.bootstrap_server), ("--election-type", a.election_type))
               if not v]
    if missing:
        p.error("missing required option(s): " + ", ".join(missing))
    election = a.election_type.strip().upper()
    if election not in ELECTION_TYPES:
        p.error(f"--election-type must be PREFERRED or UNCLEAN, not {a.election_type!r}")
    given = [flag for flag, v in (("--topic", a.topic), ("--all-topic-partitions", a.all_topic_partitions),
                                  ("--path-to-json-file", a.path_to_json_file)) if v]
    if len(given) != 1:
        p.error("exactly one of --topic, --all-topic-partitions or --path-to-json-file is required"
                + (f" (got {', '.join(given)})" if given else ""))
    if a.topic and a.partition is None:
        p.error("--topic needs --partition")
    if a.partition is not None and not a.topic:
        p.error("--partition is only allowed with --topic")
    if a.partition is not None:
        try:
            if int(a.partition) < 0:
                raise ValueError
        except ValueError:
            p.error(f"--partition expects a non-negative integer, got {a.partition!r}")
    return election


def parse_election_json(text: str, source: str = "the JSON file") -> list[Partition]:
    """The partitions of a `--path-to-json-file`, in file order; duplicates are an error."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise CliError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(doc, dict) or "partitions" not in doc:
        raise CliError(f'{source}: expected an object with a "partitions" list')
    entries = doc["partitions"]
    if not isinstance(entries, list):
        raise CliError(f'{source}: "partitions" must be a list')
    out: list[Partition] = []
    for i, entry in enumerate(entries):
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or not topic:
            raise CliError(f'{source}: partitions[{i}] needs a non-empty "topic" string')
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise CliError(f'{source}: partitions[{i}] needs a non-negative integer "partition"')
        out.append((topic, partition))
    seen: set[Partition] = set()
    dupes = []
    for tp in out:
        if tp in seen and tp not in dupes:
            dupes.append(tp)
        seen.add(tp)
    if dupes:
        raise CliError("Replica election data contains duplicate partitions: " + ",".join(f"{t}-{p}" for t, p in dupes))
    return out


def format_results(election: str, results: Mapping[Partition, tuple[int, str | None]]) -> tuple[list[str], int]:
    """Kafka's report of an election: (output lines, number of failed partitions).
    ``results`` maps partitions to (error code, message); code 0 is success."""
    ordered = sorted(results)
    succeeded = [tp for tp in ordered if results[tp][0] == ErrorCode.NONE]
    noop = [tp for tp in ordered if results[tp][0] == ErrorCode.ELECTION_NOT_NEEDED]
    failed = [tp for tp in ordered if results[tp][0] not in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)]
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({election}) for partitions "
                     + ", ".join(f"{t}-{p}" for t, p in succeeded))
    if noop:
        lines.append("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in noop))
    for t, p in failed:
        code, message = results[(t, p)]
        lines.append(f"Error completing leader election ({election}) for partition: {t}-{p}: "
                     f"{_error_text(code, message)}")
    return lines, len(failed)


def _error_text(code: int, message: str | None) -> str:
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    if message and message != name:
        return f"{name}: {message}"
    return name


def _timeout(props: dict[str, str]) -> float:
    if "default.api.timeout.ms" in props:
        try:
            return int(props["default.api.timeout.ms"]) / 1000.0
        except ValueError:
            raise CliError(f"invalid value for default.api.timeout.ms: {props['default.api.timeout.ms']!r}") from None
    return DEFAULT_ELECTION_TIMEOUT_S


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    if not argv:
        p.print_help()
        return 1
    a = p.parse_args(argv)
    election = check_args(p, a)
    partitions: list[Partition] | None
    if a.path_to_json_file:
        try:
            text = Path(a.path_to_json_file).read_text(encoding="utf-8")
        except OSError as e:
            raise CliError(f"cannot read {a.path_to_json_file}: {e.strerror or e}") from None
        partitions = parse_election_json(text, a.path_to_json_file)
    elif a.topic:
        partitions = [(a.topic, int(a.partition))]
    else:
        partitions = None
    props = cl.load_properties(a.admin_config) if a.admin_config else {}
    timeout = _timeout(props)
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    if partitions is not None and not partitions:
        return 0  # an empty list elects nothing (as Kafka's tool)
    results = _elect(admin, election, partitions, timeout)
    lines, failed = format_results(election, results)
    if lines:
        print("\n".join(lines), flush=True)
    if failed:
        raise CliError(f"{failed} replica(s) could not be elected")
    return 0


def _elect(admin: AdminClient, election: str, partitions: list[Partition] | None,
           timeout: float) -> dict[Partition, tuple[int, str | None]]:
    etype = ElectionType.PREFERRED if election == "PREFERRED" else ElectionType.UNCLEAN
    tps = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
    # No request_timeout/operation_timeout: confluent-kafka 2.16's binding rejects its own keyword
    # arguments for this call. librdkafka then times out after socket.timeout.ms; the wait on
    # the future below enforces the tool's timeout.
    fut = admin.elect_leaders(etype, tps)
    try:
        raw = fut.result(timeout=timeout + 2.0)
    except KafkaException as e:
        err = cl.kafka_error(e)
        if err is not None and err.code() == KafkaError._TIMED_OUT:
            raise CliError("Timeout waiting for election results") from None
        if err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            raise CliError("Not authorized to perform leader election") from None
        raise CliError(f"leader election failed: {cl.error_message(err) if err is not None else e}") from None
    except TimeoutError:
        raise CliError("Timeout waiting for election results") from None
    out: dict[Partition, tuple[int, str | None]] = {}
    for tp, outcome in raw.items():
        if outcome is None:
            out[(tp.topic, tp.partition)] = (0, None)
            continue
        # Per-partition outcomes are KafkaError values (KafkaException in some versions).
        err = outcome if isinstance(outcome, KafkaError) else cl.kafka_error(outcome)
        if err is None:
            out[(tp.topic, tp.partition)] = (int(ErrorCode.UNKNOWN_SERVER_ERROR), str(outcome))
        else:
            out[(tp.topic, tp.partition)] = (int(err.code()), _message(err))
    return out


def _message(err: KafkaError) -> str | None:
    """librdkafka's text for a per-partition error, without a repeat of the code's name."""
    text = err.str()
    return None if not text or text.startswith("Broker: ") else text
