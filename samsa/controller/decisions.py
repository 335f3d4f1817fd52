"""Pure decisions of the controller and the replica manager (Kafka's semantics, no I/O).

How it works: every function here takes the facts it needs — assignment, ISR, live brokers,
log end offsets, times in milliseconds — and returns a decision. Nothing reads a clock, a
socket, ZooKeeper or a log; the callers (the controller's event loop, a partition's leader)
gather the facts and apply the result. The Kafka counterparts are named on each function:

* leader election       — ``Election.scala`` / ``PartitionLeaderElectionAlgorithms``
* ISR shrink / expand   — ``Partition.scala`` (``getOutOfSyncReplicas``, ``isFollowerInSync``)
* high watermark        — ``Partition.maybeIncrementLeaderHW``
* acks=all / min ISR    — ``Partition.appendRecordsToLeader``, ``checkEnoughReplicasReachOffset``
* replica assignment    — ``AdminUtils.assignReplicasToBrokers`` (rack-unaware and rack-aware)
* reassignment          — KIP-455 (RS = ORS + TRS, AR = TRS - ORS, RR = ORS - TRS)

Replica lists are ordered (assignment order matters: the first replica is the preferred
leader); sets are used where Kafka's order does not matter.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from samsa.protocol.errors import ErrorCode

__all__ = [
    "AssignmentError",
    "ElectionResult",
    "FollowerState",
    "ReassignmentPlan",
    "WAIT",
    "acks_all_satisfied",
    "assign_replicas",
    "can_join_isr",
    "check_enough_replicas",
    "elect_for_controlled_shutdown",
    "elect_for_reassignment",
    "elect_leader",
    "needs_preferred_election",
    "new_high_watermark",
    "offline_election",
    "out_of_sync_replicas",
    "preferred_leader",
    "rack_alternated_brokers",
    "reassignment_complete",
    "reassignment_plan",
]


# --------------------------------------------------------------------------- leader election


def elect_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean_allowed: bool
) -> tuple[int | None, bool]:
    """Offline-partition election: ``(leader, unclean)``.

    The first replica in assignment order that is alive and in the ISR. When there is none and
    ``unclean.leader.election.enable`` is true, the first live replica in assignment order, with
    ``unclean=True`` (it may lack acknowledged records; the caller logs that). Else ``(None,
    False)``: the partition stays offline. ISR members outside the assignment are never chosen.
    """
    for replica in assignment:
        if replica in live and replica in isr:
            return replica, False
    if unclean_allowed:
        for replica in assignment:
            if replica in live:
                return replica, True
    return None, False


@dataclass(frozen=True)
class ElectionResult:
    """A leader with the ISR to write alongside it (leader is None: partition offline)."""

    leader: int | None
    isr: list[int]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean_allowed: bool
) -> ElectionResult:
    """:func:`elect_leader` plus the new ISR, as Kafka's ``PartitionStateMachine`` writes it.

    Clean election: the old ISR minus dead replicas (the leader is among them). Unclean: the
    ISR restarts as just the new leader. No leader: leader and ISR are left as they were
    (the caller keeps the partition offline and does not bump the epoch).
    """
    leader, unclean = elect_leader(assignment, isr, live, unclean_allowed)
    if leader is None:
        return ElectionResult(None, list(isr), False)
    if unclean:
        return ElectionResult(leader, [leader], True)
    return ElectionResult(leader, [r for r in isr if r in live], False)


def preferred_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """The first assigned replica, if it is alive and in the ISR; else None."""
    if not assignment:
        return None
    first = assignment[0]
    return first if first in live and first in isr else None


def needs_preferred_election(
    current_leader: int | None,
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
) -> bool:
    """True when the preferred replica could lead (alive, in ISR) but does not lead now."""
    preferred = preferred_leader(assignment, isr, live)
    return preferred is not None and preferred != current_leader


def elect_for_controlled_shutdown(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    """A leader for a partition whose leader is shutting down: the first replica in
    assignment order that is alive, in the ISR and not itself shutting down. Never unclean.
    The ISR to write with it is the old ISR minus the shutting-down brokers."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


def elect_for_reassignment(
    target: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """Leader during a reassignment: the first target replica alive and in the ISR."""
    for replica in target:
        if replica in live and replica in isr:
            return replica
    return None


# ----------------------------------------------------------------------------- ISR and HW


@dataclass(frozen=True)
class FollowerState:
    """What a leader knows of a follower from its fetches.

    ``leo``: the follower's log end offset as of its last fetch. ``last_caught_up_time_ms``:
    the last time the follower's fetch reached the leader's LEO *as it was when that fetch
    was read* (Kafka's ``lastCaughtUpTimeMs``). A new leader seeds every ISR member with
    ``last_caught_up_time_ms = now`` so nobody is dropped just for the leader being new.
    """

    leo: int
    last_caught_up_time_ms: int


def out_of_sync_replicas(
    leader: int,
    isr: Collection[int],
    follower_state: Mapping[int, FollowerState],
    leader_leo: int,
    now_ms: int,
    replica_lag_time_max_ms: int,
) -> set[int]:
    """ISR members to drop (Kafka's ``getOutOfSyncReplicas``).

    A follower is in sync while its LEO equals the leader's LEO, or while it caught up within
    the last ``replica.lag.time.max.ms``; otherwise it is out of sync. The leader never is. An
    ISR member the leader has no state for has never fetched from this leader: out of sync
    (the caller must seed state on becoming leader, see :class:`FollowerState`).
    """
    out: set[int] = set()
    for replica in isr:
        if replica == leader:
            continue
        state = follower_state.get(replica)
        if state is None:
            out.add(replica)
            continue
        caught_up = state.leo == leader_leo
        lagging_for = now_ms - state.last_caught_up_time_ms
        if not caught_up and lagging_for > replica_lag_time_max_ms:
            out.add(replica)
    return out


def can_join_isr(
    follower_leo: int, high_watermark: int, leader_epoch_start_offset: int | None
) -> bool:
    """Kafka's ISR expansion rule (``isFollowerInSync``): the follower's LEO has reached the
    high watermark *and* the start offset of the leader's current epoch (so it has fetched
    something of this leader's epoch). Unknown epoch start (None): not yet.

    The caller also checks the follower is assigned, alive, not already in the ISR and not
    shutting down."""
    if leader_epoch_start_offset is None:
        return False
    return follower_leo >= high_watermark and follower_leo >= leader_epoch_start_offset


def new_high_watermark(
    current_hw: int,
    leader_leo: int,
    isr: Collection[int],
    follower_leo: Mapping[int, int],
    *,
    leader: int | None = None,
) -> int:
    """Kafka's ``maybeIncrementLeaderHW``: the minimum LEO over the ISR, the leader's own LEO
    (``leader_leo``) always included. The HW never moves backwards: when the minimum is below
    ``current_hw`` (a follower's LEO report is stale, or a truncated replica re-joined), the
    HW stays where it is.

    ``follower_leo`` holds the followers' LEOs; the leader's own id may appear in ``isr``
    (it normally does) — pass it as ``leader`` so it is not mistaken for a follower. An ISR
    member with no known LEO (and not the leader) holds the HW: advancing past a replica we
    know nothing about could acknowledge records it does not have.
    """
    low = leader_leo
    for replica in isr:
        if replica == leader:
            continue
        leo = follower_leo.get(replica)
        if leo is None:
            return current_hw
        low = min(low, leo)
    return max(current_hw, low)


Wait = Literal["wait"]
WAIT: Wait = "wait"


def check_enough_replicas(acks: int, isr_size: int, min_insync_replicas: int) -> ErrorCode | None:
    """Before appending a produce batch on the leader (``appendRecordsToLeader``): with
    ``acks=-1`` (all) and fewer ISR members than ``min.insync.replicas``, refuse with
    NOT_ENOUGH_REPLICAS and write nothing. acks=0/1 are never refused for this."""
    if acks == -1 and isr_size < min_insync_replicas:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return None


def acks_all_satisfied(
    required_offset: int, high_watermark: int, isr_size: int, min_insync: int
) -> ErrorCode | None | Wait:
    """Whether a waiting acks=all produce can be answered (``checkEnoughReplicasReachOffset``).

    ``required_offset`` is the batch's last offset + 1 (the leader's LEO right after the
    append). Returns:

    * ``"wait"`` — the HW has not reached ``required_offset`` yet: keep waiting (until the
      request times out, when the caller answers REQUEST_TIMED_OUT);
    * ``None`` — every ISR member has the batch and the ISR still has at least
      ``min.insync.replicas`` members: answer success;
    * ``NOT_ENOUGH_REPLICAS_AFTER_APPEND`` — the HW reached the batch but only because the ISR
      shrank below ``min.insync.replicas`` while waiting: the records are in the log, but too
      few replicas have them to call them durable.
    """
    if high_watermark < required_offset:
        return WAIT
    if isr_size < min_insync:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return None


# ----------------------------------------------------------------------- replica assignment


class AssignmentError(ValueError):
    """A topic's replicas cannot be assigned; ``error_code`` is what CreateTopics answers."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message)
        self.error_code = error_code


def rack_alternated_brokers(brokers: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: racks in name order, each rack's brokers in id order,
    one broker from each rack in turn (racks that run out are skipped).

    rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8  ->  0, 3, 6, 1, 4, 7, 2, 5, 8
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id], []).append(broker_id)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [c[i] for i in range(depth) for c in columns if i < len(c)]


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    """Index of the (j+2)-th replica: a shift of 1..n-1 from the first, never the first."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    next_replica_shift: int | None = None,
    *,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``assignReplicasToBrokers``: ``{partition: [replica, ...]}``, first = preferred.

    Goals (Kafka's): spread replicas evenly over brokers; spread each broker's followers over
    the other brokers; with racks, put each partition's replicas on distinct racks if possible.

    Rack-unaware (no broker has a rack): brokers in id order; partition p's first replica is
    broker ``(p + start_index) % n``; its followers follow at a shift that grows by one each
    time the partitions wrap around the broker list, so a broker's followers vary.

    Rack-aware (every broker has a rack): the same round robin over
    :func:`rack_alternated_brokers`, the shift scaled by the number of racks; a follower
    candidate is skipped while its rack already has a replica and some rack has none, or
    while its broker already has one and some broker has none.

    ``start_index`` / ``next_replica_shift`` default to random (Kafka's random start); as in
    Kafka, an explicit ``start_index`` alone also fixes the shift to the same value.
    ``start_partition_id`` numbers new partitions when a topic grows (the shift accounts for
    the partitions that exist). Raises :class:`AssignmentError` (a ValueError).
    """
    if num_partitions <= 0:
        raise AssignmentError(
            f"number of partitions must be larger than 0, got {num_partitions}",
            ErrorCode.INVALID_PARTITIONS,
        )
    if replication_factor <= 0:
        raise AssignmentError(
            f"replication factor must be larger than 0, got {replication_factor}",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}",
            ErrorCode.INVALID_REPLICATION_FACTOR,
        )
    with_rack = {b: r for b, r in brokers.items() if r is not None}
    if with_rack and len(with_rack) != len(brokers):
        missing = sorted(b for b, r in brokers.items() if r is None)
        raise AssignmentError(
            "Not all brokers have rack information for replica rack aware assignment "
            f"(no broker.rack on brokers {missing})",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        )
    if with_rack:
        order = rack_alternated_brokers(with_rack)
        num_racks = len(set(with_rack.values()))
    else:
        order = sorted(brokers)
        num_racks = 0
    n = len(order)
    rand = rng if rng is not None else random.Random()
    if start_index is None:
        start = rand.randrange(n)
        shift = next_replica_shift if next_replica_shift is not None else rand.randrange(n)
    else:
        start = start_index
        shift = next_replica_shift if next_replica_shift is not None else start_index

    out: dict[int, list[int]] = {}
    for p in range(max(0, start_partition_id), max(0, start_partition_id) + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        if num_racks:
            out[p] = _rack_aware_replicas(order, with_rack, num_racks, first, shift,
                                          replication_factor)
        else:
            out[p] = [order[first]] + [
                order[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
    return out


def _rack_aware_replicas(
    order: Sequence[int], racks: Mapping[int, str], num_racks: int, first: int, shift: int,
    replication_factor: int,
) -> list[int]:
    n = len(order)
    leader = order[first]
    replicas = [leader]
    racks_used = {racks[leader]}
    brokers_used = {leader}
    k = 0
    while len(replicas) < replication_factor:
        broker = order[_follower_index(first, shift * num_racks, k, n)]
        k += 1
        rack = racks[broker]
        rack_ok = rack not in racks_used or len(racks_used) == num_racks
        broker_ok = broker not in brokers_used or len(brokers_used) == n
        if rack_ok and broker_ok:
            replicas.append(broker)
            racks_used.add(rack)
            brokers_used.add(broker)
    return replicas


# ----------------------------------------------------------------------------- reassignment


@dataclass(frozen=True)
class ReassignmentPlan:
    """KIP-455's sets for moving a partition from ``original`` (ORS) to ``target`` (TRS).

    1. Write ``replicas`` = target then the original replicas not in it (RS = TRS + ORS),
       with ``adding`` (AR) and ``removing`` (RR); start the adding replicas as followers.
    2. Wait until every target replica is in the ISR (:func:`reassignment_complete`).
    3. If the leader is not in the target (or is dead), elect one from it
       (:func:`elect_for_reassignment`).
    4. Write replicas = ``target``, ISR minus ``removing``; stop and delete the removed ones.

    ``no_op`` when nothing changes (same replicas in the same order). A pure reorder (same
    set) needs only step 4 (and a preferred election if the caller wants the new order's
    leader).
    """

    original: list[int]
    target: list[int]
    replicas: list[int]
    adding: list[int]
    removing: list[int]

    @property
    def no_op(self) -> bool:
        return self.original == self.target


def reassignment_plan(current: Sequence[int], target: Sequence[int]) -> ReassignmentPlan:
    """The KIP-455 plan for ``current -> target``; ValueError on an empty or duplicated
    target (Kafka answers INVALID_REPLICA_ASSIGNMENT)."""
    if not target:
        raise AssignmentError("the target replica list is empty",
                              ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    if len(set(target)) != len(target):
        raise AssignmentError(f"the target replica list {list(target)} has duplicates",
                              ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    replicas = list(target) + [r for r in current if r not in target]
    return ReassignmentPlan(
        original=list(current),
        target=list(target),
        replicas=replicas,
        adding=[r for r in target if r not in current],
        removing=[r for r in current if r not in target],
    )


def reassignment_complete(target: Sequence[int], isr: Collection[int]) -> bool:
    """Step 2 of a reassignment is done when every target replica is in the ISR."""
    return all(r in isr for r in target)
