"""`samsa consumer-groups`: kafka-consumer-groups.sh — list, describe, reset offsets, delete.

Flags, checks, messages and tables follow Kafka's `ConsumerGroupCommand`:

* `--list` prints one group id per line; with `--state`/`--type` a GROUP [TYPE] [STATE] table.
* `--describe` (offsets by default, `--members [--verbose]`, `--state`) prints one table per group,
  each after an empty line, in Kafka's column widths. An Empty group gets "Consumer group 'G' has
  no active members." and a missing one "Error: Consumer group 'G' does not exist." on stderr.
* `--reset-offsets` plans new offsets for groups that are Empty (or do not exist), clamped into
  [log start, log end] like Kafka, prints the plan (`--dry-run`, the default) or commits it
  (`--execute`). Groups with members are refused.
* `--delete` deletes whole groups; `--delete-offsets` a group's offsets for some topics.

All of it goes through confluent-kafka's AdminClient except `--delete-offsets`: the Python client
has no DeleteConsumerGroupOffsets, so that one OffsetDelete v0 request is sent to the group's
coordinator (learnt from DescribeGroups) with Samsa's own codec, over the tool's security settings.

A problem with the whole command is a `CliError` (one line, exit 1; bad flags exit 2). A problem
with one group is Kafka's `Error: ...` line on stderr: the other groups are still served and the
exit code is 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from samsa.cli import client as cl
from samsa.cli.common import ArgumentParser, CliError
from samsa.cli.group_tables import (
    _KAFKA_MESSAGES,
    MISSING,
    STATES,
    TP,
    TYPES,
    MemberRow,
    OffsetRow,
    Plan,
    _tp,
    clamp,
    delete_offsets_outcome,
    format_delete_offsets,
    format_export,
    format_listing,
    format_members,
    format_offsets,
    format_reset,
    format_state,
    kafka_message,
    parse_datetime,
    parse_duration,
    parse_reset_plan,
    parse_states,
    parse_topic_arg,
    parse_types,
)
from samsa.protocol.errors import ErrorCode

_STATE_NAME = {
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_TYPE_NAME = {ConsumerGroupType.CONSUMER: "Consumer", ConsumerGroupType.CLASSIC: "Classic"}
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_SCENARIOS = (
    "to_offset", "shift_by", "to_datetime", "by_duration", "to_earliest", "to_latest", "to_current", "from_file"
)  # fmt: skip
_RESET_ONLY = ("dry_run", "execute", "export", "all_topics", *_SCENARIOS)
_E = ErrorCode
_NO_TOPIC = _KAFKA_MESSAGES[_E.UNKNOWN_TOPIC_OR_PARTITION]
_OFFSET_DELETE_KEY = 47
_NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing.In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="samsa consumer-groups",
        description="List all consumer groups, describe a consumer group, delete consumer group info, or reset "
        "consumer group offsets (like kafka-consumer-groups.sh).",
    )
    add = p.add_argument

    def flag(name: str, text: str) -> None:
        add(name, action="store_true", help=text)

    add("--bootstrap-server", metavar="SERVER", help="REQUIRED: The server(s) to connect to.")
    add("--command-config", metavar="FILE", help="Property file containing configs to be passed to Admin Client.")
    add("--timeout", type=int, default=5000, metavar="MS", help="Timeout of each request in ms (default: 5000).")
    flag("--list", "List all consumer groups.")
    flag("--describe", "Describe consumer group and list offset lag (number of messages not yet processed).")
    flag("--delete", "Pass in groups to delete topic partition offsets and ownership information.")
    flag("--reset-offsets", "Reset offsets of consumer group; its members must be inactive.")
    flag("--delete-offsets", "Delete offsets of consumer group. Supports one consumer group at the time.")
    add("--group", action="append", metavar="GROUP", help="The consumer group we wish to act on (repeatable).")
    flag("--all-groups", "Apply to all consumer groups.")
    add("--topic", action="append", metavar="TOPIC[:P,...]", help="Topic (and partitions) to reset or delete.")
    flag("--all-topics", "Consider all topics assigned to a group in the `reset-offsets` process.")
    flag("--offsets", "With --describe: partitions and their offset lag (the default).")
    flag("--members", "With --describe: the members of the group.")
    flag("--verbose", "With --describe --members: each member's assignment.")
    add("--state", nargs="?", const="", metavar="STATE,...", help="With --describe: the group's state. With "
        "--list: show states, optionally only these (" + ", ".join(STATES) + ").")  # fmt: skip
    add("--type", nargs="?", const="", metavar="TYPE,...", help="With --list: show group types, optionally only "
        "these (" + ", ".join(TYPES) + ").")  # fmt: skip
    flag("--dry-run", "Only show results without executing changes (the default).")
    flag("--execute", "Execute operation. Supported operations: reset-offsets.")
    flag("--export", "Print the reset plan as CSV (for --from-file).")
    add("--to-offset", type=int, metavar="OFFSET", help="Reset offsets to a specific offset.")
    add("--to-datetime", metavar="DATETIME", help="Reset offsets to offset from datetime: 'YYYY-MM-DDTHH:mm:SS.sss'")
    add("--by-duration", metavar="DURATION", help="Reset offsets to offset by duration before now: 'PnDTnHnMnS'")
    flag("--to-earliest", "Reset offsets to earliest offset.")
    flag("--to-latest", "Reset offsets to latest offset.")
    flag("--to-current", "Reset offsets to current offset.")
    add("--shift-by", type=int, metavar="N", help="Reset offsets shifting current offset by 'n' (may be negative).")
    add("--from-file", metavar="CSV", help="Reset offsets to values defined in CSV file.")
    return p


def _opt(name: str) -> str:
    return f"[{name.replace('_', '-')}]"


def check_args(p: ArgumentParser, a: argparse.Namespace) -> None:
    """Kafka's ConsumerGroupCommandOptions.checkArgs, values parsed early, ignored options refused."""

    def has(name: str) -> bool:
        return getattr(a, name) not in (None, False)

    def invalid(used: str, others: Iterable[str]) -> None:
        for other in others:
            if has(used) and has(other):
                p.error(f'Option "{_opt(used)}" can\'t be used with option "{_opt(other)}"')

    if not a.bootstrap_server:
        p.error('Missing required argument "[bootstrap-server]"')
    available = {"members": a.describe, "offsets": a.describe, "verbose": a.describe, "state": a.describe or a.list}
    for name in [n for n, ok in {**available, "type": a.list}.items() if has(n) and not ok][:1]:
        p.error(f"Option(s) {_opt(name)} are unavailable given other options on the command line")
    scope = "[group], [all-groups]"
    for action in ("describe", "delete", "reset_offsets"):
        if has(action) and not a.group and not a.all_groups:
            p.error(f"Option {_opt(action)} takes one of these options: {scope}")
    if a.describe:
        if sum(map(has, ("members", "offsets", "state"))) > 1:
            p.error("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if a.state:
            p.error("Option [describe] does not take a value for [state]")
    if a.delete and a.topic:
        p.error("The consumer does not support topic-specific offset deletion from a consumer group.")
    if a.delete_offsets and (not a.group or not a.topic):
        p.error("Option [delete-offsets] takes the following options: [group], [topic]")
    if a.delete_offsets and len(a.group) > 1:
        p.error("Found multiple arguments for option group, but you asked for only one")
    if a.reset_offsets:
        if a.dry_run and a.execute:
            p.error("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        for used in _SCENARIOS:
            invalid(used, [s for s in _SCENARIOS if s != used])
        if not any(map(has, _SCENARIOS)):
            p.error(
                "Option '[reset-offsets]' requires one of the following scenarios: "
                f"[{', '.join(map(_opt, _SCENARIOS))}]"
            )
        if not a.all_topics and not a.topic and not a.from_file:
            p.error("One of the reset scopes should be defined: --all-topics, --topic.")
    invalid("group", ["all_groups", "list"])
    invalid("topic", ["list", "describe"])
    actions = [n for n in _ACTIONS if getattr(a, n)]
    if len(actions) != 1:
        p.error(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets"
        )
    if not a.reset_offsets:
        invalid(actions[0], _RESET_ONLY)
    checks: list[tuple[Any, Callable[[str], Any]]] = [(a.state, parse_states), (a.type, parse_types),
                                                       (a.to_datetime, parse_datetime)]
    checks += [(a.by_duration, parse_duration)] + [(t, parse_topic_arg) for t in a.topic or []]
    for value, parse in checks:
        try:
            if value:
                parse(value)
        except ValueError as e:
            p.error(str(e))


# --- talking to the cluster -------------------------------------------------------------------
class GroupService:
    """One method per action; `failed` is set when some group could not be served."""

    def __init__(self, admin: AdminClient, md: Any, props: dict[str, str], timeout: float) -> None:
        self.admin, self.md, self.props, self.timeout = admin, md, props, timeout
        self.failed = False

    def error(self, message: str) -> None:
        print(f"Error: {message}", file=sys.stderr)
        self.failed = True

    def _wait(self, fut: Future[Any], what: str, missing_ok: bool = False) -> Any:
        """The future's result; with `missing_ok`, None for GROUP_ID_NOT_FOUND. Failures → CliError."""
        try:
            return fut.result(timeout=self.timeout + 2.0)
        except FutureTimeout:
            raise CliError(f"timed out after {self.timeout:g} s waiting for the {what}") from None
        except KafkaException as e:
            err = cl.kafka_error(e)
            if err is not None and missing_ok and err.code() == _E.GROUP_ID_NOT_FOUND:
                return None
            text = kafka_message(err.code(), cl.error_message(err)) if err is not None else str(e)
            raise CliError(f"Executing consumer group command failed due to {text}") from None

    # --- reading the cluster ------------------------------------------------------------------
    def listings(self) -> list[Any]:
        result = self._wait(self.admin.list_consumer_groups(request_timeout=self.timeout), "consumer group list")
        for e in result.errors or []:  # KafkaErrors, one per broker that could not list its groups
            err = e if isinstance(e, KafkaError) else cl.kafka_error(e)
            raise CliError(f"Executing consumer group command failed due to {cl.error_message(err) if err else e}")
        return list(result.valid)

    def group_ids(self, a: argparse.Namespace) -> list[str]:
        if a.all_groups:
            return sorted(listing.group_id for listing in self.listings())
        return list(dict.fromkeys(a.group))

    def describe_groups(self, ids: list[str]) -> dict[str, Any]:
        """group → ConsumerGroupDescription, or None when the group does not exist (Dead)."""
        futures = self.admin.describe_consumer_groups(ids, request_timeout=self.timeout) if ids else {}
        out = {g: self._wait(fut, "consumer group description", missing_ok=True) for g, fut in futures.items()}
        return {g: None if d is None or d.state == ConsumerGroupState.DEAD else d for g, d in out.items()}

    def committed(self, group: str) -> dict[TP, int]:
        request = [ConsumerGroupTopicPartitions(group)]
        fut = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout)[group]
        result = self._wait(fut, "committed offsets", missing_ok=True)
        found = result.topic_partitions if result is not None else None
        return {(tp.topic, tp.partition): tp.offset for tp in found or [] if tp.error is None and tp.offset >= 0}

    def log_offsets(self, tps: Iterable[TP], spec: OffsetSpec) -> dict[TP, int | None]:
        """ListOffsets for each partition; None where the broker could not tell."""
        out: dict[TP, int | None] = dict.fromkeys(tps)
        if not out:
            return out
        futures = self.admin.list_offsets({TopicPartition(t, p): spec for t, p in out}, request_timeout=self.timeout)
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = fut.result(timeout=self.timeout + 2.0).offset
            except (KafkaException, FutureTimeout):
                pass
        return out

    def announce(self, group: str, desc: Any) -> bool:
        """Kafka's shouldPrintMemberState: tell what is special about the state; False if there is no group."""
        if desc is None:
            self.error(f"Consumer group '{group}' does not exist.")
            return False
        state = _STATE_NAME.get(desc.state, "Unknown")
        if state == "Empty":
            print(f"Consumer group '{group}' has no active members.", file=sys.stderr)
        elif state in _REBALANCING:
            print(f"Warning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
        return True

    # --- list, describe -----------------------------------------------------------------------
    def list_groups(self, state_text: str | None, type_text: str | None) -> None:
        listings = self.listings()
        if state_text is None and type_text is None:
            for group in sorted(listing.group_id for listing in listings):
                print(group)
            return
        states = parse_states(state_text) if state_text else set()
        types = parse_types(type_text) if type_text else set()
        rows = sorted(
            (x.group_id, _TYPE_NAME.get(x.type, "Unknown"), _STATE_NAME.get(x.state, "Unknown")) for x in listings
        )
        rows = [r for r in rows if (not types or r[1] in types) and (not states or r[2] in states)]
        print(format_listing(rows, type_text is not None, state_text is not None), end="")

    def describe(self, a: argparse.Namespace) -> None:
        descs = self.describe_groups(self.group_ids(a))
        for group in sorted(descs):
            desc = descs[group]
            if not self.announce(group, desc):
                continue
            if a.members:
                print(format_members(self._member_rows(group, desc), a.verbose), end="")
            elif a.state is not None:
                c = desc.coordinator
                coordinator = f"{c.host}:{c.port}  ({c.id})" if c is not None else MISSING
                state = _STATE_NAME.get(desc.state, "Unknown")
                members = len(desc.members)
                print(format_state(group, coordinator, desc.partition_assignor or "", state, members), end="")
            else:
                rows = self._offset_rows(group, desc)
                if rows:
                    print(format_offsets(rows), end="")

    @staticmethod
    def _assignment(member: Any) -> list[TP]:
        tps = member.assignment.topic_partitions if member.assignment is not None else None
        return sorted((tp.topic, tp.partition) for tp in tps or [])

    def _member_rows(self, group: str, desc: Any) -> list[MemberRow]:
        return [
            MemberRow(group, m.member_id, m.group_instance_id or "", m.host, m.client_id, self._assignment(m))
            for m in desc.members
        ]

    def _offset_rows(self, group: str, desc: Any) -> list[OffsetRow]:
        """Assigned partitions member by member (most partitions first), then committed unassigned ones."""
        committed = self.committed(group)
        members = sorted(((m, self._assignment(m)) for m in desc.members), key=lambda pair: -len(pair[1]))
        assigned = [(m, tp) for m, tps in members for tp in tps]
        unassigned = sorted(set(committed) - {tp for _, tp in assigned})
        log_end = self.log_offsets([tp for _, tp in assigned] + unassigned, OffsetSpec.latest())
        rows = [
            OffsetRow(group, t, p, committed.get((t, p)), log_end[(t, p)], m.member_id, m.host, m.client_id)
            for m, (t, p) in assigned
        ]
        return rows + [
            OffsetRow(group, t, p, committed[(t, p)], log_end[(t, p)], MISSING, MISSING, MISSING) for t, p in unassigned
        ]

    # --- delete -------------------------------------------------------------------------------
    def delete(self, a: argparse.Namespace) -> None:
        ids = self.group_ids(a)
        futures = self.admin.delete_consumer_groups(ids, request_timeout=self.timeout) if ids else {}
        deleted: list[str] = []
        for group in ids:
            try:
                self._wait(futures[group], "group deletion")
                deleted.append(group)
            except CliError as e:
                why = str(e).removeprefix("Executing consumer group command failed due to ")
                self.error(f"Group '{group}' could not be deleted due to: {why}")
        if not self.failed:
            print(f"Deletion of requested consumer groups ('{', '.join(deleted)}') was successful.")
        elif deleted:
            print(f"These consumer groups were deleted successfully: {', '.join(repr(g) for g in deleted)}")

    # --- reset-offsets ------------------------------------------------------------------------
    def reset(self, a: argparse.Namespace) -> None:
        ids = self.group_ids(a)
        descs = self.describe_groups(ids)
        from_file = None
        if a.from_file:
            try:
                with open(a.from_file, encoding="utf-8") as f:
                    from_file = parse_reset_plan(f.read(), ids)
            except OSError as e:
                raise CliError(f"cannot read {a.from_file}: {e.strerror or e}") from None
        plan: Plan = {}
        for group in ids:
            desc = descs.get(group)
            state = "Dead" if desc is None else _STATE_NAME.get(desc.state, "Unknown")
            if state not in ("Empty", "Dead"):
                why = f"Assignments can only be reset if the group '{group}' is inactive"
                self.error(f"{why}, but the current state is {state}.")
                continue
            offsets = self.prepare(group, a, from_file)
            if a.execute and offsets:
                self.commit(group, offsets)
            plan[group] = offsets
        if plan:
            print(format_export(plan, len(ids) == 1) if a.export else format_reset(plan), end="")

    def partitions_to_reset(self, group: str, a: argparse.Namespace) -> list[TP]:
        if a.all_topics:
            return sorted(self.committed(group))
        out: list[TP] = []
        for arg in a.topic or []:
            topic, partitions = parse_topic_arg(arg)
            meta = self.md.topics.get(topic)
            known = set(meta.partitions) if meta is not None and meta.error is None else set()
            for p in sorted(known) if partitions is None else partitions:
                if p not in known:
                    what = f"partition '{topic}-{p}'" if known else f"topic '{topic}'"
                    raise CliError(f"Executing consumer group command failed due to {_NO_TOPIC} ({what})")
                out.append((topic, p))
            if not known:
                raise CliError(f"Executing consumer group command failed due to {_NO_TOPIC} (topic '{topic}')")
        return list(dict.fromkeys(out))

    def prepare(self, group: str, a: argparse.Namespace, from_file: Plan | None) -> dict[TP, int]:
        """Kafka's prepareOffsetsToReset: the new offset of each partition in scope."""
        if from_file is not None:
            if group not in from_file:
                self.error(f"No reset plan for group {group} found")
                return {}
            return self.checked(from_file[group])
        tps = self.partitions_to_reset(group, a)
        if a.to_offset is not None:
            return self.checked(dict.fromkeys(tps, a.to_offset))
        if a.to_earliest or a.to_latest:
            found = self.log_offsets(tps, OffsetSpec.earliest() if a.to_earliest else OffsetSpec.latest())
            return {tp: _known(found, tp, "starting offset" if a.to_earliest else "ending offset") for tp in tps}
        if a.shift_by is not None:
            committed = self.committed(group)
            for tp in tps:
                if tp not in committed:
                    why = "since there is no current committed offset"
                    raise CliError(f"Cannot shift offset for partition {_tp(tp)} {why}")
            return self.checked({tp: committed[tp] + a.shift_by for tp in tps})
        if a.to_datetime is not None or a.by_duration is not None:
            if a.to_datetime is not None:
                when = parse_datetime(a.to_datetime)
            else:
                when = round(dt.datetime.now(dt.UTC).timestamp() * 1000) - parse_duration(a.by_duration)
            found = self.log_offsets(tps, OffsetSpec.for_timestamp(when))
            empty = [tp for tp in tps if (found[tp] or 0) < 0]
            for t, p in empty:
                print(f"\nWarn: Partition {p} from topic {t} is empty. Falling back to latest known offset.")
            found.update(self.log_offsets(empty, OffsetSpec.latest()))
            return {tp: _known(found, tp, "offset by timestamp") for tp in tps}
        committed = self.committed(group)  # --to-current
        latest = self.log_offsets([tp for tp in tps if tp not in committed], OffsetSpec.latest())
        return {tp: committed[tp] if tp in committed else _known(latest, tp, "ending offset") for tp in tps}

    def checked(self, requested: dict[TP, int]) -> dict[TP, int]:
        """Kafka's checkOffsetsRange: clamp into [log start offset, log end offset], warning on stderr."""
        earliest = self.log_offsets(requested, OffsetSpec.earliest())
        latest = self.log_offsets(requested, OffsetSpec.latest())
        out: dict[TP, int] = {}
        for tp, offset in requested.items():
            out[tp], warning = clamp(offset, earliest.get(tp), latest.get(tp))
            if warning:
                print("WARN " + warning.format(tp=_tp(tp)), file=sys.stderr)
        return out

    def commit(self, group: str, offsets: dict[TP, int]) -> None:
        partitions = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        request = [ConsumerGroupTopicPartitions(group, partitions)]
        fut = self.admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)[group]
        result = self._wait(fut, "offset commit")
        for tp in result.topic_partitions or []:
            if tp.error is not None:
                why = kafka_message(tp.error.code(), cl.error_message(tp.error))
                raise CliError(f"Executing consumer group command failed due to {why} ({tp.topic}-{tp.partition})")

    # --- delete-offsets -----------------------------------------------------------------------
    def delete_offsets(self, group: str, topic_args: list[str]) -> None:
        rows: list[tuple[str, int, str | None]] = []
        partitions: list[TP] = []
        for arg in topic_args:
            topic, given = parse_topic_arg(arg)
            meta = self.md.topics.get(topic)
            if given is not None:
                partitions += [(topic, p) for p in given]
            elif meta is None or meta.error is not None:
                rows.append((topic, -1, _NO_TOPIC))
            else:
                partitions += [(topic, p) for p in sorted(meta.partitions)]
        partitions = list(dict.fromkeys(partitions))
        desc = self.describe_groups([group])[group]
        per: dict[TP, int] = {}
        if desc is None or desc.coordinator is None:
            top = int(_E.GROUP_ID_NOT_FOUND)
        elif not partitions:
            top = int(_E.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            top, per = self._offset_delete(desc.coordinator, group, partitions)
            top = top or next((code for code in per.values() if code), 0)  # like Java's all(): first error
        for tp in partitions:
            code = per.get(tp, top)
            rows.append((tp[0], tp[1], kafka_message(code) if code else None))
        outcome = delete_offsets_outcome(top, group)
        if outcome is None:
            print(f"Request succeed for deleting offsets with topic {', '.join(topic_args)} group {group}")
        else:
            self.error(outcome)
        self.failed |= any(error for _, _, error in rows)
        print(format_delete_offsets(rows), end="")

    def _offset_delete(self, coordinator: Any, group: str, partitions: list[TP]) -> tuple[int, dict[TP, int]]:
        """One OffsetDelete v0 to the coordinator → (top-level error code, partition → error code)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()]
        body = {"group_id": group, "topics": topics}
        resp = cl.raw_request(coordinator.host, coordinator.port, _OFFSET_DELETE_KEY, 0, body, self.timeout,
                              self.props)
        per = {(t.name, p.partition_index): int(p.error_code) for t in resp.topics for p in t.partitions}
        return int(resp.error_code), per


def _known(found: dict[TP, int | None], tp: TP, what: str) -> int:
    offset = found.get(tp)
    if offset is None or offset < 0:
        raise CliError(f"Error getting {what} of topic partition: {_tp(tp)}")
    return offset


# --- the command ------------------------------------------------------------------------------
@cl.one_line_errors
def run(argv: list[str]) -> int:
    p = build_parser()
    if not argv:
        p.print_help()
        return 1
    a = p.parse_args(argv)
    check_args(p, a)
    if a.reset_offsets and not a.dry_run and not a.execute:
        print(_NO_EXECUTE_WARNING, file=sys.stderr)
    props = cl.load_properties(a.command_config) if a.command_config else {}
    errors = cl.ClientErrors()
    admin = cl.make_client(AdminClient, cl.client_config(a.bootstrap_server, props, errors))
    md = cl.wait_for_cluster(admin, errors, a.bootstrap_server)
    service = GroupService(admin, md, props, max(a.timeout, 1) / 1000.0)
    if a.list:
        service.list_groups(a.state, a.type)
    elif a.describe:
        service.describe(a)
    elif a.delete:
        service.delete(a)
    elif a.reset_offsets:
        service.reset(a)
    else:
        service.delete_offsets(a.group[0], a.topic)
    sys.stdout.flush()
    return 1 if service.failed else 0
