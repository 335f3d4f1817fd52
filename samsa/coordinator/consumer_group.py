"""A consumer group of the new protocol (KIP-848): members, epochs, target and current assignments.

Three epochs drive the group (Kafka's ConsumerGroup / ConsumerGroupMember):

* the *group epoch* grows whenever membership, a subscription, or the partition count of a
  subscribed topic changes;
* the *assignment epoch* is the group epoch for which the target assignment (each member's
  partitions, from the server-side assignor) was computed;
* each member's *member epoch* reaches the assignment epoch once the member has revoked what it
  must give up.

A member moves towards its target assignment on each heartbeat (`next_assignment`, Kafka's
CurrentAssignmentBuilder). It keeps the partitions it has that are still in its target; if it has
partitions that are not, it stays at its epoch in state `unrevoked_partitions` and is asked to
revoke them (its assignment is sent without them) until it heartbeats an owned list free of
them. Then it advances to the assignment epoch with every target partition that no other member
still holds (`owners`); the others are handed over on later heartbeats, once released (state
`unreleased_partitions`). So a partition is never held by two members at once.

Group states (Kafka's names): Empty (no members), Assigning (group epoch > assignment epoch),
Reconciling (some member not yet at the assignment epoch or not stable), Stable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .assignors import DEFAULT_ASSIGNOR, Assignment

STABLE = "stable"
UNREVOKED_PARTITIONS = "unrevoked_partitions"
UNRELEASED_PARTITIONS = "unreleased_partitions"

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

EMPTY_SET: frozenset[int] = frozenset()


class ConsumerMember:
    __slots__ = (
        "assigned",
        "client_host",
        "client_id",
        "instance_id",
        "member_epoch",
        "member_id",
        "pending_revocation",
        "previous_member_epoch",
        "rack_id",
        "rebalance_timeout_ms",
        "server_assignor",
        "state",
        "subscribed",
    )  # fmt: skip

    def __init__(self, member_id: str, instance_id: str | None = None) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id: str | None = None
        self.client_id = ""
        self.client_host = ""
        self.subscribed: tuple[str, ...] = ()
        self.server_assignor: str | None = None
        self.rebalance_timeout_ms = 300000
        self.member_epoch = 0
        self.previous_member_epoch = -1
        self.state = STABLE
        self.assigned: Assignment = {}
        self.pending_revocation: Assignment = {}

    def owned_partitions(self) -> Iterable[tuple[bytes, int]]:
        for a in (self.assigned, self.pending_revocation):
            for tid, ps in a.items():
                for p in ps:
                    yield tid, p

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == STABLE and self.member_epoch == epoch

    def __repr__(self) -> str:
        return (f"ConsumerMember({self.member_id!r}, epoch={self.member_epoch}, {self.state}, "
                f"assigned={ {t.hex()[:6]: sorted(p) for t, p in self.assigned.items()} })")


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> target assignment
        self.owners: dict[tuple[bytes, int], str] = {}  # partition -> member holding it (or revoking)
        self.subscription_metadata: dict[str, tuple[bytes, int]] = {}  # topic -> (id, partitions)

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return "Reconciling"
        return "Stable"

    def assignor_name(self, default: str = DEFAULT_ASSIGNOR) -> str:
        """The assignor most members ask for (ties: by name), else the default."""
        votes: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
        if not votes:
            return default
        return min(votes, key=lambda a: (-votes[a], a))

    def set_assignment(self, member: ConsumerMember, assigned: Assignment, pending: Assignment) -> None:
        """Replace the member's current assignment, keeping `owners` in step."""
        for tp in member.owned_partitions():
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]
        member.assigned = assigned
        member.pending_revocation = pending
        for tp in member.owned_partitions():
            self.owners[tp] = member.member_id

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.set_assignment(member, {}, {})
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def subscribed_topics(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.subscribed)
        return out


def next_assignment(
    member: ConsumerMember,
    target_epoch: int,
    target: Assignment,
    owned: Assignment | None,
    owner_of: Callable[[bytes, int], str | None],
) -> tuple[str, int, Assignment, Assignment]:
    """(state, member epoch, assigned, pending revocation) after this heartbeat.

    `owned` is what the member reported holding (None when the request did not say);
    `owner_of` names the member holding a partition (None when free).
    """

    def owns_any(revoking: Assignment) -> bool:
        if owned is None:
            return True
        return any(owned.get(t, EMPTY_SET) & ps for t, ps in revoking.items())

    unchanged = (member.state, member.member_epoch, member.assigned, member.pending_revocation)
    if member.state == STABLE and member.member_epoch == target_epoch:
        return unchanged
    if member.state == UNREVOKED_PARTITIONS and owns_any(member.pending_revocation):
        return unchanged

    current = member.assigned
    kept: dict[bytes, frozenset[int]] = {}
    revoke: dict[bytes, frozenset[int]] = {}
    grown: dict[bytes, frozenset[int]] = {}
    unreleased = False
    for tid in set(current) | set(target):
        cur = current.get(tid, EMPTY_SET)
        tgt = target.get(tid, EMPTY_SET)
        k = cur & tgt
        if k:
            kept[tid] = k
        if cur - tgt:
            revoke[tid] = cur - tgt
        add = tgt - cur
        free = frozenset(p for p in add if owner_of(tid, p) in (None, member.member_id))
        if len(free) < len(add):
            unreleased = True
        if k or free:
            grown[tid] = k | free
    if revoke and owns_any(revoke):
        return UNREVOKED_PARTITIONS, member.member_epoch, kept, revoke
    return (UNRELEASED_PARTITIONS if unreleased else STABLE), target_epoch, grown, {}


def to_assignment(topic_partitions: Iterable[Any] | None) -> Assignment | None:
    """A request's `topic_partitions` (topic_id, partitions) as an Assignment (None stays None)."""
    if topic_partitions is None:
        return None
    out: dict[bytes, frozenset[int]] = {}
    for tp in topic_partitions:
        tid = bytes(tp.topic_id)
        out[tid] = out.get(tid, EMPTY_SET) | frozenset(tp.partitions or ())
    return out


def is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(ps <= assigned.get(t, EMPTY_SET) for t, ps in owned.items())
