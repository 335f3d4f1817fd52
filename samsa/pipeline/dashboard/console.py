"""The broker console's view: what one poll of the cluster saw, turned into the JSON the page shows.

No I/O, no clock: the poller (console_poller.py) fills an `Observation` from the admin client's
answers and `build_view` derives everything the page shows from it, so tests feed it tables.

Kafka's definitions, as its metrics and tools use them:

* a broker is **up** while it is in the Metadata response's broker list (brokers registered in
  ZooKeeper); one seen in an earlier poll, or named in a replica list, but absent now is **down**;
* a partition is **under-replicated** when its ISR is smaller than its replica list
  (UnderReplicatedPartitions), **offline** when it has no leader (OfflinePartitionsCount);
* a group's **lag** on a partition is the high watermark (ListOffsets latest) minus the offset
  the group committed (OffsetFetch), as kafka-consumer-groups.sh prints it; a partition without a
  committed offset has no lag (None), and the group's total is the sum of the known ones;
* a topic's **non-default configs** are those whose source is not DEFAULT_CONFIG (a topic
  override or a broker-level setting); the poller keeps all of them for /api/console/configs.

The view (served at /api/console and as `event: console`), in short:

    {"state": "ok" | "unreachable" | "starting", "error", "polled_at", "poll_ms", "interval_s",
     "cluster_id", "controller", "summary": {brokers, brokers_up, topics, partitions,
     under_replicated, offline, groups, total_lag}, "brokers": [...], "topics": [...],
     "groups": [...], "cleaner": [...], "errors": [...]}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: str | None = None


@dataclass(frozen=True)
class TopicInfo:
    name: str
    internal: bool
    partitions: tuple[PartitionInfo, ...]
    error: str | None = None


@dataclass(frozen=True)
class ConfigInfo:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name: DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG...
    sensitive: bool = False
    read_only: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": None if self.sensitive else self.value, "source": self.source,
                "sensitive": self.sensitive, "read_only": self.read_only}


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupInfo:
    group_id: str
    state: str  # Kafka's names: Stable, Empty, PreparingRebalance, ...
    protocol: str  # "classic" or "consumer" (KIP-848)
    assignor: str
    coordinator: int  # -1: unknown
    members: tuple[MemberInfo, ...]
    committed: dict[TopicPartition, int]  # OffsetFetch: the partitions with a committed offset
    error: str | None = None


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    error: str | None
    sizes: dict[TopicPartition, int]  # bytes per replica in this dir


@dataclass(frozen=True)
class CleanerLog:
    topic: str
    partition: int
    first_dirty_offset: int
    dirty_ratio: float
    cleans: int
    last_clean_ms: int  # -1: never
    bytes_reclaimed: int
    in_progress: bool
    uncleanable_reason: str | None


@dataclass
class Observation:
    """One poll's answers. Missing pieces (a request that failed) stay empty and say why in `errors`."""

    polled_ms: int
    cluster_id: str | None = None
    controller: int = -1
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)  # in Metadata now
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    log_start_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermarks: dict[TopicPartition, int] = field(default_factory=dict)
    log_dirs: dict[int, list[LogDirInfo]] = field(default_factory=dict)  # broker -> its dirs
    configs: dict[str, list[ConfigInfo]] = field(default_factory=dict)
    groups: list[GroupInfo] = field(default_factory=list)
    cleaner: dict[int, list[CleanerLog]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    poll_ms: int = 0


def under_replicated(p: PartitionInfo) -> bool:
    return len(p.isr) < len(p.replicas)


def offline(p: PartitionInfo) -> bool:
    return p.leader < 0


def lag(committed: int | None, high_watermark: int | None) -> int | None:
    """kafka-consumer-groups.sh's LAG: high watermark minus committed offset, None if either is unknown."""
    if committed is None or committed < 0 or high_watermark is None or high_watermark < 0:
        return None
    return high_watermark - committed


def non_default(configs: list[ConfigInfo]) -> list[ConfigInfo]:
    return [c for c in configs if c.source != "DEFAULT_CONFIG"]


def broker_rows(obs: Observation, known: dict[int, tuple[str, int] | None]) -> list[dict[str, Any]]:
    """Every broker in Metadata now, in `known` (seen before: None if never with an address) or
    named as a replica; `up` only for those in Metadata now."""
    ids = set(obs.brokers) | set(known)
    for t in obs.topics.values():
        for p in t.partitions:
            ids.update(p.replicas)
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    urp: dict[int, int] = {}
    for t in obs.topics.values():
        for p in t.partitions:
            if p.leader >= 0:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                if under_replicated(p):
                    urp[p.leader] = urp.get(p.leader, 0) + 1
            for r in p.replicas:
                replicas[r] = replicas.get(r, 0) + 1
    rows = []
    for b in sorted(ids):
        addr = obs.brokers.get(b) or known.get(b)
        dirs = obs.log_dirs.get(b)
        rows.append({
            "id": b,
            "host": addr[0] if addr else None,
            "port": addr[1] if addr else None,
            "up": b in obs.brokers,
            "controller": b == obs.controller,
            "leaders": leaders.get(b, 0),
            "replicas": replicas.get(b, 0),
            "under_replicated": urp.get(b, 0),  # of the partitions it leads, as Kafka's broker metric counts
            "bytes": None if dirs is None else sum(sum(d.sizes.values()) for d in dirs),
            "log_dirs": None if dirs is None else [
                {"path": d.path, "error": d.error, "bytes": sum(d.sizes.values())} for d in dirs],
        })
    return rows


def _replica_sizes(obs: Observation) -> dict[tuple[int, str, int], int]:
    out: dict[tuple[int, str, int], int] = {}
    for broker, dirs in obs.log_dirs.items():
        for d in dirs:
            for (t, p), size in d.sizes.items():
                out[(broker, t, p)] = out.get((broker, t, p), 0) + size
    return out


def topic_rows(obs: Observation) -> list[dict[str, Any]]:
    """Topics by name, internal ones last; each partition with its leader's replica size."""
    sizes = _replica_sizes(obs)
    rows = []
    for t in sorted(obs.topics.values(), key=lambda t: (t.internal, t.name)):
        parts: list[dict[str, Any]] = []
        for p in sorted(t.partitions, key=lambda p: p.partition):
            tp = (t.name, p.partition)
            # The leader's copy; without a leader, the largest copy left.
            size = sizes.get((p.leader, t.name, p.partition))
            if size is None:
                size = max((sizes[(r, t.name, p.partition)] for r in p.replicas if (r, t.name, p.partition) in sizes),
                           default=None)
            parts.append({"partition": p.partition, "leader": p.leader, "replicas": list(p.replicas),
                          "isr": list(p.isr), "log_start_offset": obs.log_start_offsets.get(tp),
                          "high_watermark": obs.high_watermarks.get(tp), "size": size, "error": p.error})
        known_sizes = [x["size"] for x in parts if x["size"] is not None]
        ranges = [(x["log_start_offset"], x["high_watermark"]) for x in parts]
        configs = obs.configs.get(t.name)
        rows.append({
            "name": t.name,
            "internal": t.internal,
            "error": t.error,
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
            "under_replicated": sum(1 for p in t.partitions if under_replicated(p)),
            "offline": sum(1 for p in t.partitions if offline(p)),
            "size": sum(known_sizes) if known_sizes else None,
            "records": sum(hw - ls for ls, hw in ranges if ls is not None and hw is not None),
            "configs": None if configs is None else [c.as_dict() for c in non_default(configs)],
            "config_count": None if configs is None else len(configs),
            "partitions": parts,
        })
    return rows


def group_rows(obs: Observation) -> list[dict[str, Any]]:
    rows = []
    for g in sorted(obs.groups, key=lambda g: g.group_id):
        owner: dict[TopicPartition, str] = {}
        for m in g.members:
            for tp in m.assignment:
                owner[tp] = m.client_id
        parts = []
        total = 0
        for tp in sorted(set(g.committed) | set(owner)):
            committed = g.committed.get(tp)
            hw = obs.high_watermarks.get(tp)
            behind = lag(committed, hw)
            total += behind or 0
            parts.append({"topic": tp[0], "partition": tp[1], "committed": committed, "high_watermark": hw,
                          "lag": behind, "client_id": owner.get(tp)})
        members = []
        for m in sorted(g.members, key=lambda m: (m.client_id, m.member_id)):
            assigned: dict[str, list[int]] = {}
            for t, p in sorted(m.assignment):
                assigned.setdefault(t, []).append(p)
            members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                            "group_instance_id": m.group_instance_id, "assignment": assigned})
        rows.append({"group_id": g.group_id, "state": g.state, "protocol": g.protocol, "assignor": g.assignor,
                     "coordinator": g.coordinator, "error": g.error, "members": members, "partitions": parts,
                     "total_lag": total})
    return rows


def cleaner_rows(obs: Observation) -> list[dict[str, Any]]:
    rows = []
    for broker in sorted(obs.cleaner):
        for lg in sorted(obs.cleaner[broker], key=lambda x: (x.topic, x.partition)):
            state = ("uncleanable" if lg.uncleanable_reason is not None else "cleaning" if lg.in_progress else "ok")
            rows.append({"broker": broker, "topic": lg.topic, "partition": lg.partition,
                         "first_dirty_offset": lg.first_dirty_offset, "dirty_ratio": round(lg.dirty_ratio, 4),
                         "cleans": lg.cleans, "last_clean_ms": None if lg.last_clean_ms < 0 else lg.last_clean_ms,
                         "bytes_reclaimed": lg.bytes_reclaimed, "state": state, "reason": lg.uncleanable_reason})
    return rows


def build_view(obs: Observation, known: dict[int, tuple[str, int] | None], interval_s: float) -> dict[str, Any]:
    """The console's JSON for a poll that reached the cluster. `known`: brokers seen before."""
    brokers = broker_rows(obs, known)
    topics = topic_rows(obs)
    groups = group_rows(obs)
    partitions = [p for t in obs.topics.values() for p in t.partitions]
    return {
        "state": "ok",
        "error": None,
        "polled_at": obs.polled_ms,
        "poll_ms": obs.poll_ms,
        "interval_s": interval_s,
        "cluster_id": obs.cluster_id,
        "controller": obs.controller,
        "summary": {
            "brokers": len(brokers),
            "brokers_up": sum(1 for b in brokers if b["up"]),
            "topics": len(topics),
            "partitions": len(partitions),
            "under_replicated": sum(1 for p in partitions if under_replicated(p)),
            "offline": sum(1 for p in partitions if offline(p)),
            "groups": len(groups),
            "total_lag": sum(g["total_lag"] for g in groups),
        },
        "brokers": brokers,
        "topics": topics,
        "groups": groups,
        "cleaner": cleaner_rows(obs),
        "errors": list(obs.errors),
    }


def unreachable_view(last_ok: dict[str, Any] | None, error: str, polled_ms: int,
                     interval_s: float) -> dict[str, Any]:
    """The cluster did not answer: the last good view (if any) kept for reference, as of its poll,
    with every broker down."""
    view = dict(last_ok) if last_ok is not None else starting_view(interval_s)
    view["brokers"] = [{**b, "up": False, "controller": False} for b in view["brokers"]]
    view["summary"] = {**view["summary"], "brokers_up": 0}
    view.update(state="unreachable", error=error, polled_at=polled_ms, interval_s=interval_s, controller=-1,
                as_of=None if last_ok is None else last_ok["polled_at"])
    return view


def starting_view(interval_s: float) -> dict[str, Any]:
    """Before the first poll."""
    return {"state": "starting", "error": None, "polled_at": None, "poll_ms": None, "interval_s": interval_s,
            "cluster_id": None, "controller": -1,
            "summary": {"brokers": 0, "brokers_up": 0, "topics": 0, "partitions": 0, "under_replicated": 0,
                        "offline": 0, "groups": 0, "total_lag": 0},
            "brokers": [], "topics": [], "groups": [], "cleaner": [], "errors": []}
