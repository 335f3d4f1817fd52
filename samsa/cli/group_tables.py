"""The pure half of `samsa consumer-groups`: parsing its arguments and formatting its tables,
in Kafka's ConsumerGroupCommand layouts. No client, no I/O: table-tested in tests/cli."""

from __future__ import annotations

import datetime as dt
import re
from typing import NamedTuple

from samsa.cli.common import CliError
from samsa.protocol.errors import ErrorCode

MISSING = "-"
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling")
TYPES = ("Consumer", "Classic", "Share")
_E = ErrorCode
# The messages of Kafka's exceptions for the errors these commands meet.
_KAFKA_MESSAGES: dict[int, str] = {
    _E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    _E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    _E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    _E.NOT_COORDINATOR: "This is not the correct coordinator.",
    _E.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    _E.INVALID_GROUP_ID: "The configured groupId is invalid.",
    _E.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    _E.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    _E.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    _E.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    _E.UNSUPPORTED_VERSION: "The version of API is not supported.",
    _E.NON_EMPTY_GROUP: "The group is not empty.",
    _E.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    _E.GROUP_SUBSCRIBED_TO_TOPIC: "Deleting offsets of a topic is forbidden while the consumer group is actively "
    "subscribed to it.",
}

# --- parsing (pure) ---------------------------------------------------------------------------
def parse_states(text: str) -> set[str]:
    """`stable,EMPTY` → {"Stable", "Empty"}: Kafka's case-insensitive state names."""
    by_upper = {s.upper(): s for s in STATES}
    found = {by_upper.get(s.strip().upper()) for s in text.split(",")}
    if None in found:
        raise ValueError(f"Invalid state list '{text}'. Valid states are: {', '.join(STATES)}")
    return {s for s in found if s}


def parse_types(text: str) -> set[str]:
    by_lower = {t.lower(): t for t in TYPES}
    found = {by_lower.get(t.strip().lower()) for t in text.split(",")}
    if None in found:
        raise ValueError(f"Invalid types list '{text}'. Valid types are: {', '.join(TYPES)}")
    return {t for t in found if t}


def parse_topic_arg(arg: str) -> tuple[str, list[int] | None]:
    """`t` → ("t", None) meaning every partition; `t:0,2` → ("t", [0, 2]); Kafka's messages."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    while parts and parts[-1] == "":  # Java's String.split drops trailing empty strings
        parts.pop()
    if len(parts) != 2:
        raise ValueError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions = []
    for piece in parts[1].split(","):
        if not re.fullmatch(r"[+-]?\d+", piece):
            raise ValueError(f"Invalid partition '{piece}' specified in topic arg '{arg}''")
        partitions.append(int(piece))
    return parts[0], partitions


_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{3})(Z|[+-]\d\d(?::?\d\d)?)?")


def parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: `YYYY-MM-DDTHH:mm:SS.sss[Z|±hh[:mm]]`, UTC without a zone → epoch ms."""
    if len([x for x in text.split("T") if x]) < 2:
        raise ValueError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    m = _DATETIME.fullmatch(text)
    if not m:
        raise ValueError(f'Unparseable date: "{text}"')
    zone = m.group(8) or "Z"
    shift = dt.timedelta(0)
    if zone != "Z":
        digits = zone[1:].replace(":", "")
        shift = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)) * (-1 if zone[0] == "-" else 1)
    try:
        y, mo, d, h, mi, s, ms = (int(x) for x in m.groups()[:7])
        when = dt.datetime(y, mo, d, h, mi, s, ms * 1000, tzinfo=dt.timezone(shift))
    except ValueError:
        raise ValueError(f'Unparseable date: "{text}"') from None
    return round(when.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE
)


def parse_duration(text: str) -> int:
    """Java's Duration.parse (`PnDTnHnMn.nS`, each part may be signed) → milliseconds."""
    m = _DURATION.fullmatch(text)
    if not m or m.group(3) in ("T", "t") or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError("Text cannot be parsed to a Duration")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()
    ms = (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + int(seconds or 0)) * 1000
    if fraction:
        ms += int(fraction.ljust(3, "0")[:3]) * (-1 if (seconds or "").startswith("-") else 1)
    return -ms if sign == "-" else ms


def clamp(offset: int, earliest: int | None, latest: int | None) -> tuple[int, str | None]:
    """Kafka's checkOffsetsRange for one partition: (offset to use, warning with a `{tp}` slot, or None)."""
    if latest is not None and offset > latest:
        why = f"New offset ({offset}) is higher than latest offset for topic partition {{tp}}."
        return latest, f"{why} Value will be set to {latest}"
    if earliest is not None and offset < earliest:
        why = f"New offset ({offset}) is lower than earliest offset for topic partition {{tp}}."
        return earliest, f"{why} Value will be set to {earliest}"
    return offset, None


TP = tuple[str, int]
Plan = dict[str, dict[TP, int]]


def parse_reset_plan(text: str, groups: list[str]) -> Plan:
    """A `--from-file` CSV: `topic,partition,offset` (with one --group) or `group,topic,partition,offset`."""
    plan: Plan = {}
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 3 and len(groups) == 1:
            fields.insert(0, groups[0])
        if len(fields) != 4 or not all(re.fullmatch(r"-?\d+", f) for f in fields[2:]):
            raise CliError(f"invalid reset plan line {line!r}: expected [group,]topic,partition,offset")
        plan.setdefault(fields[0], {})[(fields[1], int(fields[2]))] = int(fields[3])
    return plan


# --- tables (pure) ----------------------------------------------------------------------------
def _text(v: object) -> str:
    return MISSING if v is None else str(v)


_WIDE_COLUMNS = ("group", "topic", "consumer_id", "host")  # at least 15 wide, else as wide as their values


class OffsetRow(NamedTuple):
    group: str
    topic: str | None
    partition: int | None
    offset: int | None  # committed
    log_end: int | None
    consumer_id: str
    host: str
    client_id: str

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset == -1 or self.log_end is None:
            return None
        return self.log_end - self.offset


def format_offsets(rows: list[OffsetRow]) -> str:
    g, t, c, h = (max([15] + [len(_text(getattr(r, f))) for r in rows]) for f in _WIDE_COLUMNS)
    fmt = f"\n{{:<{g}}} {{:<{t}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} {{:<{c}}} {{:<{h}}} {{}}"
    out = fmt.format(*"GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID".split())
    for r in rows:
        cells = (r.group, r.topic, r.partition, r.offset, r.log_end, r.lag, r.consumer_id, r.host, r.client_id)
        out += fmt.format(*map(_text, cells))
    return out + "\n"


class MemberRow(NamedTuple):
    group: str
    consumer_id: str
    instance_id: str
    host: str
    client_id: str
    assignment: list[TP]


def assignment_text(assignment: list[TP]) -> str:
    """[("t", 1), ("t", 0), ("u", 2)] → "t(0,1), u(2)" (Kafka's --verbose ASSIGNMENT column)."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ", ".join(sorted(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in by_topic.items()))


def format_members(rows: list[MemberRow], verbose: bool) -> str:
    fields = ["group", "consumer_id", "instance_id", "host", "client_id"]
    head = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID"]
    if not any(r.instance_id for r in rows):
        del fields[2], head[2]
    widths = [max([17 if f == "instance_id" else 15] + [len(getattr(r, f)) for r in rows]) for f in fields]
    fmt = "".join(f"{{:<{w}}} " for w in widths) + "{:<15} "
    out = "\n" + fmt.format(*head, "#PARTITIONS") + ("ASSIGNMENT" if verbose else "") + "\n"
    for r in rows:
        out += fmt.format(*(getattr(r, f) for f in fields), len(r.assignment))
        out += (assignment_text(r.assignment) if verbose else "") + "\n"
    return out


def format_state(group: str, coordinator: str, assignor: str, state: str, members: int) -> str:
    fmt = f"\n{{:<{max(25, len(coordinator))}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    head = fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
    return head + fmt.format(group, coordinator, assignor, state, members) + "\n"


def format_listing(rows: list[tuple[str, str, str]], include_type: bool, include_state: bool) -> str:
    """Rows of (group, type, state) → Kafka's `--list --type --state` table."""
    width = max([15] + [len(g) for g, _, _ in rows]) + 10

    def line(g: str, t: str, s: str) -> str:
        return f"{g:<{width}}" + (f" {t:<20}" if include_type else "") + (f" {s:<20}" if include_state else "") + "\n"

    return line("GROUP", "TYPE", "STATE") + "".join(line(*r) for r in rows)


def _plan_rows(plan: Plan) -> list[tuple[str, str, int, int]]:
    return [(g, t, p, o) for g in sorted(plan) for (t, p), o in sorted(plan[g].items())]


def format_reset(plan: Plan) -> str:
    fmt = "\n{:<30} {:<30} {:<10} {:<15}"
    rows = "".join(fmt.format(*r) for r in _plan_rows(plan))
    return fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET") + rows + "\n"


def format_export(plan: Plan, single_group: bool) -> str:
    return "".join(("" if single_group else f"{g},") + f"{t},{p},{o}\n" for g, t, p, o in _plan_rows(plan)) + "\n"


def format_delete_offsets(rows: list[tuple[str, int, str | None]]) -> str:
    """Rows of (topic, partition or -1 for a whole topic, error or None) → TOPIC PARTITION STATUS."""
    fmt = "\n{:<30} {:<15} {:<15}"
    out = fmt.format("TOPIC", "PARTITION", "STATUS")
    for topic, partition, error in sorted(rows, key=lambda r: r[0] + str(r[1])):
        status = f"Error: {error}" if error else "Successful"
        out += fmt.format(topic, partition if partition >= 0 else "Not Provided", status)
    return out + "\n"


def kafka_message(code: int, fallback: str = "") -> str:
    return _KAFKA_MESSAGES.get(code, fallback) or _code_name(code)


def _code_name(code: int) -> str:
    return ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)


def delete_offsets_outcome(top: int, group: str) -> str | None:
    """Kafka's line for the top-level result of deleting offsets (None: success)."""
    partition_level = "Encounter some partition level error, see the follow-up details:"
    outcomes: dict[int, str | None] = {
        _E.NONE: None,
        _E.INVALID_GROUP_ID: f"'{group}' is not valid.",
        _E.GROUP_ID_NOT_FOUND: f"'{group}' does not exist.",
        _E.GROUP_AUTHORIZATION_FAILED: f"Access to '{group}' is not authorized.",
        _E.NON_EMPTY_GROUP: f"Deleting offsets of a consumer group '{group}' is forbidden if the group is not empty.",
        _E.GROUP_SUBSCRIBED_TO_TOPIC: partition_level,
        _E.TOPIC_AUTHORIZATION_FAILED: partition_level,
        _E.UNKNOWN_TOPIC_OR_PARTITION: partition_level,
    }
    return outcomes.get(top, f"Encounter some unknown error: {_code_name(top)}")


def _tp(tp: TP) -> str:
    return f"{tp[0]}-{tp[1]}"
