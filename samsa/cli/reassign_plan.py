"""The pure parts of `samsa reassign-partitions` (kafka-reassign-partitions.sh): reading the
JSON files, proposing a new assignment, the throttle lists, verification states and output.

Nothing here talks to a broker, so every rule is unit-tested on its own. Partitions are
``(topic, partition)`` tuples; replica lists keep their order (the first is the preferred
leader). Problems with a file or argument raise :class:`CliError` with one line naming the
file and what is wrong.

File formats (Kafka's):

* topics to move: ``{"topics": [{"topic": "foo"}, ...], "version": 1}``
* reassignment: ``{"version": 1, "partitions": [{"topic": "foo", "partition": 0,
  "replicas": [1, 2], "log_dirs": ["any", "/data/b"]}, ...]}`` (``log_dirs`` optional: the
  log dir, an absolute path, each replica moves to on its broker, or "any")
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.cli.common import CliError
from samsa.controller.decisions import AssignmentError, assign_replicas

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, list[int]]

ANY_LOG_DIR = "any"

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_CONFIGS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, LOG_DIR_THROTTLE)
TOPIC_THROTTLE_CONFIGS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


def tp_str(tp: TopicPartition) -> str:
    """A partition as Kafka prints it: ``topic-partition``."""
    return f"{tp[0]}-{tp[1]}"


def _join(items: Iterable[Any], sep: str = ",") -> str:
    return sep.join(str(i) for i in items)


# --------------------------------------------------------------------------- JSON input


def _load(text: str, source: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise CliError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{source}: expected a JSON object at the top level")
    version = doc.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise CliError(f"{source}: unsupported \"version\" {json.dumps(version)} (only 1 is supported)")
    return doc


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _duplicates(items: Iterable[Any]) -> list[Any]:
    seen: set[Any] = set()
    dupes: list[Any] = []
    for item in items:
        if item in seen and item not in dupes:
            dupes.append(item)
        seen.add(item)
    return dupes


def parse_topics_to_move(text: str, source: str = "the topics-to-move JSON file") -> list[str]:
    """The topic names of a ``--topics-to-move-json-file``, in file order."""
    doc = _load(text, source)
    topics = doc.get("topics")
    if not isinstance(topics, list):
        raise CliError(f"{source}: expected a \"topics\" list")
    names: list[str] = []
    for i, entry in enumerate(topics):
        name = entry.get("topic") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise CliError(f"{source}: topics[{i}] must be an object with a non-empty \"topic\" string")
        names.append(name)
    if not names:
        raise CliError(f"{source}: the \"topics\" list is empty")
    dupes = _duplicates(names)
    if dupes:
        raise CliError(f"List of topics to reassign contains duplicate entries: {_join(dupes)}")
    return names


def parse_broker_list(text: str) -> list[int]:
    """``--broker-list 0,1,2`` → [0, 1, 2]."""
    try:
        ids = [int(x.strip()) for x in text.split(",")]
    except ValueError:
        raise CliError(f"--broker-list expects comma-separated broker ids, got {text!r}", exit_code=2) from None
    if any(i < 0 for i in ids):
        raise CliError(f"--broker-list expects non-negative broker ids, got {text!r}", exit_code=2)
    dupes = _duplicates(ids)
    if dupes:
        raise CliError(f"Broker list contains duplicate entries: {_join(dupes)}")
    return ids


@dataclass
class Reassignment:
    """A parsed ``--reassignment-json-file``: target replicas per partition, in file order."""

    targets: Assignment
    log_dirs: dict[TopicPartition, list[str]] = field(default_factory=dict)

    @property
    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.targets})


def parse_reassignment(text: str, source: str = "the reassignment JSON file", *,
                       allow_empty: bool = False) -> Reassignment:
    """Parse and check a reassignment file (the checks Kafka makes before asking the cluster)."""
    doc = _load(text, source)
    entries = doc.get("partitions")
    if not isinstance(entries, list):
        raise CliError(f"{source}: expected a \"partitions\" list")
    if not entries and not allow_empty:
        raise CliError("Partition reassignment list cannot be empty")
    targets: Assignment = {}
    log_dirs: dict[TopicPartition, list[str]] = {}
    dupes: list[TopicPartition] = []
    bad_replicas: list[str] = []
    for i, entry in enumerate(entries):
        where = f"{source}: partitions[{i}]"
        if not isinstance(entry, dict):
            raise CliError(f"{where} must be an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise CliError(f"{where} needs a non-empty \"topic\" string")
        if not isinstance(partition, int) or not _is_int(partition) or partition < 0:
            raise CliError(f"{where} needs a non-negative integer \"partition\"")
        tp = (topic, partition)
        where = f"{source}: partition {tp_str(tp)}"
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise CliError(f"{where} needs a \"replicas\" list of broker ids")
        if not replicas:
            raise CliError(f"{where} has an empty \"replicas\" list")
        if any(r < 0 for r in replicas):
            raise CliError(f"{where} has a negative broker id in {replicas}")
        dirs = entry.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
                raise CliError(f"{where} has a \"log_dirs\" that is not a list of strings")
            if len(dirs) != len(replicas):
                raise CliError(
                    f"{where}: the \"log_dirs\" list {dirs} does not have one entry per replica {replicas}")
        if tp in targets:
            dupes.append(tp)
            continue
        if len(set(replicas)) != len(replicas):
            bad_replicas.append(f"{tp_str(tp)} contains {_join(replicas)}")
        targets[tp] = list(replicas)
        if dirs is not None:
            log_dirs[tp] = list(dirs)
    if dupes:
        raise CliError("Partition reassignment contains duplicate topic partitions: "
                       + _join(tp_str(tp) for tp in dupes))
    if bad_replicas:
        raise CliError("Partition replica lists may not contain duplicate entries: " + "; ".join(bad_replicas))
    return Reassignment(targets, log_dirs)


# ------------------------------------------------------------------------------ output


def sort_partitions(tps: Iterable[TopicPartition]) -> list[TopicPartition]:
    return sorted(tps)


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's one-line reassignment JSON, partitions sorted by topic then partition."""
    parts = [
        {"topic": t, "partition": p, "replicas": list(assignment[(t, p)]),
         "log_dirs": [ANY_LOG_DIR] * len(assignment[(t, p)])}
        for t, p in sort_partitions(assignment)
    ]
    return json.dumps({"version": 1, "partitions": parts}, separators=(",", ":"))


def generate_output(current: Mapping[TopicPartition, Sequence[int]],
                    proposed: Mapping[TopicPartition, Sequence[int]]) -> str:
    return (f"Current partition replica assignment\n{format_reassignment_json(current)}\n\n"
            f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}")


def rollback_output(current: Mapping[TopicPartition, Sequence[int]]) -> str:
    return (f"Current partition replica assignment\n\n{format_reassignment_json(current)}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback")


def partition_list(tps: Iterable[TopicPartition]) -> str:
    return _join(tp_str(tp) for tp in sort_partitions(tps))


# ----------------------------------------------------------------------------- generate


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


def usable_brokers(cluster: Iterable[Broker], wanted: Sequence[int], rack_aware: bool) -> dict[int, str | None]:
    """The ``--broker-list`` brokers that exist in the cluster, with racks when rack aware.
    Like Kafka, ids that are not in the cluster are dropped; mixing brokers with and without a
    rack is refused unless rack awareness is off."""
    wanted_set = set(wanted)
    out = {b.id: (b.rack if rack_aware else None) for b in cluster if b.id in wanted_set}
    with_rack = [b for b, r in out.items() if r is not None]
    if with_rack and len(with_rack) != len(out):
        raise CliError("Not all brokers have rack information. Add --disable-rack-aware to assign "
                       "replicas without rack information.")
    return dict(sorted(out.items()))


def propose(current: Mapping[TopicPartition, Sequence[int]], brokers: Mapping[int, str | None],
            rng: random.Random | None = None) -> Assignment:
    """A new assignment of every partition in ``current`` over ``brokers``, topic by topic,
    keeping each topic's partition count and replication factor (Kafka's ``--generate``)."""
    by_topic: dict[str, list[int]] = {}
    for t, p in sort_partitions(current):
        by_topic.setdefault(t, []).append(p)
    out: Assignment = {}
    for topic, partitions in by_topic.items():
        rf = len(current[(topic, partitions[0])])
        try:
            plan = assign_replicas(brokers, len(partitions), rf, rng=rng)
        except AssignmentError as e:
            raise CliError(f"cannot assign the partitions of topic {topic}: {e}") from None
        for i, p in enumerate(partitions):
            out[(topic, p)] = plan[i]
    return out


# ----------------------------------------------------------------------------- throttles


@dataclass(frozen=True)
class PartitionMove:
    """The replicas a partition copies from (sources) and to (destinations)."""

    sources: frozenset[int]
    destinations: frozenset[int]


Ongoing = Mapping[TopicPartition, tuple[Sequence[int], Sequence[int], Sequence[int]]]


def move_map(ongoing: Ongoing, targets: Mapping[TopicPartition, Sequence[int]],
             current: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, PartitionMove]:
    """Sources and destinations of every partition that is or will be moving: the ongoing
    reassignments (sources = replicas not being added) plus the new targets. A target whose
    partition is already moving keeps that move's sources."""
    moves: dict[TopicPartition, PartitionMove] = {}
    for tp, (replicas, adding, _removing) in ongoing.items():
        moves[tp] = PartitionMove(frozenset(r for r in replicas if r not in adding), frozenset(adding))
    for tp, target in targets.items():
        if tp in moves:
            sources = moves[tp].sources
        elif tp in current:
            sources = frozenset(current[tp])
        else:
            raise CliError(f"Unable to find partition: {tp_str(tp)}")
        moves[tp] = PartitionMove(sources, frozenset(target) - sources)
    return moves


def _throttle_lists(moves: Mapping[TopicPartition, PartitionMove], leader: bool) -> dict[str, str]:
    items: dict[str, set[str]] = {}
    for (topic, p), move in moves.items():
        replicas = move.sources if leader else move.destinations
        items.setdefault(topic, set()).update(f"{p}:{r}" for r in replicas)
    return {topic: ",".join(sorted(entries)) for topic, entries in sorted(items.items())}


def leader_throttles(moves: Mapping[TopicPartition, PartitionMove]) -> dict[str, str]:
    """``leader.replication.throttled.replicas`` per topic: ``partition:broker`` of every source."""
    return _throttle_lists(moves, leader=True)


def follower_throttles(moves: Mapping[TopicPartition, PartitionMove]) -> dict[str, str]:
    """``follower.replication.throttled.replicas`` per topic: ``partition:broker`` of every
    destination."""
    return _throttle_lists(moves, leader=False)


def reassigning_brokers(moves: Mapping[TopicPartition, PartitionMove]) -> list[int]:
    """Every broker a move copies from or to: these get the throttle rates."""
    return sorted({b for m in moves.values() for b in (*m.sources, *m.destinations)})


# ------------------------------------------------------------------------------ verify


@dataclass(frozen=True)
class PartitionState:
    current: list[int]
    target: list[int]
    done: bool


def verify_states(targets: Mapping[TopicPartition, Sequence[int]], ongoing: Ongoing,
                  current: Mapping[TopicPartition, Sequence[int]]) -> dict[TopicPartition, PartitionState]:
    """Per target partition: still moving (listed as an ongoing reassignment), or done with
    the replicas it has now (which may differ from the target if it was cancelled or refused)."""
    out: dict[TopicPartition, PartitionState] = {}
    for tp in sort_partitions(targets):
        target = list(targets[tp])
        if tp in ongoing:
            out[tp] = PartitionState(list(ongoing[tp][0]), target, False)
        elif tp in current:
            out[tp] = PartitionState(list(current[tp]), target, True)
        else:
            raise CliError(f"Unable to find partition: {tp_str(tp)}")
    return out


def format_states(states: Mapping[TopicPartition, PartitionState]) -> list[str]:
    lines = []
    for tp in sort_partitions(states):
        s = states[tp]
        if not s.done:
            lines.append(f"Reassignment of partition {tp_str(tp)} is still in progress.")
        elif s.current == s.target:
            lines.append(f"Reassignment of partition {tp_str(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {tp_str(tp)}, but replica set is "
                         f"[{_join(s.current)}] rather than [{_join(s.target)}].")
    return lines


def format_ongoing(ongoing: Ongoing) -> list[str]:
    """``--list`` output."""
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp in sort_partitions(ongoing):
        replicas, adding, removing = ongoing[tp]
        lines.append(f"{tp_str(tp)}: replicas: {_join(replicas)}. adding: {_join(adding)}. "
                     f"removing: {_join(removing)}.")
    return lines


# ------------------------------------------------------------------------ log dir moves

Replica = tuple[str, int, int]  # (topic, partition, broker): Kafka's TopicPartitionReplica


def replica_str(r: Replica) -> str:
    """A replica as Kafka prints it: ``topic-partition-broker``."""
    return f"{r[0]}-{r[1]}-{r[2]}"


def sort_replicas(replicas: Iterable[Replica]) -> list[Replica]:
    """Kafka's order: by broker, then topic, then partition."""
    return sorted(replicas, key=lambda r: (r[2], r[0], r[1]))


def replica_log_dirs(r: Reassignment) -> dict[Replica, str]:
    """The replicas the file sends to a named log dir (every "log_dirs" entry but "any")."""
    out: dict[Replica, str] = {}
    for tp, dirs in r.log_dirs.items():
        for broker, d in zip(r.targets[tp], dirs, strict=True):
            if d != ANY_LOG_DIR:
                out[(tp[0], tp[1], broker)] = d
    return out


def alter_log_dirs_requests(moves: Mapping[Replica, str]) -> dict[int, dict[str, Any]]:
    """The AlterReplicaLogDirs body to send each broker for `moves`."""
    per: dict[int, dict[str, dict[str, list[int]]]] = {}
    for (topic, partition, broker), d in moves.items():
        per.setdefault(broker, {}).setdefault(d, {}).setdefault(topic, []).append(partition)
    return {broker: {"dirs": [{"path": d, "topics": [{"name": t, "partitions": sorted(ps)}
                                                      for t, ps in sorted(topics.items())]}
                              for d, topics in sorted(dirs.items())]}
            for broker, dirs in sorted(per.items())}


@dataclass(frozen=True)
class MoveState:
    """Where a replica is against the log dir the file names (Kafka's LogDirMoveState)."""

    target: str
    current: str | None = None  # its log dir (None: in no live one)
    future: str | None = None  # the log dir it is moving to
    asked: bool = True  # False: its broker could not be asked

    @property
    def done(self) -> bool:
        return self.asked and self.current is not None and self.future is None


def move_states(moves: Mapping[Replica, str], described: Mapping[int, Any]) -> dict[Replica, MoveState]:
    """Each move's state from its broker's DescribeLogDirs answer (absent: not asked), as
    Kafka's tool reads describeReplicaLogDirs: the dir holding the replica, the dir holding its
    future replica; offline dirs are skipped."""
    out: dict[Replica, MoveState] = {}
    for rep, target in moves.items():
        resp = described.get(rep[2])
        if resp is None:
            out[rep] = MoveState(target, asked=False)
            continue
        current = future = None
        for d in resp.results:
            if d.error_code:
                continue
            for t in d.topics:
                for p in t.partitions if t.name == rep[0] else ():
                    if p.partition_index == rep[1]:
                        if p.is_future_key:
                            future = d.log_dir
                        else:
                            current = d.log_dir
        out[rep] = MoveState(target, current, future)
    return out


def format_move_states(states: Mapping[Replica, MoveState]) -> list[str]:
    """--verify's lines for the log dir moves, Kafka's texts."""
    lines = []
    for rep in sort_replicas(states):
        s = states[rep]
        part, broker = f"{rep[0]}-{rep[1]}", rep[2]
        if not s.asked:
            lines.append(f"Partition {part} cannot be found in any live log directory on broker {broker}.")
        elif s.current is None:
            lines.append(f"Partition {part} is not found in any live log dir on broker {broker}. There is likely an "
                         "offline log directory on the broker.")
        elif s.future is not None and s.future == s.target:
            lines.append(f"Reassignment of replica {replica_str(rep)} is still in progress.")
        elif s.future is not None:
            lines.append(f"Partition {part} on broker {broker} is being moved to log dir {s.future} instead of "
                         f"{s.target}.")
        elif s.current == s.target:
            lines.append(f"Reassignment of replica {replica_str(rep)} completed successfully.")
        else:
            lines.append(f"Partition {part} on broker {broker} is not being moved from log dir {s.current} to "
                         f"{s.target}.")
    return lines
