"""`samsa topics`: kafka-topics.sh — create, list, describe, alter (partitions) and delete topics.

Flags, checks and output follow Kafka's `TopicCommand`: `--topic` is a regular expression for
everything but `--create`; `--describe` prints one `Topic:` line (with the non-default configs)
and one tab-separated line per partition; `--alter` and `--delete` print nothing on success.

`--describe` with `--under-replicated-partitions`, `--unavailable-partitions`,
`--under-min-isr-partitions` or `--at-min-isr-partitions` prints only the partition lines that
match any of the given filters (no `Topic:` lines). Partitions being reassigned show their
adding and removing replicas, and count only their target replicas towards the replication
factor (the reassignments are asked of the controller; when that fails, as with a broker
without the API, partitions are described without them, as Kafka's tool does).
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, NoReturn

from confluent_kafka import KafkaError, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, NewTopic

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.controller_client import ControllerClient

_ACTIONS = ("create", "list", "alter", "describe", "delete")
_REPORTS = (
    "under_replicated_partitions",
    "unavailable_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa topics",
        description="Create, delete, describe, or change a topic (like kafka-topics.sh).",
    )
    p.add_argument("--bootstrap-server", metavar="SERVER", help="REQUIRED: The Kafka server to connect to.")
    p.add_argument(
        "--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client."
    )
    p.add_argument("--list", action="store_true", help="List all available topics.")
    p.add_argument("--create", action="store_true", help="Create a new topic.")
    p.add_argument("--delete", action="store_true", help="Delete a topic.")
    p.add_argument("--alter", action="store_true", help="Alter the number of partitions and replica assignment.")
    p.add_argument("--describe", action="store_true", help="List details for the given topics.")
    p.add_argument(
        "--topic",
        metavar="TOPIC",
        help="The topic to create, alter, describe or delete. It also accepts a regular expression, "
        "except for --create option.",
    )
    p.add_argument("--topic-id", metavar="TOPIC_ID", help="The topic-id to describe.")
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=VALUE",
        help="A topic configuration override for the topic being created (repeatable).",
    )
    p.add_argument(
        "--partitions", type=int, metavar="N", help="The number of partitions for the topic being created or altered."
    )
    p.add_argument(
        "--replication-factor",
        type=int,
        metavar="N",
        help="The replication factor for each partition in the topic being created.",
    )
    p.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4,...",
        help="A list of manual partition-to-broker assignments for the topic being created or altered.",
    )
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="If set when describing topics, only show under-replicated partitions.",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="If set when describing topics, only show partitions whose leader is not available.",
    )
    p.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="If set when describing topics, only show partitions whose isr count is less than the configured minimum.",
    )
    p.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="If set when describing topics, only show partitions whose isr count is equal to the configured minimum.",
    )
    p.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="If set when describing topics, only show topics that have overridden configs.",
    )
    p.add_argument(
        "--if-exists",
        action="store_true",
        help="If set when altering or deleting or describing topics, the action will only execute if the topic exists.",
    )
    p.add_argument(
        "--if-not-exists",
        action="store_true",
        help="If set when creating topics, the action will only execute if the topic does not already exist.",
    )
    p.add_argument(
        "--exclude-internal", action="store_true", help="Exclude internal topics when listing or describing topics."
    )
    p.add_argument(
        "--partition-size-limit-per-response", type=int, metavar="N", help="Accepted for compatibility; ignored."
    )
    return p


def _check_args(p: ArgumentParser, a: argparse.Namespace) -> None:
    actions = [name for name in _ACTIONS if getattr(a, name)]
    if len(actions) != 1:
        p.error("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    action = actions[0]
    if not a.bootstrap_server:
        p.error("--bootstrap-server must be specified")
    if action not in ("list", "describe") and not a.topic:
        p.error('Missing required argument "[topic]"')
    if action == "alter" and a.partitions is None:
        p.error('Missing required argument "[partitions]"')
    if action == "alter" and a.config:
        p.error(
            'Option "[config]" can\'t be used with option "[alter]" (To alter topic configurations, use samsa configs.)'
        )

    def only(flag: str, allowed: tuple[str, ...]) -> None:
        if action not in allowed:
            p.error(f'Option "[{flag}]" can\'t be used with option "[{action}]"')

    if a.config:
        only("config", ("create",))
    if a.partitions is not None:
        only("partitions", ("create", "alter"))
    if a.replication_factor is not None:
        only("replication-factor", ("create",))
    if a.replica_assignment:
        only("replica-assignment", ("create", "alter"))
        if action == "create" and (a.partitions is not None or a.replication_factor is not None):
            p.error(
                'Option "[replica-assignment]" can\'t be used with options "[partitions]" or "[replication-factor]"'
            )
    for report in _REPORTS:
        if getattr(a, report):
            only(report.replace("_", "-"), ("describe",))
            if a.topics_with_overrides:
                p.error(f'Option "[{report.replace("_", "-")}]" can\'t be used with option "[topics-with-overrides]"')
    if a.topics_with_overrides:
        only("topics-with-overrides", ("describe",))
    if a.if_exists:
        only("if-exists", ("alter", "delete", "describe"))
    if a.if_not_exists:
        only("if-not-exists", ("create",))
    if a.exclude_internal:
        only("exclude-internal", ("list", "describe"))
    if a.topic_id:
        only("topic-id", ("describe",))


@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    if not argv:
        p.print_help()
        return 1
    a = p.parse_args(argv)
    _check_args(p, a)
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    service = _TopicService(admin, md, errors.timeout, props)
    if a.create:
        service.create_topic(a)
    elif a.list:
        service.list_topics(a)
    elif a.describe:
        service.describe_topics(a)
    elif a.alter:
        service.alter_topics(a)
    else:
        service.delete_topics(a)
    sys.stdout.flush()
    return 0


def parse_replica_assignment(text: str) -> list[list[int]]:
    """`0:1,1:2` → [[0, 1], [1, 2]] with Kafka's checks (no duplicates, equal replication factors)."""
    out: list[list[int]] = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise CliError(f"invalid --replica-assignment {text!r}: broker ids must be integers", exit_code=2) from None
        dupes = sorted({b for b in brokers if brokers.count(b) > 1})
        if dupes:
            raise CliError("Partition replica lists may not contain duplicate entries: " + ",".join(map(str, dupes)))
        if out and len(brokers) != len(out[0]):
            raise CliError(f"Partition {i} has different replication factor: {brokers}")
        out.append(brokers)
    return out


def parse_topic_configs(pairs: list[str] | None) -> dict[str, str]:
    """Kafka's `--config` parsing: `key=val`, whitespace around `=` ignored, exactly one `=`."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        pieces = [x for x in re.split(r"\s*=\s*", pair)]
        while pieces and pieces[-1] == "":  # Java's String.split drops trailing empty strings
            pieces.pop()
        if len(pieces) != 2:
            raise CliError(
                'requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".'
            )
        out[pieces[0].strip()] = pieces[1].strip()
    return out


def _error_text(err: KafkaError, topic: str) -> str:
    code = err.code()
    if code == KafkaError.TOPIC_ALREADY_EXISTS:
        return f"Topic '{topic}' already exists."
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return f"Topic '{topic}' does not exist as expected"
    if code == KafkaError.INVALID_REPLICATION_FACTOR:
        msg = cl.error_message(err)
        return msg if msg and msg != "Invalid replication factor" else "Invalid replication factor for topic " + topic
    return cl.error_message(err)


# A partition's ongoing reassignment: (replicas, adding, removing).
Reassignment = tuple[list[int], list[int], list[int]]


class _TopicService:
    def __init__(self, admin: AdminClient, md: Any, timeout: float, props: dict[str, str] | None = None) -> None:
        self.admin = admin
        self.md = md
        self.timeout = timeout
        self.props = props or {}

    def _wait(self, fut: Any, topic: str, what: str) -> Any:
        try:
            return fut.result(timeout=self.timeout + 2.0)
        except Exception as e:  # noqa: BLE001 - every failure becomes one line
            self._fail(e, topic, what)

    def _fail(self, e: BaseException, topic: str, what: str) -> NoReturn:
        err = cl.kafka_error(e)
        if err is not None:
            raise CliError(_error_text(err, topic)) from None
        if isinstance(e, (TimeoutError, FutureTimeout)):
            raise CliError(f"timed out after {self.timeout:g} s waiting for the {what}") from None
        raise CliError(str(e) or type(e).__name__) from None

    # --- create -----------------------------------------------------------------------------
    def create_topic(self, a: argparse.Namespace) -> None:
        topic: str = a.topic
        if a.replication_factor is not None and not 1 <= a.replication_factor <= 32767:
            raise CliError("The replication factor must be between 1 and 32767 inclusive")
        if a.partitions is not None and a.partitions < 1:
            raise CliError("The partitions must be greater than 0")
        configs = parse_topic_configs(a.config)
        if "." in topic or "_" in topic:
            print(
                "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
                "could collide. To avoid issues it is best to use either, but not both."
            )
        if a.replica_assignment:
            assignment = parse_replica_assignment(a.replica_assignment)
            # librdkafka wants the partition count alongside an explicit assignment.
            new = NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment, config=configs)
        else:
            new = NewTopic(
                topic,
                num_partitions=a.partitions if a.partitions is not None else -1,
                replication_factor=a.replication_factor if a.replication_factor is not None else -1,
                config=configs,
            )
        fut = self.admin.create_topics([new], operation_timeout=self.timeout, request_timeout=self.timeout)[topic]
        try:
            fut.result(timeout=self.timeout + 2.0)
        except Exception as e:  # noqa: BLE001 - every failure becomes one line
            err = cl.kafka_error(e)
            if a.if_not_exists and err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            self._fail(e, topic, "topic creation")
        print(f"Created topic {topic}.")

    # --- topic selection --------------------------------------------------------------------
    def topics(self, pattern: str | None, exclude_internal: bool) -> list[str]:
        names = sorted(self.md.topics)
        if pattern is not None:
            rx = cl.topic_matcher(pattern)
            names = [t for t in names if rx.fullmatch(t)]
        if exclude_internal:
            names = [t for t in names if t not in cl.INTERNAL_TOPICS]
        return names

    @staticmethod
    def ensure_exists(found: list[str], requested: str | None, if_exists: bool) -> None:
        if requested and not if_exists and not found:
            raise CliError(f"Topic '{requested}' does not exist as expected")

    # --- list -------------------------------------------------------------------------------
    def list_topics(self, a: argparse.Namespace) -> None:
        print("\n".join(self.topics(a.topic, a.exclude_internal)))

    # --- alter ------------------------------------------------------------------------------
    def alter_topics(self, a: argparse.Namespace) -> None:
        found = self.topics(a.topic, a.exclude_internal)
        self.ensure_exists(found, a.topic, a.if_exists)
        if not found:
            return
        assignment = parse_replica_assignment(a.replica_assignment) if a.replica_assignment else None
        requests = []
        for name in found:
            current = len(self.md.topics[name].partitions)
            if assignment is not None:
                requests.append(NewPartitions(name, a.partitions, assignment[current:]))
            else:
                requests.append(NewPartitions(name, a.partitions))
        futures = self.admin.create_partitions(requests, operation_timeout=self.timeout, request_timeout=self.timeout)
        for name, fut in futures.items():
            self._wait(fut, name, "partition increase")

    # --- delete -----------------------------------------------------------------------------
    def delete_topics(self, a: argparse.Namespace) -> None:
        found = self.topics(a.topic, a.exclude_internal)
        self.ensure_exists(found, a.topic, a.if_exists)
        if not found:
            return
        futures = self.admin.delete_topics(found, operation_timeout=self.timeout, request_timeout=self.timeout)
        for name, fut in futures.items():
            self._wait(fut, name, "topic deletion")

    # --- describe ---------------------------------------------------------------------------
    def describe_topics(self, a: argparse.Namespace) -> None:
        if a.topic_id:
            found = self._topics_by_id(a.topic_id, a.exclude_internal)
            if not found and not a.if_exists:
                raise CliError(f"TopicId '{a.topic_id}' does not exist as expected")
        else:
            found = self.topics(a.topic, a.exclude_internal)
            self.ensure_exists(found, a.topic, a.if_exists)
        if not found:
            return
        described = self._partition_info(found)
        config_futures = self.admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, name) for name in found], request_timeout=self.timeout
        )
        configs = {res.name: self._wait(fut, res.name, "topic configs") for res, fut in config_futures.items()}
        live = set(self.md.brokers)
        describe_configs = not any(getattr(a, r) for r in _REPORTS)
        reassignments = {} if a.topics_with_overrides else self._reassignments(described)
        out: list[str] = []
        for name in found:
            if name not in described:
                continue
            topic_id, partitions = described[name]
            entries = list(configs.get(name, {}).values())
            # Kafka lists every entry whose source is not DEFAULT_CONFIG (static broker settings too).
            overrides = [e for e in entries if cl.source_id(e.source) != ConfigSource.DEFAULT_CONFIG.value]
            if describe_configs and (not a.topics_with_overrides or overrides) and partitions:
                first = partitions[0]
                rf = replication_factor(first[2], reassignments.get((name, first[0])))
                line = f"Topic: {name}"
                if topic_id:
                    line += f"\tTopicId: {topic_id}"
                line += f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}"
                line += "\tConfigs: " + ",".join(f"{e.name}={_value(e.value)}" for e in overrides)
                out.append(line)
            if a.topics_with_overrides:
                continue
            min_isr = _min_isr(configs.get(name, {}))
            for pid, leader, replicas, isr in partitions:
                moving = reassignments.get((name, pid))
                if describe_configs or _selected(a, leader, replicas, isr, live, min_isr, moving):
                    out.append(partition_line(name, pid, leader, replicas, isr, moving))
        if out:
            print("\n".join(out))

    def _reassignments(
        self, described: dict[str, tuple[str | None, list[tuple[int, int | None, list[int], list[int]]]]]
    ) -> dict[tuple[str, int], Reassignment]:
        """The described partitions' ongoing reassignments, from the controller; {} when it
        cannot say (Kafka's tool also describes without them then)."""
        wanted = [(name, part[0]) for name, (_, parts) in described.items() for part in parts]
        if not wanted:
            return {}
        try:
            return ControllerClient(self.admin, self.props, min(self.timeout, 5.0)).list_reassignments(
                wanted, retry=False
            )
        except CliError:
            return {}

    def _topics_by_id(self, topic_id: str, exclude_internal: bool) -> list[str]:
        names = self.topics(None, exclude_internal)
        described = self._partition_info(names) if names else {}
        return [n for n, (tid, _) in described.items() if tid == topic_id]

    def _partition_info(
        self, names: list[str]
    ) -> dict[str, tuple[str | None, list[tuple[int, int | None, list[int], list[int]]]]]:
        """name → (topic id or None, [(partition, leader, replicas, isr)]) sorted by partition."""
        out: dict[str, tuple[str | None, list[tuple[int, int | None, list[int], list[int]]]]] = {}
        try:
            futures = self.admin.describe_topics(TopicCollection(names), request_timeout=self.timeout)
            for name, fut in futures.items():
                d = self._wait(fut, name, "topic description")
                tid = kafka_uuid(d.topic_id)
                parts = sorted(
                    (
                        p.id,
                        p.leader.id if p.leader is not None and p.leader.id >= 0 else None,
                        [n.id for n in p.replicas],
                        [n.id for n in p.isr],
                    )
                    for p in d.partitions
                )
                out[name] = (tid, parts)
            return out
        except CliError:
            pass  # fall back to the Metadata we already have (no topic ids there)
        for name in names:
            tm = self.md.topics.get(name)
            if tm is None:
                continue
            parts = sorted(
                (p.id, metadata_leader(p.leader, p.error), list(p.replicas), list(p.isrs))
                for p in tm.partitions.values()
            )
            out[name] = (None, parts)
        return out


def kafka_uuid(uuid: Any) -> str | None:
    """A topic id as Kafka prints it (URL-safe base64, no padding); None for a missing/zero id.
    (librdkafka's own str() uses the standard alphabet, with '+' and '/'.)"""
    if uuid is None:
        return None
    msb, lsb = uuid.get_most_significant_bits(), uuid.get_least_significant_bits()
    if msb == 0 and lsb == 0:
        return None
    raw = (msb & (2**64 - 1)).to_bytes(8, "big") + (lsb & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _value(v: str | None) -> str:
    return "null" if v is None else v


def _min_isr(entries: dict[str, Any]) -> int:
    e = entries.get("min.insync.replicas")
    try:
        return int(e.value) if e is not None and e.value is not None else 1
    except ValueError:
        return 1


def metadata_leader(leader: int, error: Any) -> int | None:
    """A Metadata partition's leader: None when it has none (-1, or LEADER_NOT_AVAILABLE)."""
    if leader < 0:
        return None
    if error is not None and getattr(error, "code", lambda: None)() == KafkaError.LEADER_NOT_AVAILABLE:
        return None
    return leader


def replication_factor(replicas: list[int], reassignment: Reassignment | None) -> int:
    """A partition's replication factor: its replicas, less those a reassignment is adding."""
    if reassignment is None:
        return len(replicas)
    adding = set(reassignment[1])
    return len([r for r in replicas if r not in adding])


def partition_line(
    topic: str,
    pid: int,
    leader: int | None,
    replicas: list[int],
    isr: list[int],
    reassignment: Reassignment | None = None,
) -> str:
    line = (
        f"\tTopic: {topic}\tPartition: {pid}\tLeader: {leader if leader is not None else 'none'}"
        f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
    )
    if reassignment is not None:
        line += f"\tAdding Replicas: {','.join(map(str, reassignment[1]))}"
        line += f"\tRemoving Replicas: {','.join(map(str, reassignment[2]))}"
    return line


def _selected(
    a: argparse.Namespace,
    leader: int | None,
    replicas: list[int],
    isr: list[int],
    live: set[int],
    min_isr: int,
    reassignment: Reassignment | None = None,
) -> bool:
    """Whether a partition passes any of the given --describe filters (Kafka's rules):
    under-replicated — fewer in-sync replicas than the replication factor; unavailable — no
    leader, or a leader that is not a live broker; under min ISR — no leader, or fewer in-sync
    replicas than min.insync.replicas; at min ISR — exactly min.insync.replicas in sync."""
    if a.under_replicated_partitions and replication_factor(replicas, reassignment) - len(isr) > 0:
        return True
    if a.unavailable_partitions and (leader is None or leader not in live):
        return True
    if a.under_min_isr_partitions and (leader is None or len(isr) < min_isr):
        return True
    return bool(a.at_min_isr_partitions and len(isr) == min_isr)
