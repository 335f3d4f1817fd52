"""Group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the rebalance timers.

How a rebalance runs (Kafka's classic protocol, GroupCoordinator.scala):

1. A JoinGroup from a new member (or the leader, or a member with changed metadata) moves the
   group to PreparingRebalance. Each member's JoinGroup is parked (its `respond` held on the
   member) until every known member has rejoined, or the rebalance timeout (the largest
   `rebalance_timeout` of the members) passes; members that did not rejoin are then removed
   (static members are kept). A brand-new group first waits `group.initial.rebalance.delay.ms`,
   again while new members keep arriving, up to the rebalance timeout.
2. The join phase ends: generation + 1, the protocol is chosen by vote, every parked JoinGroup
   is answered; the leader's answer carries the member list. The group is CompletingRebalance.
3. Followers' SyncGroup requests are parked until the leader's SyncGroup brings the assignment;
   the group is persisted (a GroupMetadataValue record), becomes Stable and every parked
   SyncGroup is answered. Members that do not SyncGroup within the rebalance timeout are removed
   and the group rebalances again.
4. In Stable, members heartbeat within their session timeout or are removed (which starts a
   rebalance); during a rebalance heartbeats answer REBALANCE_IN_PROGRESS, which is how the
   other members learn they must rejoin (cooperative assignors rely on exactly this).

Since JoinGroup v4 a member without an id is given one with MEMBER_ID_REQUIRED and must rejoin
with it (KIP-394). A static member (`group.instance.id`, KIP-345) that joins again without its
member id replaces its old id, which is fenced (FENCED_INSTANCE_ID) from then on; in a Stable
group this needs no rebalance unless the group's protocol would change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode

from .base import Once, ShardBase, join_result, sync_result
from .group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    Callback,
    Group,
    Member,
)

E = ErrorCode


def _shape_join(version: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def shape(res: dict[str, Any]) -> dict[str, Any]:
        # Before v7 the protocol name is not nullable; from v7 on an empty one is sent as null.
        if version < 7 and res["protocol_name"] is None:
            res["protocol_name"] = ""
        elif version >= 7 and res["protocol_name"] == "":
            res["protocol_name"] = None
        return res

    return shape


def _shape_sync(res: dict[str, Any]) -> dict[str, Any]:
    return res


class MembershipMixin(ShardBase):
    # -- JoinGroup ----------------------------------------------------------------------------

    def join_group(self, req: Any, version: int, client_id: str | None, client_host: str,
                   respond: Callable[[dict[str, Any]], None]) -> None:
        """JoinGroup (v0-v9); `respond` is called exactly once, maybe later (tick, other calls)."""
        send = Once(respond, _shape_join(version))
        now = self._now()
        try:
            self._join(req, version, client_id or "", client_host, send, now)
        except BaseException:
            send(join_result(getattr(req, "member_id", "") or "", E.UNKNOWN_SERVER_ERROR))
            raise
        self._run_due(now)

    def _join(self, req: Any, version: int, client_id: str, client_host: str, send: Callback, now: int) -> None:
        group_id: str = req.group_id
        member_id: str = req.member_id or ""
        instance_id: str | None = getattr(req, "group_instance_id", None)
        session_timeout: int = req.session_timeout
        rebalance_timeout: int | None = getattr(req, "rebalance_timeout", None)
        if rebalance_timeout is None or version == 0:
            rebalance_timeout = session_timeout  # v0 has no rebalance timeout
        protocol_type: str = req.protocol_type or ""
        protocols = [(p.name, bytes(p.metadata)) for p in (req.protocols or [])]

        err = self._check_group_id(group_id, allow_empty=False)
        if err is not None:
            send(join_result(member_id, err))
            return
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout <= cfg.group_max_session_timeout_ms:
            send(join_result(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                send(join_result(member_id, E.UNKNOWN_MEMBER_ID))
                return
            group = self.groups[group_id] = Group(group_id, EMPTY, now)

        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self._cancel_member_timers(group, member_id)
            send(join_result("", E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, instance_id, version >= 4 and instance_id is None, version >= 9,
                                  client_id, client_host, rebalance_timeout, session_timeout, protocol_type,
                                  protocols, send, now)
        else:
            self._current_member_join(group, member_id, instance_id, client_id, client_host, rebalance_timeout,
                                      session_timeout, protocol_type, protocols, send, now)
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group, now)

    def _accept_joining_member(self, group: Group, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.awaiting_join is not None) or group.num_awaiting_join() < max_size
        return group.has(member_id) or group.size < max_size

    def _new_member_join(self, group: Group, instance_id: str | None, require_known_id: bool, can_skip: bool,
                         client_id: str, client_host: str, rebalance_timeout: int, session_timeout: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]], send: Callback, now: int) -> None:
        if group.is_(DEAD):
            send(join_result("", E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            send(join_result("", E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = Group.generate_member_id(client_id, instance_id)
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                self._replace_static_member(group, old_id, new_id, instance_id, protocols, rebalance_timeout,
                                            session_timeout, send, can_skip, now)
                return
        elif require_known_id:
            group.pending_members.add(new_id)
            self.timers.set(("pending", group.group_id, new_id), now + session_timeout)
            send(join_result(new_id, E.MEMBER_ID_REQUIRED))
            return
        member = Member(new_id, instance_id, client_id, client_host, rebalance_timeout, session_timeout,
                        protocol_type, protocols)
        self._add_member_and_rebalance(group, member, send, now)

    def _current_member_join(self, group: Group, member_id: str, instance_id: str | None, client_id: str,
                             client_host: str, rebalance_timeout: int, session_timeout: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]], send: Callback, now: int) -> None:
        if group.is_(DEAD):
            send(join_result(member_id, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, (name for name, _ in protocols)):
            send(join_result(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if member_id in group.pending_members:
            if instance_id is not None:  # a pending member id is never a static member's
                send(join_result(member_id, E.UNKNOWN_MEMBER_ID))
                return
            member = Member(member_id, None, client_id, client_host, rebalance_timeout, session_timeout,
                            protocol_type, protocols)
            self.timers.cancel(("pending", group.group_id, member_id))
            self._add_member_and_rebalance(group, member, send, now)
            return
        err = self._validate_current_member(group, member_id, instance_id)
        if err is not None:
            send(join_result(member_id, err))
            return
        member = group.members[member_id]
        if group.is_(PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, session_timeout, send, now)
        elif group.is_(COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost our JoinGroup answer: send it the current generation again.
                send(self._join_ok(group, member_id, leader_view=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, session_timeout,
                                                  send, now)
        elif group.is_(STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoins to have metadata changes (new partitions...) reassigned.
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout, session_timeout,
                                                  send, now)
            else:
                send(self._join_ok(group, member_id, leader_view=False))
        else:  # Empty: the member is unknown after all
            send(join_result(member_id, E.UNKNOWN_MEMBER_ID))

    def _join_ok(self, group: Group, member_id: str, leader_view: bool, leader: str | None = None,
                 skip_assignment: bool = False) -> dict[str, Any]:
        return join_result(
            member_id, E.NONE, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id if leader is None else leader, skip_assignment,
            group.member_list() if leader_view else [],
        )

    def _add_member_and_rebalance(self, group: Group, member: Member, send: Callback, now: int) -> None:
        member.is_new = True
        if group.is_(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, send)
        # A new member cannot heartbeat while its JoinGroup is parked: give it a join timeout.
        self._schedule_heartbeat(group, member, now, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(group, now)

    def _update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout: int,
                       session_timeout: int, send: Callback | None) -> None:
        previous = member.awaiting_join
        if previous is not None and previous is not send:
            # A newer JoinGroup supersedes a parked one; the old one still gets an answer.
            member.awaiting_join = None
            previous(join_result(member.member_id, E.REBALANCE_IN_PROGRESS))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout
        member.session_timeout_ms = session_timeout
        member.awaiting_join = send

    def _update_member_and_rebalance(self, group: Group, member: Member, protocols: list[tuple[str, bytes]],
                                     rebalance_timeout: int, session_timeout: int, send: Callback, now: int) -> None:
        self._update_member(member, protocols, rebalance_timeout, session_timeout, send)
        self._maybe_prepare_rebalance(group, now)

    def _replace_static_member(self, group: Group, old_id: str, new_id: str, instance_id: str,
                               protocols: list[tuple[str, bytes]], rebalance_timeout: int, session_timeout: int,
                               send: Callback, can_skip: bool, now: int) -> None:
        """A static member came back without its member id: it takes over, the old id is fenced."""
        current_leader = group.leader_id
        member = group.members[old_id]
        self._invoke_join(member, join_result(old_id, E.FENCED_INSTANCE_ID))
        self._invoke_sync(member, sync_result(E.FENCED_INSTANCE_ID))
        self._cancel_member_timers(group, old_id)
        group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member, now)
        self._update_member(member, protocols, rebalance_timeout, session_timeout, send)
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: persist the new id, answer at once.
                self._store_group(group, {m.member_id: m.assignment for m in group.members.values()})
                if can_skip:
                    is_leader = group.is_leader(new_id)
                    result = self._join_ok(group, new_id, leader_view=is_leader, skip_assignment=is_leader)
                else:
                    # Older clients must not think they lead: answer with the previous leader id.
                    result = self._join_ok(group, new_id, leader_view=False, leader=current_leader or "")
                self._invoke_join(member, result)
            else:
                self._maybe_prepare_rebalance(group, now)
        elif group.is_(COMPLETING_REBALANCE):
            # The leader may be assigning to the old id already: start over.
            self._prepare_rebalance(group, now)

    # -- the join phase -----------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, now: int) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: Group, now: int) -> None:
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS, now)
        group.pending_sync.clear()
        self.timers.cancel(("sync", group.group_id))
        if group.is_(EMPTY):
            delay = self.config.group_initial_rebalance_delay_ms
            group.join_phase = ("initial", delay, max(group.rebalance_timeout_ms() - delay, 0))
            deadline = now + delay
        else:
            group.join_phase = ("normal",)
            deadline = now + group.rebalance_timeout_ms()
        group.transition_to(PREPARING_REBALANCE, now)
        self.timers.set(("join", group.group_id), deadline)
        self._try_complete_join(group, now)

    def _try_complete_join(self, group: Group, now: int) -> None:
        """Ends the join phase early once every known member has rejoined (not during the initial delay)."""
        if group.is_(PREPARING_REBALANCE) and group.join_phase == ("normal",) and group.has_all_members_joined():
            self.timers.cancel(("join", group.group_id))
            group.join_phase = None
            self._complete_join(group, now)

    def _on_join_timer(self, group: Group, now: int) -> None:
        phase = group.join_phase
        if phase is None or not group.is_(PREPARING_REBALANCE):
            return
        if phase[0] == "initial":
            _, delay, remaining = phase
            if group.new_member_added and remaining != 0:
                # Members keep arriving: wait a little longer, within the rebalance timeout.
                group.new_member_added = False
                next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
                group.join_phase = ("initial", next_delay, max(remaining - delay, 0))
                self.timers.set(("join", group.group_id), now + next_delay)
                return
        group.join_phase = None
        group.new_member_added = False
        self._complete_join(group, now)

    def _complete_join(self, group: Group, now: int) -> None:
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self._remove_member(group, member)
        if group.is_(DEAD):
            return
        if group.members and not group.elect_joined_leader():
            # Only static members are left and none rejoined: wait another rebalance timeout.
            group.join_phase = ("normal",)
            self.timers.set(("join", group.group_id), now + max(group.rebalance_timeout_ms(), 1))
            return
        group.init_next_generation(now)
        if group.is_(EMPTY):
            self._store_group(group, {})
            return
        for member in list(group.members.values()):
            result = self._join_ok(group, member.member_id, leader_view=group.is_leader(member.member_id))
            self._invoke_join(member, result)
            self._schedule_heartbeat(group, member, now)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        self.timers.set(("sync", group.group_id), now + group.rebalance_timeout_ms())

    def _remove_member(self, group: Group, member: Member) -> None:
        """Drop a member; whatever it still waits for is answered with UNKNOWN_MEMBER_ID."""
        self._invoke_join(member, join_result("", E.UNKNOWN_MEMBER_ID))
        self._invoke_sync(member, sync_result(E.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        self._cancel_member_timers(group, member.member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member, now: int) -> None:
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        elif group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group, now)

    def _remove_pending_member_and_update_group(self, group: Group, member_id: str, now: int) -> None:
        group.remove(member_id)
        self._cancel_member_timers(group, member_id)
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(group, now)

    def _on_heartbeat_timer(self, group: Group, member_id: str, now: int) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if not member.is_new and (member.awaiting_join is not None or member.awaiting_sync is not None):
            return  # a member waiting on the rebalance is alive; its timer restarts with the answer
        self._remove_member_and_update_group(group, member, now)

    def _on_pending_timer(self, group: Group, member_id: str, now: int) -> None:
        if member_id in group.pending_members:
            self._remove_pending_member_and_update_group(group, member_id, now)

    def _on_sync_timer(self, group: Group, now: int) -> None:
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync:
            return
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        self._prepare_rebalance(group, now)

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync_group(self, req: Any, version: int, respond: Callable[[dict[str, Any]], None]) -> None:
        """SyncGroup (v0-v5); followers' answers wait for the leader's assignment."""
        send = Once(respond, _shape_sync)
        now = self._now()
        try:
            self._sync(req, version, send, now)
        except BaseException:
            send(sync_result(E.UNKNOWN_SERVER_ERROR))
            raise
        self._run_due(now)

    def _sync(self, req: Any, version: int, send: Callback, now: int) -> None:
        protocol_type: str | None = getattr(req, "protocol_type", None)
        protocol_name: str | None = getattr(req, "protocol_name", None)
        if version >= 5 and (protocol_type is None or protocol_name is None):
            send(sync_result(E.INCONSISTENT_GROUP_PROTOCOL))  # mandatory from v5 on
            return
        err = self._check_group_id(req.group_id, allow_empty=False)
        if err is not None:
            send(sync_result(err))
            return
        group = self.groups.get(req.group_id)
        if group is None:
            send(sync_result(E.UNKNOWN_MEMBER_ID))
            return
        member_id: str = req.member_id or ""
        if group.is_(DEAD):
            err = E.COORDINATOR_NOT_AVAILABLE
        else:
            err = self._validate_current_member(group, member_id, getattr(req, "group_instance_id", None))
            if err is None and req.generation_id != group.generation_id:
                err = E.ILLEGAL_GENERATION
            if err is None and protocol_type is not None and protocol_type != group.protocol_type:
                err = E.INCONSISTENT_GROUP_PROTOCOL
            if err is None and protocol_name is not None and protocol_name != group.protocol_name:
                err = E.INCONSISTENT_GROUP_PROTOCOL
        if err is not None:
            send(sync_result(err))
            return
        if group.is_(EMPTY):
            send(sync_result(E.UNKNOWN_MEMBER_ID))
            return
        if group.is_(PREPARING_REBALANCE):
            send(sync_result(E.REBALANCE_IN_PROGRESS))
            return
        member = group.members[member_id]
        if group.is_(STABLE):
            self._synced(group, member_id)
            send(sync_result(E.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._schedule_heartbeat(group, member, now)
            return
        # CompletingRebalance: park the answer until the leader's assignment arrives.
        previous = member.awaiting_sync
        member.awaiting_sync = send
        if previous is not None and previous is not send:
            previous(sync_result(E.REBALANCE_IN_PROGRESS))
        self._synced(group, member_id)
        if group.is_leader(member_id):
            given = {a.member_id: bytes(a.assignment) for a in (req.assignments or [])}
            assignment = {mid: given.get(mid, b"") for mid in group.members}
            self._store_group(group, assignment)
            for m in group.members.values():
                m.assignment = assignment[m.member_id]
            self._propagate_assignment(group, E.NONE, now)
            group.transition_to(STABLE, now)
            self.completed_rebalances += 1

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self.timers.cancel(("sync", group.group_id))

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode, now: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error, now)

    def _propagate_assignment(self, group: Group, error: ErrorCode, now: int) -> None:
        for m in list(group.members.values()):
            if error == E.NONE:
                result = sync_result(E.NONE, group.protocol_type, group.protocol_name, m.assignment)
            else:
                result = sync_result(error)
            if self._invoke_sync(m, result):
                # Its session may have lapsed while it waited: start it again.
                self._schedule_heartbeat(group, m, now)

    # -- Heartbeat ----------------------------------------------------------------------------

    def heartbeat(self, req: Any, version: int) -> dict[str, Any]:
        """Heartbeat (v0-v4)."""
        now = self._now()
        err = self._heartbeat(req, now)
        self._run_due(now)
        return {"throttle_time": 0, "error_code": int(err)}

    def _heartbeat(self, req: Any, now: int) -> ErrorCode:
        err = self._check_group_id(req.group_id, allow_empty=False)
        if err is not None:
            return err
        group = self.groups.get(req.group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE
        member_id: str = req.member_id or ""
        err = self._validate_current_member(group, member_id, getattr(req, "group_instance_id", None))
        if err is not None:
            return err
        if req.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, group.members[member_id], now)
        return E.REBALANCE_IN_PROGRESS if group.is_(PREPARING_REBALANCE) else E.NONE

    # -- LeaveGroup ---------------------------------------------------------------------------

    def leave_group(self, req: Any, version: int) -> dict[str, Any]:
        """LeaveGroup: one member (v0-v2) or a batch by member id or group.instance.id (v3+)."""
        now = self._now()
        if version >= 3:
            leaving = [(m.member_id or "", getattr(m, "group_instance_id", None)) for m in (req.members or [])]
        else:
            leaving = [(req.member_id or "", None)]
        top, results = self._leave(req.group_id, leaving, now)
        self._run_due(now)
        if version >= 3:
            return {"throttle_time": 0, "error_code": int(top), "members": [
                {"member_id": mid, "group_instance_id": iid, "error_code": int(e)} for mid, iid, e in results
            ]}
        if top == E.NONE and results:
            top = results[0][2]
        return {"throttle_time": 0, "error_code": int(top)}

    def _leave(self, group_id: str, leaving: list[tuple[str, str | None]],
               now: int) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        err = self._check_group_id(group_id, allow_empty=False)
        if err is not None:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [(mid, iid, E.UNKNOWN_MEMBER_ID) for mid, iid in leaving]
        if group.is_(DEAD):
            return E.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # Removal by group.instance.id (the admin client's removeMembersFromConsumerGroup).
                current = group.static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_member_and_update_group(group, group.members[current], now)
                results.append((member_id, instance_id, E.NONE))
            elif member_id in group.pending_members:
                self._remove_pending_member_and_update_group(group, member_id, now)
                results.append((member_id, instance_id, E.NONE))
            else:
                e = self._validate_current_member(group, member_id, instance_id)
                if e is None:
                    self._remove_member_and_update_group(group, group.members[member_id], now)
                results.append((member_id, instance_id, e if e is not None else E.NONE))
        return E.NONE, results

    # -- loading and unloading ----------------------------------------------------------------

    def _on_group_loaded(self, group: Group, now: int) -> None:
        """Sessions of loaded members start now; an over-full group rebalances at once."""
        if group.size > self.config.group_max_size:
            self._prepare_rebalance(group, now)
        for m in group.members.values():
            self._schedule_heartbeat(group, m, now)

    def _fail_pending_calls(self, group: Group, error: ErrorCode) -> None:
        for m in list(group.members.values()):
            self._invoke_join(m, join_result(m.member_id, error))
            self._invoke_sync(m, sync_result(error))
