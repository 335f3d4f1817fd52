"""`samsa get-offsets`: kafka-get-offsets.sh (Kafka's GetOffsetShell) — partitions' offsets.

    samsa get-offsets --bootstrap-server S [--topic REGEX] [--partitions 0,1]
                      [--topic-partitions RULE,...] [--time T] [--exclude-internal-topics]
                      [--command-config FILE]

prints one `topic:partition:offset` line per partition, sorted as Kafka sorts them (by the text
`topic-partition`), for the offset ListOffsets answers at `--time`:

    -1 or latest                    the high watermark (the default)
    -2 or earliest                  the log start offset
    -3 or max-timestamp             the first record with the largest timestamp
    -4 or earliest-local            the local log's start (Samsa keeps no tiered storage: -2's)
    -5 or latest-tiered             the last offset in remote storage: none here
    -6 or earliest-pending-upload   the first offset not yet in remote storage: none here
    a timestamp (ms)                the first record at or after it

A partition with no such offset (a timestamp after every record; -5 and -6) prints no line.
librdkafka sends none of -4, -5 and -6: for those the tool sends ListOffsets itself, to each
partition's leader, at the version that carries the spec (as Kafka's client does: a broker too
old for it is an UnsupportedVersionException, in Kafka's words).
`--topic` is a regular expression (Kafka's IncludeList: commas are alternatives), `--partitions`
a list of ids; `--topic-partitions` takes rules instead, `REGEX:N`, `REGEX:N-M` (M excluded),
`REGEX:N-`, `REGEX:-M`, or `REGEX` alone for all its partitions. Internal topics are included
unless `--exclude-internal-topics`. Errors are Kafka's sentences, after "Error occurred: " as
its tool prints them; a partition the broker answers with an error is skipped with a line on
stderr.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.protocol.errors import ErrorCode

TIME_NAMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5,
              "earliest-pending-upload": -6}
RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
INT32_MAX = 2**31 - 1
API_VERSIONS = 18
LIST_OFFSETS = 2
LIST_OFFSETS_MAX = 11  # the newest ListOffsets Kafka 4.4's client speaks
# the specs librdkafka refuses to send, and the first ListOffsets version that carries each
LIST_OFFSETS_VERSION_FOR = {-4: 8, -5: 9, -6: 11}
_CODES = frozenset(int(c) for c in ErrorCode)

# a rule: (topic is allowed, partition is allowed)
Rule = tuple[Callable[[str], bool], Callable[[int], bool]]


class ToolError(CliError):
    """Printed as Kafka's tool prints its errors: "Error occurred: ..." (see `run`)."""


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="samsa get-offsets",
                       description="An interactive shell for getting topic-partition offsets "
                                   "(like kafka-get-offsets.sh).")
    p.add_argument("--bootstrap-server", metavar="HOST1:PORT1,...", required=True,
                   help="REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.")
    p.add_argument("--topic-partitions", metavar="RULES",
                   help="comma-separated topic-partition rules: REGEX, REGEX:N, REGEX:N-M (M excluded), REGEX:N-, "
                        "REGEX:-M; cannot be used with --topic or --partitions")
    p.add_argument("--topic", metavar="TOPIC",
                   help="the topics to get offsets for, a regular expression (default: all topics)")
    p.add_argument("--partitions", metavar="IDS", help="comma-separated partition ids (default: all partitions)")
    p.add_argument("--time", default="latest", metavar="T",
                   help="-1 or latest / -2 or earliest / -3 or max-timestamp / -4 or earliest-local / "
                        "-5 or latest-tiered / -6 or earliest-pending-upload, or a timestamp in ms (default: latest)")
    p.add_argument("--command-config", metavar="FILE", help="a properties file of admin client settings")
    p.add_argument("--exclude-internal-topics", action="store_true",
                   help="leave out internal topics (included by default)")
    return p


def parse_time(text: str) -> int:
    """The ListOffsets timestamp `--time` stands for."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise ValueError(text)
        value = int(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
                        "max-timestamp / -4 or earliest-local / -5 or latest-tiered / -6 or earliest-pending-upload, "
                        "or a specified long format timestamp") from None
    if not -(2**63) <= value < 2**63:
        raise ToolError(f"Malformed time argument {text}.")
    return value


def _include_list(pattern: str) -> Callable[[str], bool]:
    regex = cl.topic_matcher(pattern)
    return lambda topic: regex.fullmatch(topic) is not None


def parse_rules(spec: str) -> list[Rule]:
    """`--topic-partitions`: each rule a topic regex and a partition number or range."""
    rules: list[Rule] = []
    for rule in spec.split(","):
        m = RULE.fullmatch(rule)
        if m is None:
            raise ToolError(f"Invalid rule specification: {rule}")
        topic, single, lower, upper = (g or None for g in m.groups())
        topic_ok = _include_list(topic or ".*")
        if single is not None:
            n = int(single)
            rules.append((topic_ok, lambda p, n=n: p == n))  # type: ignore[misc]
        else:
            lo = int(lower) if lower is not None else 0
            hi = int(upper) if upper is not None else INT32_MAX
            rules.append((topic_ok, lambda p, lo=lo, hi=hi: lo <= p < hi))  # type: ignore[misc]
    return rules


def topic_and_partitions_rule(topic: str | None, partitions: str | None) -> list[Rule]:
    ids: set[int] = set()
    if partitions:
        try:
            ids = {int(p) for p in partitions.split(",")}
        except ValueError:
            raise ToolError("--partitions expects a comma separated list of numeric partition ids, but received: "
                            f"{partitions}") from None
    return [(_include_list(topic if topic is not None else ".*"), lambda p: not ids or p in ids)]


def select(topics: dict[str, list[int]], rules: list[Rule]) -> list[tuple[str, int]]:
    """The partitions of `topics` some rule allows."""
    return [(t, p) for t, parts in topics.items() for p in parts
            if any(topic_ok(t) and partition_ok(p) for topic_ok, partition_ok in rules)]


def offset_spec(ts: int) -> Any:
    if ts == -1:
        return OffsetSpec.latest()
    if ts == -2:
        return OffsetSpec.earliest()
    if ts == -3:
        return OffsetSpec.max_timestamp()
    return OffsetSpec.for_timestamp(ts)


def _error_name(code: int) -> str:
    return ErrorCode(code).name if code in _CODES else f"error {code}"


def _list_offsets_raw(md: Any, wanted: list[tuple[str, int]], ts: int, props: dict[str, str],
                      timeout: float) -> dict[tuple[str, int], int | str]:
    """ListOffsets for the specs librdkafka will not send (-4, -5, -6): one request per leader,
    at the version the spec needs (Kafka's client's range: [first version with the spec, 11])
    -> each partition's offset, or the error to report."""
    need = LIST_OFFSETS_VERSION_FOR[ts]
    by_leader: dict[int, list[tuple[str, int]]] = {}
    out: dict[tuple[str, int], int | str] = {}
    for t, p in wanted:
        leader = md.topics[t].partitions[p].leader
        if leader < 0 or leader not in md.brokers:
            out[(t, p)] = "org.apache.kafka.common.errors.LeaderNotAvailableException: There is no leader for this " \
                          "topic-partition as we are in the middle of a leadership election."
        else:
            by_leader.setdefault(leader, []).append((t, p))
    for leader, tps in by_leader.items():
        broker = md.brokers[leader]
        try:
            versions = cl.raw_request(broker.host, broker.port, API_VERSIONS, 0, {}, timeout, props)
            lo, hi = next(((k.min_version, k.max_version) for k in versions.api_keys if k.api_key == LIST_OFFSETS),
                          (0, -1))
            if hi < need:
                for tp in tps:
                    out[tp] = ("org.apache.kafka.common.errors.UnsupportedVersionException: The node does not "
                               f"support LIST_OFFSETS with version in range [{need},{LIST_OFFSETS_MAX}]. The supported "
                               f"range is [{lo},{hi}].")
                continue
            topics: dict[str, list[dict[str, int]]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": -1, "timestamp": ts})
            body = {"replica_id": -1, "isolation_level": 0, "timeout": int(timeout * 1000),
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            resp = cl.raw_request(broker.host, broker.port, LIST_OFFSETS, min(hi, LIST_OFFSETS_MAX), body, timeout,
                                  props)
        except CliError as e:
            for tp in tps:
                out[tp] = str(e)
            continue
        for rt in resp.topics:
            for rp in rt.partitions:
                code = int(rp.error_code)
                out[(rt.name, rp.partition_index)] = int(rp.offset) if code == 0 else _error_name(code)
    return out


def _run(argv: list[str]) -> int:
    a = build_parser().parse_args(argv)
    if a.topic_partitions is not None and (a.topic is not None or a.partitions is not None):
        raise ToolError("--topic-partitions cannot be used with --topic or --partitions")
    ts = parse_time(a.time)
    rules = (parse_rules(a.topic_partitions) if a.topic_partitions is not None
             else topic_and_partitions_rule(a.topic, a.partitions))
    props = cl.load_properties(a.command_config) if a.command_config else {}
    props.setdefault("client.id", "GetOffsetShell")
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    topics = {name: sorted(t.partitions) for name, t in md.topics.items()
              if t.error is None and not (a.exclude_internal_topics and name in cl.INTERNAL_TOPICS)}
    wanted = select(topics, rules)
    if not wanted:
        raise ToolError("Could not match any topic-partitions with the specified filters")
    answers: dict[tuple[str, int], int | str] = {}
    if ts in LIST_OFFSETS_VERSION_FOR:
        answers = _list_offsets_raw(md, wanted, ts, props, errors.timeout)
    else:
        spec = offset_spec(ts)
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted}, request_timeout=errors.timeout)
        for tp, fut in futures.items():
            try:
                answers[(tp.topic, tp.partition)] = int(cl.result(fut, errors.timeout, "offsets").offset)
            except CliError as e:
                answers[(tp.topic, tp.partition)] = str(e)
    found: dict[tuple[str, int], int] = {}
    for (topic, partition), answer in answers.items():
        if isinstance(answer, str):
            print(f"Skip getting offsets for topic-partition {topic}-{partition} due to error: {answer}",
                  file=sys.stderr)
        elif answer != -1:  # (no such offset)
            found[(topic, partition)] = answer
    for (topic, partition), offset in sorted(found.items(), key=lambda kv: f"{kv[0][0]}-{kv[0][1]}"):
        print(f"{topic}:{partition}:{offset}")
    sys.stdout.flush()
    return 0


@cl.one_line_errors
def run(argv: list[str]) -> int:
    try:
        return _run(argv)
    except ToolError as e:
        print(f"Error occurred: {e}", file=sys.stderr)
        return 1
