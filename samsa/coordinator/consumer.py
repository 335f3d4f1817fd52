"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe.

How it works (Kafka's GroupMetadataManager.consumerGroupHeartbeat, much reduced): a member joins
with member epoch 0 and its subscription; any change of membership, of a subscription, of the
preferred server assignor or of the partition count of a subscribed topic (checked on every
heartbeat through the `topic_partitions` hook) bumps the group epoch; the next heartbeat of any
member recomputes the target assignment with the group's assignor (assignors.py) for that epoch;
then the heartbeating member moves towards its target (consumer_group.next_assignment). Sessions
(`group.consumer.session.timeout.ms`) and revocations (the member's rebalance timeout) are
timers; expiry fences the member: it is removed, its partitions are free, the group epoch grows.

A group id is either classic or consumer: the consumer groups live in `consumer_groups`; their
committed offsets stay in a classic `Group` of `groups` (state Empty, no members), so OffsetCommit,
OffsetFetch, retention and replay work unchanged -- only validation (member id and member epoch,
Kafka's ConsumerGroup.validateOffsetCommit/validateOffsetFetch) differs. A classic JoinGroup for
a consumer group with members gets INCONSISTENT_GROUP_PROTOCOL; a heartbeat for a classic group
with members gets GROUP_ID_NOT_FOUND (as Kafka without online migration); an empty group of one
kind becomes the other.

Membership is kept in memory only (not written to `__consumer_offsets`): after a coordinator
restart a member's heartbeat gets UNKNOWN_MEMBER_ID and it re-joins with epoch 0 (committed
offsets are records, as before, and survive).

Timers: ("cg_hb", group, member) session expiry; ("cg_rebal", group, member) revocation deadline.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode

from .assignors import ASSIGNORS, DEFAULT_ASSIGNOR, Assignment
from .base import ShardBase
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    UNREVOKED_PARTITIONS,
    ConsumerGroup,
    ConsumerMember,
    is_subset,
    next_assignment,
    to_assignment,
)
from .group import EMPTY, Group

E = ErrorCode
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
MEMBER_TYPE_CONSUMER = 1


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def new_member_id() -> str:
    """Like Kafka's Uuid.randomUuid().toString(): 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _wire_assignment(a: Assignment) -> dict[str, Any]:
    return {"topic_partitions": [{"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(a.items())]}


class ConsumerGroupMixin(ShardBase):
    consumer_groups: dict[str, ConsumerGroup]
    _topic_partitions: Callable[[str], int | None] | None

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------

    def consumer_group_heartbeat(self, req: Any, version: int, client_id: str | None = None,
                                 client_host: str = "") -> dict[str, Any]:
        """ConsumerGroupHeartbeat (v0-v1): the member's epoch and, when it changed, its assignment."""
        now = self._now()
        try:
            out = self._cg_heartbeat(req, version, client_id or "", client_host, now)
        except HeartbeatError as e:
            out = {"throttle_time": 0, "error_code": int(e.code), "error_message": e.message, "member_id": None,
                   "member_epoch": 0, "heartbeat_interval": 0, "assignment": None}
        self._run_due(now)
        return out

    def _cg_validate(self, req: Any, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        def invalid(msg: str) -> HeartbeatError:
            return HeartbeatError(E.INVALID_REQUEST, msg)

        epoch = req.member_epoch
        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id:
            raise invalid("InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise invalid("RackId can't be empty.")
        if (version >= 1 or epoch != 0) and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if epoch == 0:
            if req.rebalance_timeout == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or len(req.topic_partitions) > 0:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and not getattr(req, "subscribed_topic_regex", None):
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid(f"MemberEpoch {epoch} is invalid.")
        if getattr(req, "subscribed_topic_regex", None):  # librdkafka sends "" for none
            raise invalid("SubscribedTopicRegex is not supported by this broker.")
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            raise HeartbeatError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(ASSIGNORS)}.")

    def _cg_heartbeat(self, req: Any, version: int, client_id: str, client_host: str, now: int) -> dict[str, Any]:
        self._cg_validate(req, version)
        group_id: str = req.group_id
        err = self._check_group_id(group_id, allow_empty=False)
        if err is not None:
            raise HeartbeatError(err)
        epoch: int = req.member_epoch
        if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._cg_leave(group_id, req.member_id, req.instance_id, epoch, now)

        group = self.consumer_groups.get(group_id)
        if group is None:
            classic = self.groups.get(group_id)
            if classic is not None and not classic.is_(EMPTY):
                raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if epoch != 0:
                # Kafka answers GROUP_ID_NOT_FOUND; membership is not persisted here, so a group
                # unknown after a restart must make its members re-join.
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member {req.member_id}.")
            group = ConsumerGroup(group_id)

        owned = to_assignment(req.topic_partitions)
        bump = False
        if epoch == 0:
            member, bump = self._cg_join(group, req.member_id or new_member_id(), req.instance_id, now)
            if group_id not in self.consumer_groups:
                self.consumer_groups[group_id] = group
            if group_id not in self.groups:
                self.groups[group_id] = Group(group_id, EMPTY, now)  # holds the committed offsets
        else:
            member = self._cg_current_member(group, req.member_id, req.instance_id)
            if epoch > member.member_epoch or (epoch < member.member_epoch and (
                    epoch != member.previous_member_epoch or not is_subset(owned, member.assigned))):
                raise HeartbeatError(E.FENCED_MEMBER_EPOCH, f"The member epoch {epoch} is fenced; the member "
                                     f"is at epoch {member.member_epoch}.")

        if client_id:
            member.client_id = client_id
        if client_host:
            member.client_host = client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout
        if req.subscribed_topic_names is not None:
            subscribed = tuple(sorted(set(req.subscribed_topic_names)))
            if subscribed != member.subscribed:
                member.subscribed = subscribed
                bump = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            bump = True
        metadata = self._cg_subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.group_epoch += 1
            self.consumer_group_rebalances += 1
        if group.group_epoch > group.assignment_epoch:
            self._cg_compute_target(group)

        before = member.assigned
        self._cg_reconcile(group, member, owned, now)
        self.timers.set(("cg_hb", group_id, member.member_id), now + self.config.consumer_group_session_timeout_ms)
        # The assignment goes back when it changed, or for a full request: a join, or a heartbeat
        # carrying every field a join must (Kafka's rule: a member sends one after an error, to
        # resynchronise); the owned partitions alone, sent whenever they change, are not one.
        full = epoch == 0 or (req.rebalance_timeout != -1 and req.topic_partitions is not None and (
            req.subscribed_topic_names is not None or getattr(req, "subscribed_topic_regex", None) is not None))
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval": self.config.consumer_group_heartbeat_interval_ms,
                "assignment": _wire_assignment(member.assigned) if full or member.assigned != before else None}

    def _cg_join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                 now: int) -> tuple[ConsumerMember, bool]:
        """The member joining (epoch 0) and whether the group epoch must grow."""
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None and old_id != member_id:
                old = group.members[old_id]
                if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise HeartbeatError(E.UNRELEASED_INSTANCE_ID, f"Static member {old_id} with instance id "
                                         f"{instance_id} is not released yet.")
                # The new incarnation takes over the assignment of the one that left temporarily.
                member = ConsumerMember(member_id, instance_id)
                for attr in ("subscribed", "server_assignor", "rack_id", "rebalance_timeout_ms"):
                    setattr(member, attr, getattr(old, attr))
                target = group.target.get(old_id, {})
                assigned, pending = old.assigned, old.pending_revocation
                group.remove(old_id)
                self._cg_cancel_timers(group.group_id, old_id)
                group.add(member)
                group.target[member_id] = target
                group.set_assignment(member, assigned, pending)
                return member, False
        existing = group.members.get(member_id)
        if existing is not None:
            # A known member re-joins (it was fenced, or lost its state): it starts over.
            group.set_assignment(existing, {}, {})
            existing.member_epoch = 0
            existing.previous_member_epoch = -1
            existing.state = "stable"
            self.timers.cancel(("cg_rebal", group.group_id, member_id))
            return existing, True
        if len(group.members) >= self.config.consumer_group_max_size:
            raise HeartbeatError(E.GROUP_MAX_SIZE_REACHED, f"The consumer group has reached its maximum "
                                 f"capacity of {self.config.consumer_group_max_size} members.")
        member = ConsumerMember(member_id, instance_id)
        group.add(member)
        return member, True

    @staticmethod
    def _cg_current_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if current != member_id:
                raise HeartbeatError(E.FENCED_INSTANCE_ID, f"Instance id {instance_id} belongs to {current}.")
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of {group.group_id}.")
        return member

    def _cg_leave(self, group_id: str, member_id: str, instance_id: str | None, epoch: int,
                  now: int) -> dict[str, Any]:
        group = self.consumer_groups.get(group_id)
        if group is None:
            raise HeartbeatError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        member = self._cg_current_member(group, member_id, instance_id)
        if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member leaving for a while keeps its assignment until its session ends.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
            self.timers.cancel(("cg_rebal", group_id, member_id))
        else:
            self._cg_remove(group, member_id)
        return {"throttle_time": 0, "error_code": 0, "error_message": None, "member_id": member_id,
                "member_epoch": epoch, "heartbeat_interval": 0, "assignment": None}

    def _cg_remove(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove (or fence) a member: its partitions are free, the group epoch grows."""
        if group.remove(member_id) is not None:
            group.group_epoch += 1
            self.consumer_group_rebalances += 1
        self._cg_cancel_timers(group.group_id, member_id)

    def _cg_cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(("cg_hb", group_id, member_id))
        self.timers.cancel(("cg_rebal", group_id, member_id))

    # -- assignment ---------------------------------------------------------------------------

    def _cg_subscription_metadata(self, group: ConsumerGroup) -> dict[str, tuple[bytes, int]]:
        """(topic id, partition count) of each subscribed topic that exists."""
        out: dict[str, tuple[bytes, int]] = {}
        for name in sorted(group.subscribed_topics()):
            n = self._topic_partitions(name) if self._topic_partitions is not None else None
            if not n:
                continue
            tid = self._topic_id_for_name(name) if self._topic_id_for_name is not None else None
            if tid is None:
                tid = uuid.uuid5(uuid.NAMESPACE_URL, name).bytes  # only without the metadata hook (tests)
            out[name] = (bytes(tid), n)
        return out

    def _cg_compute_target(self, group: ConsumerGroup) -> None:
        assignor = ASSIGNORS[group.assignor_name(self._cg_default_assignor())]
        members = {mid: set(m.subscribed) for mid, m in group.members.items()}
        group.target = assignor(members, group.subscription_metadata, group.target)
        group.assignment_epoch = group.group_epoch

    @staticmethod
    def _cg_default_assignor() -> str:
        return DEFAULT_ASSIGNOR

    def _cg_reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None,
                      now: int) -> None:
        state, epoch, assigned, pending = next_assignment(
            member, group.assignment_epoch, group.target.get(member.member_id, {}), owned,
            lambda tid, p: group.owners.get((tid, p)))
        if epoch != member.member_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = epoch
        if assigned != member.assigned or pending != member.pending_revocation:
            group.set_assignment(member, assigned, pending)
        key = ("cg_rebal", group.group_id, member.member_id)
        if state == UNREVOKED_PARTITIONS and member.state != UNREVOKED_PARTITIONS:
            self.timers.set(key, now + member.rebalance_timeout_ms)
        elif state != UNREVOKED_PARTITIONS:
            self.timers.cancel(key)
        member.state = state

    # -- timers -------------------------------------------------------------------------------

    def _on_consumer_group_timer(self, key: tuple[Any, ...], now: int) -> None:
        """Session or revocation deadline passed: the member is fenced."""
        group = self.consumer_groups.get(key[1])
        if group is not None and key[2] in group.members:
            self._cg_remove(group, key[2])

    # -- ConsumerGroupDescribe ----------------------------------------------------------------

    def consumer_group_describe(self, group_ids: list[str], include_authorized_operations: bool = False
                                ) -> list[dict[str, Any]]:
        return [self._cg_describe(gid, include_authorized_operations) for gid in group_ids]

    def _cg_describe(self, group_id: str, include_ops: bool) -> dict[str, Any]:
        entry: dict[str, Any] = {"error_code": 0, "error_message": None, "group_id": group_id, "group_state": "",
                                 "group_epoch": 0, "assignment_epoch": 0, "assignor_name": "", "members": [],
                                 "authorized_operations": GROUP_OPERATIONS if include_ops
                                 else AUTHORIZED_OPERATIONS_OMITTED}
        err = self._check_group_id(group_id, allow_empty=True)
        group = self.consumer_groups.get(group_id) if err is None else None
        if err is None and group is None:
            err = E.GROUP_ID_NOT_FOUND
            classic = self.groups.get(group_id)
            entry["error_message"] = (f"Group {group_id} is not a consumer group." if classic is not None
                                      and classic.protocol_type is not None else f"Group {group_id} not found.")
        if err is not None or group is None:
            entry["error_code"] = int(err if err is not None else E.GROUP_ID_NOT_FOUND)
            return entry
        names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}

        def described(a: Assignment) -> dict[str, Any]:
            return {"topic_partitions": [
                {"topic_id": tid, "topic_name": names.get(tid) or self._cg_topic_name(tid), "partitions": sorted(ps)}
                for tid, ps in sorted(a.items())]}

        entry.update(group_state=group.state, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                     assignor_name=group.assignor_name(self._cg_default_assignor()))
        entry["members"] = [{
            "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
            "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed), "subscribed_topic_regex": None,
            "assignment": described(m.assigned), "target_assignment": described(group.target.get(m.member_id, {})),
            "member_type": MEMBER_TYPE_CONSUMER,
        } for m in group.members.values()]
        return entry

    def _cg_topic_name(self, tid: bytes) -> str:
        name = self._topic_name_for_id(tid) if self._topic_name_for_id is not None else None
        return name or ""

    # -- the classic APIs on consumer groups --------------------------------------------------

    def _consumer_group_with_members(self, group_id: str) -> ConsumerGroup | None:
        group = self.consumer_groups.get(group_id)
        return group if group is not None and group.members else None

    def join_group(self, req: Any, version: int, client_id: str | None, client_host: str,
                   respond: Callable[[dict[str, Any]], None]) -> None:
        group_id = getattr(req, "group_id", None)
        if group_id is not None and group_id in self.consumer_groups:
            if self._consumer_group_with_members(group_id) is not None:
                from .base import join_result
                from .membership import _shape_join
                respond(_shape_join(version)(join_result(req.member_id or "", E.INCONSISTENT_GROUP_PROTOCOL)))
                return
            del self.consumer_groups[group_id]  # an empty consumer group becomes a classic one
        super().join_group(req, version, client_id, client_host, respond)  # type: ignore[misc]

    def _validate_offset_commit(self, group: Group, generation: int, member_id: str,
                                instance_id: str | None) -> ErrorCode | None:
        cg = self.consumer_groups.get(group.group_id)
        if cg is None:
            return super()._validate_offset_commit(group, generation, member_id, instance_id)  # type: ignore[misc]
        return self._cg_validate_member_epoch(cg, member_id, generation)

    @staticmethod
    def _cg_validate_member_epoch(cg: ConsumerGroup, member_id: str | None, epoch: int) -> ErrorCode | None:
        """Kafka's ConsumerGroup.validateOffsetCommit: epoch -1 (admin tools, assign()-consumers)
        only while the group has no members; else the member's current epoch exactly."""
        if epoch < 0 and not cg.members:
            return None
        member = cg.members.get(member_id or "")
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        return E.STALE_MEMBER_EPOCH if epoch != member.member_epoch else None

    def offset_commit(self, req: Any, version: int) -> dict[str, Any]:
        gid = getattr(req, "group_id", None)
        if gid is not None and gid in self.consumer_groups and gid not in self.groups:
            self.groups[gid] = Group(gid, EMPTY, self._now())  # retention dropped the offsets holder
        return super().offset_commit(req, version)  # type: ignore[misc]

    def txn_offset_commit(self, req: Any, version: int) -> dict[str, Any]:
        gid = getattr(req, "group_id", None)
        if gid is not None and gid in self.consumer_groups and gid not in self.groups:
            self.groups[gid] = Group(gid, EMPTY, self._now())  # retention dropped the offsets holder
        return super().txn_offset_commit(req, version)  # type: ignore[misc]

    def _validate_txn_offset_commit(self, group: Group, generation: int, member_id: str,
                                    instance_id: str | None) -> ErrorCode | None:
        """Kafka's validateTransactionalOffsetCommit: a KIP-848 group checks the member epoch,
        STALE_MEMBER_EPOCH answered as ILLEGAL_GENERATION."""
        cg = self.consumer_groups.get(group.group_id)
        if cg is None:
            return super()._validate_txn_offset_commit(  # type: ignore[misc]
                group, generation, member_id, instance_id)
        err = self._cg_validate_member_epoch(cg, member_id, generation)
        return E.ILLEGAL_GENERATION if err is E.STALE_MEMBER_EPOCH else err

    def offset_fetch(self, req: Any, version: int) -> dict[str, Any]:
        if version < 9:
            return super().offset_fetch(req, version)  # type: ignore[misc]
        errors: dict[str, ErrorCode] = {}
        for g in req.groups or []:
            cg = self.consumer_groups.get(g.group_id)
            member_id = getattr(g, "member_id", None)
            if cg is not None and member_id and getattr(g, "member_epoch", -1) >= 0:  # else an admin fetch
                err = self._cg_validate_member_epoch(cg, member_id, getattr(g, "member_epoch", -1))
                if err is not None:
                    errors[g.group_id] = err
        out = super().offset_fetch(req, version)  # type: ignore[misc]
        for entry in out["groups"]:
            if entry["group_id"] in errors:
                entry["topics"] = []
                entry["error_code"] = int(errors[entry["group_id"]])
        return out

    def delete_group(self, group_id: str) -> int:
        cg = self.consumer_groups.get(group_id)
        if cg is not None and self._check_group_id(group_id, allow_empty=True) is None:
            if cg.members:
                return int(E.NON_EMPTY_GROUP)
            del self.consumer_groups[group_id]
            if group_id not in self.groups:
                return 0
        return super().delete_group(group_id)  # type: ignore[misc]

    def _on_retention_timer(self, now: int) -> None:
        super()._on_retention_timer(now)  # type: ignore[misc]
        for gid in [g for g, cg in self.consumer_groups.items() if not cg.members and g not in self.groups]:
            del self.consumer_groups[gid]  # empty, and no offsets left

    def _reset_consumer_groups(self) -> None:
        self.consumer_groups.clear()
