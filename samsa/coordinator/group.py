"""One classic consumer group: its members, its state, its committed offsets.

The states and their transitions are Kafka's (GroupMetadata.scala / ClassicGroup.java):

    Empty ----------------> PreparingRebalance    a member joins
    PreparingRebalance ---> CompletingRebalance   every known member rejoined, or the rebalance
                                                  timeout passed (the late ones are removed)
    PreparingRebalance ---> Empty                 nobody is left when the join phase ends
    CompletingRebalance --> Stable                the leader's SyncGroup brought the assignment
    CompletingRebalance --> PreparingRebalance    a member joins, leaves, changes or expires
    Stable ---------------> PreparingRebalance    the leader rejoins, a follower rejoins with new
                                                  metadata, a member leaves or its session expires
    any ------------------> Dead                  deleted, expired (Empty and no offsets), unloaded

This module holds the data and the small decisions on it (which protocol the group votes for,
whether a joining member's protocols fit, who leads, what the group looks like as a
GroupMetadataValue record); the request handling that drives it lives in `membership.py`, the
offsets in `offsets.py`. A member's pending JoinGroup or SyncGroup response is a callback held
on the member until the group can answer it.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from .records import (
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitValue,
    RecordDecodeError,
    subscription_topics,
)

CONSUMER_PROTOCOL_TYPE = "consumer"

Callback = Callable[[dict[str, Any]], None]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# The states each state may be entered from (Kafka's validPreviousStates).
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    DEAD: frozenset(GroupState),
    EMPTY: frozenset({PREPARING_REBALANCE}),
}


class Member:
    """A member of a classic group (Kafka's MemberMetadata)."""

    __slots__ = (
        "assignment",
        "awaiting_join",
        "awaiting_sync",
        "client_host",
        "client_id",
        "group_instance_id",
        "is_new",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
    )  # fmt: skip

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join: Callback | None = None
        self.awaiting_sync: Callback | None = None
        # A member added by this rebalance: it cannot heartbeat before its JoinGroup answer, so
        # it is expired by the new-member join timeout instead of its session timeout.
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")  # pragma: no cover

    def __repr__(self) -> str:
        return f"Member({self.member_id!r}, instance={self.group_instance_id!r})"


class Group:
    """A classic group (Kafka's GroupMetadata), with its committed offsets."""

    def __init__(self, group_id: str, state: GroupState, now: int) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp: int | None = now
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()  # members expected to SyncGroup this generation
        self.new_member_added = False  # a member arrived during the initial delayed join
        self.subscribed_topics: set[str] | None = None  # None: unknown, assume every topic
        self.offsets: dict[tuple[str, int], OffsetCommitValue] = {}
        # The join phase's timer: ("initial", delay, remaining) during the initial delay, or
        # ("normal",) while waiting up to the rebalance timeout.
        self.join_phase: tuple[Any, ...] | None = None
        self.persisted: bytes | None = None  # the GroupMetadataValue last written or loaded

    # -- state ------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState, now: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: {self.state.value} -> {state.value} is not a transition")
        self.state = state
        self.state_timestamp = now

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    # -- members ----------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def add(self, member: Member, callback: Callback | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = callback
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        instance_id = member.group_instance_id if member is not None else None
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id; the caller fences the old id's pending calls."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join is not None:
                self.leader_id = member_id
                return True
        return False

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    # -- protocols --------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update({name for name, _ in m.protocols})
        n = len(self.members)
        return {name for name, c in counts.items() if c == n}

    def supports_protocols(self, protocol_type: str, protocols: Iterable[str]) -> bool:
        names = set(protocols)
        if self.is_(EMPTY):
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's vote: each member names its most preferred protocol that all members support."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])  # first-counted wins a tie

    def compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(subscription_topics(m.metadata(self.protocol_name)))
        except RecordDecodeError:
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    def init_next_generation(self, now: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now)
        self.pending_sync.clear()

    # -- views ------------------------------------------------------------------------------

    def member_list(self) -> list[dict[str, Any]]:
        """The JoinGroup response's members, for the leader."""
        protocol = self.protocol_name or ""
        return [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata(protocol)}
            for m in self.members.values()
        ]

    def to_record(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        protocol = self.protocol_name
        members = tuple(
            MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata(protocol) if protocol is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )  # fmt: skip
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            protocol,
            self.leader_id,
            self.state_timestamp if self.state_timestamp is not None else -1,
            members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue, now: int) -> Group:
        """A group as Kafka loads it: Stable with its members, or Empty."""
        g = cls(group_id, STABLE if value.members else EMPTY, now)
        g.generation_id = value.generation
        g.protocol_type = value.protocol_type or None
        g.protocol_name = value.protocol
        g.leader_id = value.leader
        g.state_timestamp = value.current_state_timestamp if value.current_state_timestamp != -1 else None
        for mm in value.members:
            protocols = [(value.protocol or "", mm.subscription)]
            m = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                       mm.rebalance_timeout, mm.session_timeout, value.protocol_type, protocols, mm.assignment)
            g.members[m.member_id] = m
            if m.group_instance_id is not None:
                g.static_members[m.group_instance_id] = m.member_id
        if g.leader_id is not None and g.leader_id not in g.members:
            g.leader_id = next(iter(g.members), None)
        g.subscribed_topics = g.compute_subscribed_topics()
        return g

    def describe(self) -> dict[str, Any]:
        """The group's DescribeGroups entry (without error and group id)."""
        stable = self.is_(STABLE)
        protocol = self.protocol_name or ""
        return {
            "group_state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol_data": protocol if stable else "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata(protocol) if stable else b"",
                    "member_assignment": m.assignment if stable else b"",
                }
                for m in self.members.values()
            ],
        }

    def __repr__(self) -> str:
        return (f"Group({self.group_id!r}, {self.state.value}, gen={self.generation_id}, "
                f"leader={self.leader_id!r}, members={list(self.members)})")
